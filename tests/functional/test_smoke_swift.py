"""Swift as swflows uses it: TempURLs that need no token, and what they refuse."""

import time
import uuid
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from swiftclient.utils import generate_temp_url

KEY_HEADER = "x-account-meta-temp-url-key"


def account_temp_url_key(conn):
    """The account's TempURL key, set first if the account has none (as
    Heat does: other tests may be using the same account concurrently)."""
    if KEY_HEADER not in conn.head_account():
        conn.post_account({KEY_HEADER: uuid.uuid4().hex})
    return conn.head_account()[KEY_HEADER]


@pytest.fixture
def container(swift_conn):
    name = "smoke-" + uuid.uuid4().hex
    swift_conn.put_container(name)
    yield name
    for obj in swift_conn.get_container(name)[1]:
        swift_conn.delete_object(name, obj["name"])
    swift_conn.delete_container(name)


def forge(url):
    """The same URL with one character of the signature changed."""
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    sig = query["temp_url_sig"]
    query["temp_url_sig"] = sig[:-1] + ("0" if sig[-1] != "0" else "1")
    return parts._replace(query=urlencode(query)).geturl()


def test_tempurl_put_and_get_without_token(devcloud, swift_conn, container):
    storage_url, _token = swift_conn.get_auth()
    key = account_temp_url_key(swift_conn)
    path = f"{urlsplit(storage_url).path}/{container}/deploy1"
    proxy = devcloud["swift"]["proxy_url"]
    expires = int(time.time()) + 300

    def temp_url(method, when=expires, digest="sha256"):
        return proxy + generate_temp_url(
            path, when, key, method, absolute=True, digest=digest
        )

    body = b'{"deploy_status_code": 0}'
    put = requests.put(
        temp_url("PUT"), data=body, headers={"Content-Type": "application/json"}
    )
    assert put.status_code == 201
    got = requests.get(temp_url("GET"))
    assert got.status_code == 200 and got.content == body

    refused = {
        "forged signature": forge(temp_url("PUT")),
        "expired": temp_url("PUT", when=int(time.time()) - 60),
        "GET signature used for PUT": temp_url("GET"),
        "sha1 digest": temp_url("PUT", digest="sha1"),
    }
    for why, url in refused.items():
        assert requests.put(url, data=b"x").status_code == 401, why
    assert requests.get(temp_url("GET")).content == body

    # A container listing needs the token: no TempURL, no anonymous access.
    assert requests.get(f"{storage_url}/{container}").status_code == 401
    assert [o["name"] for o in swift_conn.get_container(container)[1]] == ["deploy1"]
