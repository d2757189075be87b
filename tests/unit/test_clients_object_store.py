"""The pure parts of the Swift adapter: TempURL building, time formats,
and what writes and listings ask of their connection."""

from __future__ import annotations

import concurrent.futures
import hashlib
import hmac
import threading
import urllib.parse
from typing import Any

import pytest
from swiftclient import exceptions as swift_exc

from swflows.clients import object_store
from swflows.clients.base import NO_RETRY
from swflows.exceptions import CloudError, ValidationError

ACCOUNT = "http://127.0.0.1:18080/v1/AUTH_test"
EXPIRES = 2_000_000_000


def _query(url: str) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))


def test_temp_url_signs_method_absolute_expiry_and_full_path() -> None:
    url = object_store.build_temp_url(ACCOUNT, "signals", "d1/0", "put", EXPIRES, "k")
    parts = urllib.parse.urlsplit(url)
    assert (parts.scheme, parts.netloc) == ("http", "127.0.0.1:18080")
    assert parts.path == "/v1/AUTH_test/signals/d1/0"
    query = _query(url)
    assert query["temp_url_expires"] == str(EXPIRES)
    body = f"PUT\n{EXPIRES}\n/v1/AUTH_test/signals/d1/0".encode()
    assert query["temp_url_sig"] == hmac.new(b"k", body, hashlib.sha256).hexdigest()


def test_temp_url_quotes_the_path_but_signs_it_unquoted() -> None:
    url = object_store.build_temp_url(ACCOUNT, "c", "a b?é", "GET", EXPIRES, "k")
    assert urllib.parse.urlsplit(url).path == "/v1/AUTH_test/c/a%20b%3F%C3%A9"
    body = f"GET\n{EXPIRES}\n/v1/AUTH_test/c/a b?é".encode()
    expected = hmac.new(b"k", body, hashlib.sha256).hexdigest()
    assert _query(url)["temp_url_sig"] == expected


def test_temp_url_sha512_form() -> None:
    url = object_store.build_temp_url(ACCOUNT, "c", "o", "GET", EXPIRES, "k", "sha512")
    assert _query(url)["temp_url_sig"].startswith("sha512:")


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("c", "o", "PATCH", EXPIRES), "method"),
        (("c", "o", "GET", 600), "expires_at"),
        (("c", "o", "GET", float(EXPIRES)), "expires_at"),
        (("", "o", "GET", EXPIRES), "container"),
        (("a/b", "o", "GET", EXPIRES), "container"),
        (("c", "", "GET", EXPIRES), "name"),
    ],
)
def test_temp_url_refuses_bad_input(
    args: tuple[str, str, str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        object_store.build_temp_url(ACCOUNT, *args, key="k")
    assert caught.value.field == field


def test_temp_url_refuses_unknown_digest() -> None:
    with pytest.raises(ValidationError, match="digest"):
        object_store.build_temp_url(ACCOUNT, "c", "o", "GET", EXPIRES, "k", "md5")


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"x-timestamp": "1700000000.12345"}, "2023-11-14T22:13:20.123450"),
        ({"x-timestamp": "1700000000.00000"}, "2023-11-14T22:13:20.000000"),
        ({"x-timestamp": "1700000000"}, "2023-11-14T22:13:20.000000"),
        (
            {"last-modified": "Tue, 14 Nov 2023 22:13:21 GMT"},
            "2023-11-14T22:13:21.000000",
        ),
    ],
)
def test_listing_time(headers: dict[str, str], expected: str) -> None:
    assert object_store.listing_time(headers) == expected


def test_stored_object_modified() -> None:
    assert object_store.StoredObject("o", "e", "t", b"").modified
    assert not object_store.StoredObject("o", "e", "t", None).modified


