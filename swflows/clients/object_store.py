"""Swift: containers, objects and TempURLs, over python-swiftclient.

TempURLs let an agent read its metadata or PUT its signal without any
Keystone user (heat-semantics §3.3).  The account TempURL key is created
only when the account has none, and that is logged, unlike Heat (§8 row 16).
"""

from __future__ import annotations

import dataclasses
import datetime
import email.utils
import hashlib
import hmac
import logging
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, TypeVar

import requests
import tenacity
from keystoneauth1 import exceptions as ksa_exc
from keystoneauth1 import session as ksa_session
from swiftclient import client as swift_client
from swiftclient import exceptions as swift_exc
from swiftclient import utils as swift_utils

from swflows.clients.base import (
    DEFAULT_RETRY,
    RetryPolicy,
    http_error,
    is_missing,
    ksa_error,
    retried,
    unreachable,
)
from swflows.exceptions import CloudError, ValidationError

LOG = logging.getLogger(__name__)

SERVICE = "object-store"
TEMPURL_KEY_HEADER = "x-account-meta-temp-url-key"
TEMPURL_METHODS = frozenset({"GET", "HEAD", "PUT", "POST", "DELETE"})
TEMPURL_DIGESTS = frozenset({"sha1", "sha256", "sha512"})
#: Swift's default (and usual maximum) listing page, ``container_listing_limit``.
LISTING_PAGE = 10_000
#: how long a forced container deletion keeps emptying a container that is
#: still found holding objects (409)
FORCE_DELETE_SECONDS = 30.0
#: Anything earlier is surely a duration passed by mistake (2001-09-09).
MIN_EPOCH = 1_000_000_000
CONTAINER_NAME_MAX = 256

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class ObjectInfo:
    """An object as a listing or a HEAD shows it.

    ``last_modified`` is always in the listing's form,
    ``YYYY-MM-DDTHH:MM:SS.ffffff`` (UTC), whichever call produced it, so
    values from both compare equal.
    """

    name: str
    etag: str
    last_modified: str
    bytes: int
    #: as written (listings show it; a HEAD does too)
    content_type: str = ""


@dataclasses.dataclass(frozen=True)
class StoredObject:
    """An object's content; ``body`` is None when If-None-Match matched."""

    name: str
    etag: str
    last_modified: str
    body: bytes | None

    @property
    def modified(self) -> bool:
        return self.body is not None


def listing_time(headers: dict[str, str]) -> str:
    """The listing form of an object's time, from HEAD/GET response headers.

    ``X-Timestamp`` keeps Swift's full precision, which is what listings show;
    ``Last-Modified`` (whole seconds) is the fallback.
    """
    stamp = headers.get("x-timestamp", "").split("_")[0]
    if stamp:
        seconds, _, fraction = stamp.partition(".")
        when = datetime.datetime.fromtimestamp(int(seconds), datetime.UTC)
        micros = (fraction + "000000")[:6]
        return when.strftime("%Y-%m-%dT%H:%M:%S.") + micros
    parsed = email.utils.parsedate_to_datetime(headers["last-modified"])
    return parsed.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")


def _etag(headers: dict[str, str]) -> str:
    return headers.get("etag", "").strip('"')


def build_temp_url(
    account_url: str,
    container: str,
    name: str,
    method: str,
    expires_at: int,
    key: str,
    digest: str = "sha256",
) -> str:
    """A full TempURL for one object, valid until ``expires_at`` (epoch s).

    The signature covers the unquoted path, as Swift's middleware checks it;
    the returned URL has the path quoted.
    """
    method = method.upper()
    if method not in TEMPURL_METHODS:
        raise ValidationError("method", f"must be one of {sorted(TEMPURL_METHODS)}")
    if digest not in TEMPURL_DIGESTS:
        raise ValidationError("digest", f"must be one of {sorted(TEMPURL_DIGESTS)}")
    if isinstance(expires_at, bool) or not isinstance(expires_at, int):
        raise ValidationError("expires_at", "must be an int (epoch seconds)")
    if expires_at < MIN_EPOCH:
        raise ValidationError(
            "expires_at", "must be an absolute epoch time, not a duration"
        )
    _check_container(container)
    if not name:
        raise ValidationError("name", "must not be empty")
    parts = urllib.parse.urlsplit(account_url)
    path = f"{parts.path.rstrip('/')}/{container}/{name}"
    signed: str = swift_utils.generate_temp_url(
        path, expires_at, key, method, absolute=True, digest=digest
    )
    query = signed[len(path) + 1 :]
    return urllib.parse.urlunsplit(
        (parts.scheme, parts.netloc, urllib.parse.quote(path), query, "")
    )


