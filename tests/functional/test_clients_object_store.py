"""ObjectStore against the real Swift (Keystone + tempurl) of the dev cloud.

The store is made as on a real cloud: a Keystone session, the object-store
endpoint of its catalog, the account of the session's project (the demo
user's; the admin's project is the other account).  Swift's own auth
(tempauth, ``from_tempauth``) is tested on its own account at the end.

Containers are named with a per-test uuid prefix; each test checks that no
container with its prefix is left behind.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from keystoneauth1.identity import v3

from swflows import conf as sw_conf
from swflows.clients import NO_RETRY, ObjectStore
from swflows.clients.cloud import Clients
from swflows.exceptions import CloudError, ValidationError
from tests.functional import conftest


def keystone_store(
    devcloud: dict[str, Any], who: str = "demo", **kw: Any
) -> ObjectStore:
    """``who``'s ("demo" or "admin") account, from the catalog."""
    return ObjectStore.from_session(conftest.keystone_session(devcloud, who), **kw)


@pytest.fixture(scope="module")
def store(devcloud: dict[str, Any]) -> ObjectStore:
    return keystone_store(devcloud)


def test_the_account_is_the_sessions_project(
    devcloud: dict[str, Any], store: ObjectStore
) -> None:
    accounts = devcloud["swift"]["accounts"]
    assert store.account_url == accounts["demo"]
    assert keystone_store(devcloud, "admin").account_url == accounts["admin"]
    # every interface of the catalog names the same account
    for interface in ("public", "internal", "admin"):
        found = keystone_store(devcloud, interface=interface)
        assert found.account_url == accounts["demo"], interface


@pytest.fixture
def prefix(store: ObjectStore) -> Iterator[str]:
    tag = f"swft-{uuid.uuid4().hex[:12]}"
    yield tag
    left = store.list_containers(prefix=tag)
    for name in left:
        store.delete_container(name, force=True)
    assert left == []


@pytest.fixture
def container(store: ObjectStore, prefix: str) -> Iterator[str]:
    name = f"{prefix}-c"
    store.ensure_container(name)
    yield name
    store.delete_container(name, force=True)


def test_container_lifecycle(store: ObjectStore, prefix: str) -> None:
    name = f"{prefix}-life"
    assert not store.container_exists(name)
    store.ensure_container(name)
    store.ensure_container(name)
    assert store.container_exists(name)
    assert store.list_containers(prefix=prefix) == [name]
    assert store.delete_container(name) is True
    assert store.delete_container(name) is False
    assert not store.container_exists(name)
    assert store.list_containers(prefix=prefix) == []


def test_object_round_trip(store: ObjectStore, container: str) -> None:
    body = b'{"deploy_status_code": 0}'
    etag = store.put_object(container, "d1/0", body)
    assert etag == hashlib.md5(body).hexdigest()  # noqa: S324 - Swift's ETag

    got = store.get_object(container, "d1/0")
    assert got is not None
    assert (got.name, got.etag, got.body) == ("d1/0", etag, body)
    head = store.head_object(container, "d1/0")
    assert head is not None
    assert (head.etag, head.bytes) == (etag, len(body))
    [listed] = store.list_objects(container)
    # One time format whichever call produced it.
    assert listed.last_modified == head.last_modified == got.last_modified
    assert (listed.name, listed.etag, listed.bytes) == ("d1/0", etag, len(body))

    unchanged = store.get_object(container, "d1/0", if_none_match=etag)
    assert unchanged is not None and not unchanged.modified
    assert (unchanged.etag, unchanged.last_modified) == (etag, got.last_modified)
    store.put_object(container, "d1/0", b"{}")
    changed = store.get_object(container, "d1/0", if_none_match=etag)
    assert changed is not None and changed.body == b"{}"

    assert store.delete_object(container, "d1/0") is True
    assert store.delete_object(container, "d1/0") is False
    assert store.get_object(container, "d1/0") is None
    assert store.head_object(container, "d1/0") is None
    assert store.list_objects(container) == []


def test_missing_container_reads_as_empty(store: ObjectStore, prefix: str) -> None:
    assert store.list_objects(f"{prefix}-none") == []
    assert store.get_object(f"{prefix}-none", "o") is None
    assert store.delete_object(f"{prefix}-none", "o") is False