class Connection:
    """A swiftclient connection whose object PUTs answer from a script."""

    url = ACCOUNT
    token = "t"

    def __init__(self, answers: list[int]) -> None:
        self.answers = answers
        self.calls: list[str] = []
        #: container -> its listing, for get_container
        self.containers: dict[str, list[dict[str, Any]]] = {}

    def put_container(self, name: str) -> None:
        self.calls.append(f"container {name}")

    def get_container(
        self, name: str, **_: object
    ) -> tuple[dict[str, str], list[dict[str, Any]]]:
        self.calls.append(f"list {name}")
        if name not in self.containers:
            raise swift_exc.ClientException("missing", http_status=404)
        return {}, self.containers[name]

    def put_object(self, container: str, name: str, body: bytes, **_: object) -> str:
        self.calls.append(f"object {container}/{name}")
        status = self.answers.pop(0)
        if status != 201:
            raise swift_exc.ClientException("refused", http_status=status)
        return "etag"


def _store(answers: list[int]) -> tuple[object_store.ObjectStore, Connection]:
    conn = Connection(answers)
    made = object_store.ObjectStore(conn, retry=NO_RETRY)
    return made, conn


def test_ensure_container_asks_once_per_container() -> None:
    store, conn = _store([])
    store.ensure_container("c")
    store.ensure_container("c")
    store.ensure_container("d")
    assert conn.calls == ["container c", "container d"]


def test_a_missing_container_lists_as_none_and_is_made_again() -> None:
    store, conn = _store([])
    store.ensure_container("c")
    conn.containers = {}  # removed behind the client's back
    assert store.list_container("c") is None
    assert store.list_objects("c") == []
    store.ensure_container("c")  # forgotten by the listing: asked again
    assert conn.calls == ["container c", "list c", "list c", "container c"]
    conn.containers = {
        "c": [{"name": "a/1", "hash": "e", "bytes": 2, "last_modified": "t"}]
    }
    listed = store.list_container("c")
    assert listed is not None and [o.name for o in listed] == ["a/1"]


def test_put_object_makes_a_missing_container_and_writes_once_more() -> None:
    store, conn = _store([201, 404, 201])
    assert store.put_object("c", "a", b"{}") == "etag"
    assert store.put_object("c", "b", b"{}") == "etag"
    assert conn.calls == ["object c/a", "object c/b", "container c", "object c/b"]
    store, conn = _store([404, 404])
    with pytest.raises(CloudError) as exc:
        store.put_object("c", "a", b"{}")
    assert exc.value.status == 404
    assert conn.calls == ["object c/a", "container c", "object c/a"]


class KeylessAccount:
    """An account with no TempURL key, where two first callers can meet:
    a look that finds no key waits (briefly) for another caller's look,
    and a second key is written only once the first was read back."""

    url = "http://swift.example/v1/AUTH_keyless"
    token = "token"

    def __init__(self) -> None:
        self.headers: dict[str, str] = {}
        self.lock = threading.Lock()
        self.keyless_looks = 0
        self.posts = 0
        self.both_looked = threading.Event()
        self.first_read_back = threading.Event()

    def head_account(self) -> dict[str, str]:
        with self.lock:
            found = dict(self.headers)
            if object_store.TEMPURL_KEY_HEADER not in found:
                self.keyless_looks += 1
                if self.keyless_looks == 2:
                    self.both_looked.set()
            elif self.posts == 1:
                self.first_read_back.set()
        if object_store.TEMPURL_KEY_HEADER not in found:
            self.both_looked.wait(0.5)
        return found

    def post_account(self, headers: dict[str, str]) -> None:
        with self.lock:
            self.posts += 1
            second = self.posts == 2
        if second:
            self.first_read_back.wait(0.5)
        with self.lock:
            self.headers.update({k.lower(): v for k, v in headers.items()})


def test_first_callers_of_a_keyless_account_all_sign_with_its_key() -> None:
    # a burst of first deploys: each caller set a key of its own, and the
    # one that read its own back before the other wrote signed with a key
    # the account no longer had (every signal it made refused)
    account = KeylessAccount()
    stores = [object_store.ObjectStore(account, retry=NO_RETRY) for _ in range(2)]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        keys = list(pool.map(lambda s: s.tempurl_key(), stores))
    final = account.headers[object_store.TEMPURL_KEY_HEADER]
    assert keys == [final, final]
    assert account.posts == 1