def _check_container(name: str) -> None:
    if not name or "/" in name or len(name) > CONTAINER_NAME_MAX:
        raise ValidationError(
            "container", f"must be 1 to {CONTAINER_NAME_MAX} chars, without '/'"
        )


class _NotModified(Exception):
    """A conditional GET matched (HTTP 304); carries the response headers."""

    def __init__(self, headers: dict[str, str]) -> None:
        super().__init__("not modified")
        self.headers = headers


#: seconds between two reads of a TempURL key just set, and how many reads
#: at most, until the writers that raced to set it are done
KEY_SETTLE = 1.0
KEY_READS = 5

#: one establishment of an account's TempURL key at a time in this process
_KEY_LOCKS: dict[str, threading.Lock] = {}
_KEY_LOCKS_GUARD = threading.Lock()


def new_tempurl_key(seed: bytes | None, account_url: str) -> str:
    """The key to set on a keyless account: with a ``seed`` (the
    installation's secret), one derived from it and the account, the same
    in every process that shares it, so processes finding the account
    keyless together set the same key, and one reading the account between
    their writes keeps the key the account keeps; else a random one
    (:meth:`ObjectStore._settled_key` then settles on the last written)."""
    if seed is None:
        return secrets.token_hex(32)
    message = b"tempurl-key:" + account_url.encode()
    return hmac.new(seed, message, hashlib.sha256).hexdigest()


def _key_lock(account_url: str) -> threading.Lock:
    with _KEY_LOCKS_GUARD:
        return _KEY_LOCKS.setdefault(account_url, threading.Lock())