def test_listing_follows_markers_one_request_per_page(
    devcloud: dict[str, Any], container: str
) -> None:
    paged = keystone_store(devcloud, listing_page=2)
    names = ["d0/0", "d1/0", "d2/0", "o0", "o1"]
    for name in names:
        paged.put_object(container, name, b"")

    def listed(prefix: str | None) -> tuple[list[str], int]:
        before = paged.listing_requests
        found = [o.name for o in paged.list_objects(container, prefix=prefix)]
        return found, paged.listing_requests - before

    # A short page ends the listing; a full one needs one more request.
    assert listed(None) == (names, 3)  # 2 + 2 + 1
    assert listed("d") == (names[:3], 2)  # 2 + 1
    assert listed("o") == (names[3:], 2)  # 2 + 0
    assert listed("x") == ([], 1)


def test_delete_container_force(store: ObjectStore, prefix: str) -> None:
    name = f"{prefix}-full"
    store.ensure_container(name)
    store.put_object(name, "a", b"1")
    store.put_object(name, "b", b"2")
    with pytest.raises(CloudError) as caught:
        store.delete_container(name)
    assert (caught.value.status, caught.value.retryable) == (409, False)
    assert store.delete_container(name, force=True) is True
    assert not store.container_exists(name)


def test_temp_urls_need_no_token_and_refuse_misuse(
    store: ObjectStore, container: str
) -> None:
    key = store.tempurl_key()
    assert store.tempurl_key() == key  # set only if absent, never replaced
    expires = int(time.time()) + 300
    put_url = store.temp_url(container, "sig", "PUT", expires)
    get_url = store.temp_url(container, "sig", "GET", expires)
    assert put_url.startswith(store.account_url + f"/{container}/sig?")
    assert f"temp_url_expires={expires}" in put_url

    signal = b'{"deploy_status_code": 0}'
    resp = requests.put(
        put_url, data=signal, headers={"Content-Type": "application/json"}, timeout=30
    )
    assert resp.status_code == 201
    got = requests.get(get_url, timeout=30)
    assert (got.status_code, got.content) == (200, signal)
    assert requests.head(get_url, timeout=30).status_code == 200

    # Each URL is bound to its method, its object, its expiry and the key.
    assert requests.put(get_url, data=b"x", timeout=30).status_code == 401
    assert requests.get(put_url, timeout=30).status_code == 401
    assert requests.delete(get_url, timeout=30).status_code == 401
    other = get_url.replace(f"/{container}/sig?", f"/{container}/other?")
    assert requests.get(other, timeout=30).status_code == 401
    expired = store.temp_url(container, "sig", "GET", int(time.time()) - 1)
    assert requests.get(expired, timeout=30).status_code == 401
    tampered = get_url.replace(
        f"temp_url_expires={expires}", f"temp_url_expires={expires + 1}"
    )
    assert requests.get(tampered, timeout=30).status_code == 401
    assert store.get_object(container, "sig") is not None


def test_temp_url_key_is_set_only_when_absent(
    devcloud: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # The admin project's account is the one the functional tests leave
    # alone. Its key is absent on a fresh dev cloud (then this sets it and
    # says so) and kept on a reused one (then nothing is logged and nothing
    # changes).
    second = keystone_store(devcloud, "admin")
    had = second.connection.head_account().get("x-account-meta-temp-url-key")
    with caplog.at_level(logging.INFO, logger="swflows.clients.object_store"):
        key = second.tempurl_key()
    set_messages = [r for r in caplog.records if "had no TempURL key" in r.getMessage()]
    if had:
        assert key == had and set_messages == []
    else:
        assert len(set_messages) == 1 and key not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="swflows.clients.object_store"):
        assert keystone_store(devcloud, "admin").tempurl_key() == key
    assert caplog.records == []


def test_temp_url_of_one_account_is_refused_by_another(
    devcloud: dict[str, Any], store: ObjectStore, container: str
) -> None:
    store.put_object(container, "o", b"x")
    second = keystone_store(devcloud, "admin")
    forged = build_for_account(second, store.account_url, container, "o")
    assert requests.get(forged, timeout=30).status_code == 401


def build_for_account(
    signer: ObjectStore, account_url: str, container: str, name: str
) -> str:
    """A URL for ``account_url`` signed with ``signer``'s (other) account key."""
    from swflows.clients.object_store import build_temp_url

    return build_temp_url(
        account_url, container, name, "GET", int(time.time()) + 60, signer.tempurl_key()
    )


def test_expiry_must_be_absolute(store: ObjectStore, container: str) -> None:
    with pytest.raises(ValidationError, match="absolute"):
        store.temp_url(container, "o", "GET", 600)