class LateWriterAccount(KeylessAccount):
    """Another process found the account keyless too: its key lands right
    after this one read its own back."""

    def head_account(self) -> dict[str, str]:
        found = super().head_account()
        if self.posts == 1 and object_store.TEMPURL_KEY_HEADER in found:
            self.posts += 1
            with self.lock:
                self.headers[object_store.TEMPURL_KEY_HEADER] = "the-other-process"
        return found


def test_a_key_set_beside_another_process_is_the_one_the_account_keeps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(object_store, "KEY_SETTLE", 0.01)
    account = LateWriterAccount()
    account.both_looked.set()  # no second caller here: no rendezvous
    store = object_store.ObjectStore(account, retry=NO_RETRY)
    assert store.tempurl_key() == "the-other-process"


class ThirdReaderAccount(KeylessAccount):
    """Two processes found the account keyless; a third reads it between
    their writes (``reader``, called once the first key landed)."""

    def __init__(self) -> None:
        super().__init__()
        self.reader: Any = None
        self.read: list[str] = []

    def post_account(self, headers: dict[str, str]) -> None:
        super().post_account(headers)
        if self.posts == 1 and self.reader is not None:
            self.read.append(self.reader())


@pytest.mark.parametrize("seeded", [True, False])
def test_a_process_reading_between_two_first_writers_keeps_the_final_key(
    monkeypatch: pytest.MonkeyPatch, seeded: bool
) -> None:
    """Processes of one installation (one secret) set the same key on a
    keyless account; with random keys, a process that read the account
    between two first writers kept a key the account no longer had."""
    monkeypatch.setattr(object_store, "KEY_SETTLE", 0.01)
    # other processes: no lock of this one keeps them apart
    monkeypatch.setattr(object_store, "_key_lock", lambda url: threading.Lock())
    account = ThirdReaderAccount()
    seed = b"the installation's secret" if seeded else None

    def store() -> object_store.ObjectStore:
        return object_store.ObjectStore(account, retry=NO_RETRY, key_seed=seed)

    account.reader = store().tempurl_key
    writers = [store() for _ in range(2)]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        keys = list(pool.map(lambda s: s.tempurl_key(), writers))
    final = account.headers[object_store.TEMPURL_KEY_HEADER]
    assert account.posts == 2 and keys == [final, final]
    if seeded:
        assert account.read == [final]
    else:  # the hole the seed closes
        assert account.read != [final]


class FillingConnection(Connection):
    """A container that an object lands in after its first listing (a
    late writer, or a count not yet caught up): its first deletion is a
    409."""

    def __init__(self) -> None:
        super().__init__([])
        self.containers = {
            "c": [{"name": "a", "hash": "e", "bytes": 1, "last_modified": "t"}]
        }
        self.refusals = 1

    def delete_object(self, container: str, name: str) -> None:
        self.calls.append(f"delete {container}/{name}")
        listing = self.containers[container]
        listing[:] = [item for item in listing if item["name"] != name]
        if self.refusals:
            listing.append(
                {"name": "late", "hash": "e", "bytes": 1, "last_modified": "t"}
            )

    def delete_container(self, name: str) -> None:
        self.calls.append(f"delete {name}")
        if self.containers[name]:
            self.refusals -= 1
            raise swift_exc.ClientException("not empty", http_status=409)
        del self.containers[name]


def test_a_forced_container_deletion_empties_it_again_after_a_409() -> None:
    conn = FillingConnection()
    store = object_store.ObjectStore(conn, retry=NO_RETRY)
    assert store.delete_container("c", force=True) is True
    assert conn.calls == [
        "list c",
        "delete c/a",
        "delete c",
        "list c",
        "delete c/late",
        "delete c",
    ]
    # without force, a 409 is the caller's to see
    conn = FillingConnection()
    store = object_store.ObjectStore(conn, retry=NO_RETRY)
    with pytest.raises(CloudError) as caught:
        store.delete_container("c")
    assert caught.value.status == 409
    assert conn.calls == ["delete c"]