class ObjectStore:
    """One Swift account.

    ``connection`` should be made with ``retries=0`` (the classmethods do):
    retrying is this adapter's job.  A swiftclient connection is not
    thread-safe: given ``connect``, a factory of further connections, each
    thread gets its own (so a runner's threads reach Swift side by side);
    without it, calls on the one connection are serialised.
    """

    def __init__(
        self,
        connection: swift_client.Connection,
        *,
        connect: Callable[[], swift_client.Connection] | None = None,
        listing_page: int = LISTING_PAGE,
        retry: RetryPolicy = DEFAULT_RETRY,
        key_seed: bytes | None = None,
    ) -> None:
        self._first = connection
        self._key_seed = key_seed  # see new_tempurl_key
        self._connect = connect
        self._local = threading.local()
        self._local.connection = connection
        self.listing_page = listing_page
        self.retry_policy = retry
        #: GET requests made for listings, for reporting requests per poll.
        self.listing_requests = 0
        self._lock = threading.Lock()
        self._tempurl_key: str | None = None
        #: containers known to exist (made or seen by this client)
        self._containers: set[str] = set()

    @property
    def connection(self) -> swift_client.Connection:
        """The calling thread's connection."""
        conn = getattr(self._local, "connection", None)
        if conn is None:
            if self._connect is None:
                return self._first
            conn = self._connect()
            # reuse the account URL and token the first connection got
            conn.url, conn.token = self._first.url, self._first.token
            self._local.connection = conn
        return conn

    @classmethod
    def from_session(
        cls,
        session: ksa_session.Session,
        *,
        endpoint_override: str | None = None,
        region_name: str | None = None,
        interface: str = "public",
        timeout: float = 30.0,
        **kwargs: Any,
    ) -> ObjectStore:
        """The object-store endpoint of the session's catalog, or the override."""
        options: dict[str, str] = {"endpoint_type": interface}
        if region_name:
            options["region_name"] = region_name
        if endpoint_override:
            options["object_storage_url"] = endpoint_override

        def connect() -> swift_client.Connection:
            return swift_client.Connection(
                session=session, os_options=options, retries=0, timeout=timeout
            )

        return cls(connect(), connect=connect, **kwargs)

    @classmethod
    def from_tempauth(
        cls,
        auth_url: str,
        user: str,
        key: str,
        *,
        timeout: float = 30.0,
        **kwargs: Any,
    ) -> ObjectStore:
        """Swift's v1 auth (tempauth): ``auth_url`` ends in ``/auth/v1.0``."""

        def connect() -> swift_client.Connection:
            return swift_client.Connection(
                authurl=auth_url,
                user=user,
                key=key,
                auth_version="1",
                retries=0,
                timeout=timeout,
            )

        return cls(connect(), connect=connect, **kwargs)

    # -- plumbing ---------------------------------------------------------

    def _call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            if self._connect is not None:  # the calling thread's own
                return fn(*args, **kwargs)
            with self._lock:
                return fn(*args, **kwargs)
        except swift_exc.ClientException as exc:
            if exc.http_status == 304:
                headers = exc.http_response_headers or {}
                raise _NotModified({k.lower(): v for k, v in headers.items()}) from None
            raise http_error(SERVICE, what, exc.http_status, exc.http_reason) from None
        except ksa_exc.ClientException as exc:
            raise ksa_error(SERVICE, what, exc) from None
        except (requests.RequestException, OSError) as exc:
            raise unreachable(SERVICE, what, exc) from None

    @property
    def account_url(self) -> str:
        """The storage URL, ``…/v1/AUTH_<account>`` (authenticates if needed)."""
        return self.retry_policy.call(self._account_url)

    def _account_url(self) -> str:
        if not self.connection.url:
            url, token = self._call("authenticate", self.connection.get_auth)
            self.connection.url, self.connection.token = url, token
        return str(self.connection.url)

    # -- containers -------------------------------------------------------

    @retried
    def ensure_container(self, name: str) -> None:
        _check_container(name)
        if name in self._containers:
            return
        self._call(f"create container {name}", self.connection.put_container, name)
        self._containers.add(name)

    @retried
    def container_exists(self, name: str) -> bool:
        try:
            self._call(f"show container {name}", self.connection.head_container, name)
        except CloudError as exc:
            if is_missing(exc, SERVICE):
                return False
            raise
        return True

    def delete_container(self, name: str, *, force: bool = False) -> bool:
        """Delete a container; False if it was already gone.  Without
        ``force`` a non-empty container is a CloudError with status 409;
        with it, :func:`delete_emptied` (each of its requests retried)."""
        if force:
            return delete_emptied(self, name)

        def once() -> bool:
            try:
                self._call(
                    f"delete container {name}", self.connection.delete_container, name
                )
            except CloudError as exc:
                if is_missing(exc, SERVICE):
                    return False
                raise
            return True

        return self.retry_policy.call(once)

    @retried
    def list_containers(self, prefix: str | None = None) -> list[str]:
        listing = self._listing(
            "list containers", self.connection.get_account, prefix=prefix
        )
        return [item["name"] for item in listing]

    def _listing(
        self, what: str, fn: Callable[..., Any], *args: Any, prefix: str | None
    ) -> list[dict[str, Any]]:
        """A whole account or container listing.

        One request per :attr:`listing_page` names, counted in
        :attr:`listing_requests`; a short page is the last one.
        """
        items: list[dict[str, Any]] = []
        marker = ""
        while True:
            self.listing_requests += 1
            _, page = self._call(
                what, fn, *args, marker=marker, limit=self.listing_page, prefix=prefix
            )
            items.extend(page)
            if len(page) < self.listing_page:
                return items
            marker = page[-1]["name"]

    # -- objects ----------------------------------------------------------

    @retried
    def put_object(
        self,
        container: str,
        name: str,
        body: bytes,
        content_type: str = "application/json",
    ) -> str:
        """Write an object; returns its ETag.

        Swift answers 404 when its proxy did not find the container: it was
        removed, or (on a loaded cluster) its container server did not
        answer in time.  The container is then made (again: idempotent)
        and the write made once more.
        """

        def write(ensure: bool) -> str:
            if ensure:
                self.ensure_container(container)
            etag = self._call(
                f"write object {container}/{name}",
                self.connection.put_object,
                container,
                name,
                body,
                content_type=content_type,
            )
            return str(etag).strip('"')

        return self._once_more_if_container_gone(container, write)

    def _once_more_if_container_gone(
        self, container: str, attempt: Callable[[bool], T]
    ) -> T:
        """``attempt(False)``, then ``attempt(True)`` (make the container
        first) once more if Swift said the container is missing."""

        def container_gone(exc: BaseException) -> bool:
            return isinstance(exc, CloudError) and is_missing(exc, SERVICE)

        def forget_container(state: tenacity.RetryCallState) -> None:
            self._containers.discard(container)

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(container_gone),
            stop=tenacity.stop_after_attempt(2),
            before_sleep=forget_container,
            reraise=True,
        )
        attempts = iter((False, True))
        return retrying(lambda: attempt(next(attempts)))

    @retried
    def get_object(
        self, container: str, name: str, *, if_none_match: str | None = None
    ) -> StoredObject | None:
        """The object, None if missing; body None if ``if_none_match`` matched."""
        headers = {"If-None-Match": if_none_match} if if_none_match else None
        try:
            found, body = self._call(
                f"read object {container}/{name}",
                self.connection.get_object,
                container,
                name,
                headers=headers,
            )
        except _NotModified as unchanged:
            found = unchanged.headers
            return StoredObject(name, _etag(found), listing_time(found), None)
        except CloudError as exc:
            if is_missing(exc, SERVICE):
                return None
            raise
        return StoredObject(name, _etag(found), listing_time(found), bytes(body))

    @retried
    def head_object(self, container: str, name: str) -> ObjectInfo | None:
        return self._head_object(container, name)

    def _head_object(self, container: str, name: str) -> ObjectInfo | None:
        try:
            found = self._call(
                f"show object {container}/{name}",
                self.connection.head_object,
                container,
                name,
            )
        except CloudError as exc:
            if is_missing(exc, SERVICE):
                return None
            raise
        return ObjectInfo(
            name=name,
            etag=_etag(found),
            last_modified=listing_time(found),
            bytes=int(found.get("content-length", 0)),
        )

    @retried
    def delete_object(self, container: str, name: str) -> bool:
        """Delete an object; False if it was already gone."""
        return self._delete_object(container, name)

    def _delete_object(self, container: str, name: str) -> bool:
        try:
            self._call(
                f"delete object {container}/{name}",
                self.connection.delete_object,
                container,
                name,
            )
        except CloudError as exc:
            if is_missing(exc, SERVICE):
                return False
            raise
        return True

    @retried
    def list_objects(
        self, container: str, prefix: str | None = None
    ) -> list[ObjectInfo]:
        """Every object (under ``prefix``); a missing container lists nothing.

        One request per :attr:`listing_page` names (see :meth:`_listing`).
        """
        return self._list_objects(container, prefix) or []

    @retried
    def list_container(self, container: str) -> list[ObjectInfo] | None:
        """Every object of ``container``; None if the container is missing
        (it is then no longer remembered as made)."""
        found = self._list_objects(container, None)
        if found is None:
            self._containers.discard(container)
        return found

    def _list_objects(
        self, container: str, prefix: str | None
    ) -> list[ObjectInfo] | None:
        try:
            listing = self._listing(
                f"list container {container}",
                self.connection.get_container,
                container,
                prefix=prefix,
            )
        except CloudError as exc:
            if is_missing(exc, SERVICE):
                return None
            raise
        return [
            ObjectInfo(
                name=item["name"],
                etag=item["hash"],
                last_modified=item["last_modified"],
                bytes=int(item["bytes"]),
                content_type=str(item.get("content_type") or ""),
            )
            for item in listing
        ]

    # -- TempURLs ---------------------------------------------------------

    @retried
    def tempurl_key(self) -> str:
        """The account's TempURL key, set (:func:`new_tempurl_key`) only if
        absent, by one caller of this process at a time per account: a
        burst of first deploys each set its own, and those that read theirs
        back before the last one was set signed with a key the account no
        longer had (every signal of theirs refused)."""
        with _key_lock(self._account_url()):
            return self._tempurl_key_locked()

    def _tempurl_key_locked(self) -> str:
        headers = self._call("show account", self.connection.head_account)
        key = headers.get(TEMPURL_KEY_HEADER)
        if not key:
            made = new_tempurl_key(self._key_seed, self._account_url())
            self._call(
                "set the account TempURL key",
                self.connection.post_account,
                {"X-Account-Meta-Temp-Url-Key": made},
            )
            LOG.info(
                "The Swift account %s had no TempURL key; swflows set one",
                self._account_url(),
            )
            key = self._settled_key()
        self._tempurl_key = str(key)
        return self._tempurl_key

    def _settled_key(self) -> str:
        """The key the account keeps once the writers that found it keyless
        beside this one (other processes too) have written theirs: read back
        until two reads :data:`KEY_SETTLE` s apart agree.  The last writer
        wins for everyone; a key read before its write was cached for good,
        and every TempURL signed with it refused."""
        key = None
        for _ in range(KEY_READS):
            headers = self._call("show account", self.connection.head_account)
            found = headers.get(TEMPURL_KEY_HEADER)
            if not found:
                raise CloudError(SERVICE, "the account TempURL key did not persist")
            if found == key:
                return str(found)
            key = found
            time.sleep(KEY_SETTLE)
        return str(key)

    def temp_url(
        self,
        container: str,
        name: str,
        method: str,
        expires_at: int,
        digest: str = "sha256",
    ) -> str:
        """A full ``http…/v1/AUTH_x/c/o?temp_url_sig=…`` URL.

        ``expires_at`` is an absolute epoch time in seconds, never a duration.
        """
        key = self._tempurl_key or self.tempurl_key()
        return build_temp_url(
            self.account_url, container, name, method, expires_at, key, digest
        )


def delete_emptied(store: ObjectStore, name: str) -> bool:
    """Delete container ``name`` with its objects; False if it was gone.

    A 409 (an object written meanwhile, or deletions the container's count
    has not caught up with yet) has it emptied again, for up to
    :data:`FORCE_DELETE_SECONDS`.
    """
    deadline = time.monotonic() + FORCE_DELETE_SECONDS
    pause = 0.1
    while True:
        for obj in store.list_objects(name):
            store.delete_object(name, obj.name)
        try:
            return store.delete_container(name)
        except CloudError as exc:
            if exc.status != 409 or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 2.0)