def test_endpoint_override_skips_the_catalog(
    devcloud: dict[str, Any], store: ObjectStore, prefix: str
) -> None:
    # a token plugin without a catalog: the endpoint must be given
    session = conftest.keystone_session(devcloud)
    token = session.get_token()
    bare = ks_session.Session(auth=token_endpoint.Token(None, token))
    given = ObjectStore.from_session(
        bare, endpoint_override=devcloud["swift"]["accounts"]["demo"]
    )
    assert given.account_url == store.account_url
    name = f"{prefix}-override"
    given.ensure_container(name)
    assert given.put_object(name, "o", b"1") == hashlib.md5(b"1").hexdigest()  # noqa: S324
    assert store.get_object(name, "o") is not None
    assert given.delete_container(name, force=True) is True


def test_an_account_refuses_another_projects_token(
    devcloud: dict[str, Any], store: ObjectStore
) -> None:
    admin_token = conftest.keystone_session(devcloud, "admin").get_token()
    resp = requests.get(
        store.account_url, headers={"X-Auth-Token": admin_token}, timeout=30
    )
    assert resp.status_code == 403


def test_a_bad_password_is_a_clean_error(devcloud: dict[str, Any]) -> None:
    ks = devcloud["keystone"]
    wrong = "not-the-password-123"
    auth = v3.Password(auth_url=ks["auth_url"], **{**ks["demo"], "password": wrong})
    bad = ObjectStore.from_session(ks_session.Session(auth=auth), retry=NO_RETRY)
    with pytest.raises(CloudError) as caught:
        bad.container_exists("anything")
    # refused by Keystone, before Swift is reached
    assert (caught.value.service, caught.value.status) == ("identity", 401)
    assert wrong not in str(caught.value)


# -- Swift's own auth: [object_store] auth_version = v1 ------------------------


def test_tempauth_store(devcloud: dict[str, Any], prefix: str, tmp_path: Path) -> None:
    # as an operator of a Swift without Keystone configures it
    auth = devcloud["swift"]["tempauth"]
    path = tmp_path / "swflows.conf"
    path.write_text(
        "[object_store]\nauth_version = v1\n"
        f"v1_auth_url = {auth['auth_url']}\n"
        f"v1_user = {auth['user']}\nv1_key = {auth['key']}\n"
    )
    v1 = Clients.from_conf(sw_conf.get_conf(config_files=[str(path)])).object_store
    # tempauth's accounts have their own prefix, beside Keystone's projects
    assert v1.account_url == devcloud["swift"]["proxy_url"] + "/v1/TEMPAUTH_test"
    name = f"{prefix}-v1"
    v1.ensure_container(name)
    assert v1.list_containers(prefix=prefix) == [name]
    assert v1.put_object(name, "o", b"1") == hashlib.md5(b"1").hexdigest()  # noqa: S324
    got = v1.get_object(name, "o")
    assert got is not None and got.body == b"1"
    expires = int(time.time()) + 60
    url = v1.temp_url(name, "o", "GET", expires)
    assert requests.get(url, timeout=30).content == b"1"
    assert v1.delete_container(name, force=True) is True


def test_wrong_key_is_a_clean_error(devcloud: dict[str, Any]) -> None:
    auth = devcloud["swift"]["tempauth"]
    wrong = "not-the-key-123"
    bad = ObjectStore.from_tempauth(
        auth["auth_url"], auth["user"], wrong, retry=NO_RETRY
    )
    with pytest.raises(CloudError) as caught:
        bad.container_exists("anything")
    assert (caught.value.service, caught.value.status) == ("object-store", 401)
    assert wrong not in str(caught.value)


def test_unreachable_swift_is_retryable(devcloud: dict[str, Any]) -> None:
    auth = devcloud["swift"]["tempauth"]
    dead = ObjectStore.from_tempauth(
        "http://127.0.0.1:9/auth/v1.0", auth["user"], auth["key"], retry=NO_RETRY
    )
    with pytest.raises(CloudError) as caught:
        dead.list_containers()
    assert caught.value.retryable and auth["key"] not in str(caught.value)


def test_a_container_removed_behind_the_clients_back(
    store: ObjectStore, prefix: str
) -> None:
    name = f"{prefix}-gone"
    store.put_object(name, "a/1", b"signal")  # container made too
    assert [o.name for o in store.list_container(name) or []] == ["a/1"]
    assert store.delete_container(name, force=True)
    assert store.list_container(name) is None
    assert store.list_objects(name) == []
    store.put_object(name, "a/2", b"{}")  # made again
    assert [o.name for o in store.list_objects(name)] == ["a/2"]
    store.delete_container(name, force=True)


def test_each_thread_has_its_own_connection(store: ObjectStore) -> None:
    seen = []
    thread = threading.Thread(target=lambda: seen.append(store.connection))
    thread.start()
    thread.join()
    assert seen[0] is not store.connection
    # and it works from there
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(store.list_containers()))
    thread.start()
    thread.join()
    assert out and isinstance(out[0], list)
