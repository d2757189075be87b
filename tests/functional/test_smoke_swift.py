"""Swift as swflows uses it: behind Keystone (in its catalog, an account
per project, open to the project's members), and TempURLs that need no
token, and what they refuse."""

import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3
from swiftclient import client as swift_client
from swiftclient.utils import generate_temp_url

KEY_HEADER = "x-account-meta-temp-url-key"


def account_temp_url_key(conn: swift_client.Connection) -> str:
    """The account's TempURL key, set first if the account has none (as
    Heat does: other tests may be using the same account concurrently)."""
    if KEY_HEADER not in conn.head_account():
        conn.post_account({KEY_HEADER: uuid.uuid4().hex})
    return str(conn.head_account()[KEY_HEADER])


@pytest.fixture
def container(swift_conn: swift_client.Connection) -> Iterator[str]:
    name = "smoke-" + uuid.uuid4().hex
    swift_conn.put_container(name)
    yield name
    for obj in swift_conn.get_container(name)[1]:
        swift_conn.delete_object(name, obj["name"])
    swift_conn.delete_container(name)


def forge(url: str) -> str:
    """The same URL with one character of the signature changed."""
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    sig = query["temp_url_sig"]
    query["temp_url_sig"] = sig[:-1] + ("0" if sig[-1] != "0" else "1")
    return parts._replace(query=urlencode(query)).geturl()


def test_tempurl_put_and_get_without_token(
    devcloud: dict[str, Any], swift_conn: swift_client.Connection, container: str
) -> None:
    storage_url, _token = swift_conn.get_auth()
    key = account_temp_url_key(swift_conn)
    path = f"{urlsplit(storage_url).path}/{container}/deploy1"
    proxy = devcloud["swift"]["proxy_url"]
    expires = int(time.time()) + 300

    def temp_url(method: str, when: int = expires, digest: str = "sha256") -> str:
        signed = generate_temp_url(
            path, when, key, method, absolute=True, digest=digest
        )
        return f"{proxy}{signed}"

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


def test_each_project_finds_its_account_in_the_catalog(
    devcloud: dict[str, Any], swift_conn: swift_client.Connection
) -> None:
    ks, swift = devcloud["keystone"], devcloud["swift"]
    for who in ("demo", "admin"):
        auth = v3.Password(auth_url=ks["auth_url"], **ks[who])
        session = ks_session.Session(auth=auth)
        access = auth.get_access(session)
        account = f"{swift['proxy_url']}/v1/AUTH_{access.project_id}"
        assert swift["accounts"][who] == account
        for interface in ("public", "internal", "admin"):
            found = access.service_catalog.url_for(
                service_type="object-store", interface=interface
            )
            assert found == account, (who, interface)
    assert swift_conn.get_auth()[0] == swift["accounts"]["demo"]


def test_an_account_is_its_project_members_only(
    devcloud: dict[str, Any],
    keystone_admin_session: ks_session.Session,
    swift_conn: swift_client.Connection,
) -> None:
    """member (and admin) own their project's account; a reader of the
    project and another project's member are refused."""
    ks = devcloud["keystone"]
    demo_account = devcloud["swift"]["accounts"]["demo"]
    admin_token = keystone_admin_session.get_token()
    other = requests.head(demo_account, headers={"X-Auth-Token": admin_token})
    assert other.status_code == 403

    api = ks["auth_url"]
    password = uuid.uuid4().hex
    user = keystone_admin_session.post(
        api + "/users",
        json={
            "user": {
                "name": "smoke-reader-" + uuid.uuid4().hex[:8],
                "password": password,
                "domain_id": "default",
            }
        },
    ).json()["user"]
    try:
        [reader] = keystone_admin_session.get(
            api + "/roles", params={"name": "reader"}
        ).json()["roles"]
        project = demo_account.rsplit("AUTH_", 1)[1]
        keystone_admin_session.put(
            f"{api}/projects/{project}/users/{user['id']}/roles/{reader['id']}"
        )
        auth = v3.Password(
            auth_url=api, user_id=user["id"], password=password, project_id=project
        )
        token = ks_session.Session(auth=auth).get_token()
        refused = requests.head(demo_account, headers={"X-Auth-Token": token})
        assert refused.status_code == 403
    finally:
        keystone_admin_session.delete(f"{api}/users/{user['id']}")
    assert swift_conn.head_account() is not None  # the demo member's own


def test_tempauth_keeps_to_its_own_accounts(devcloud: dict[str, Any]) -> None:
    """Swift's own auth, kept for swflows' [object_store] auth_version = v1,
    has accounts of its own prefix and no access to Keystone's."""
    auth = devcloud["swift"]["tempauth"]
    got = requests.get(
        auth["auth_url"],
        headers={"X-Auth-User": auth["user"], "X-Auth-Key": auth["key"]},
    )
    assert got.status_code == 200
    token, url = got.headers["X-Auth-Token"], got.headers["X-Storage-Url"]
    assert url == devcloud["swift"]["proxy_url"] + "/v1/TEMPAUTH_test"
    # 204 once the account exists, 200 for the listing Swift makes up for
    # an account no request has created yet (account_autocreate)
    own = requests.head(url, headers={"X-Auth-Token": token})
    assert own.status_code in (200, 204)
    demo_account = devcloud["swift"]["accounts"]["demo"]
    refused = requests.head(demo_account, headers={"X-Auth-Token": token})
    assert refused.status_code in (401, 403)
