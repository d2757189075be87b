"""Collectors: how the agent reads its server's metadata document.

``request`` (config transport POLL_TEMP_URL, and any URL serving the
document): a conditional GET, so an unchanged document costs a 304 and no
body: ``If-None-Match`` with the last ETag, or ``If-Modified-Since`` when
the server gives no ETag.  Never both: Swift answers 304 when either
matches, and ``Last-Modified`` has whole seconds, so two writes within one
second would look unchanged.  ``zaqar`` (ZAQAR_MESSAGE):
the newest message of the server's queue, read without claiming or
deleting it (Heat's collector pops it, so a restarted agent lost it), with
a signed URL or as a Keystone user.  Section names and keys are
os-collect-config's.
"""

from __future__ import annotations

import abc
import json
import logging
import urllib.parse
import uuid
from collections.abc import Mapping
from typing import Any, Final

import requests

from swflows import exceptions
from swflows.agent import http

LOG = logging.getLogger(__name__)

REQUEST: Final = "request"
ZAQAR: Final = "zaqar"
#: the collectors this agent has, in the order tried when none is named
COLLECTORS: Final = (REQUEST, ZAQAR)
#: the most messages Zaqar lists per page
ZAQAR_PAGE: Final = 20
#: pages read at most; the queue normally holds one message
ZAQAR_MAX_PAGES: Final = 50
ZAQAR_API: Final = "/v2"


class Collector(abc.ABC):
    """Reads the metadata document; tells an unchanged one apart cheaply."""

    name: str = ""

    @abc.abstractmethod
    def collect(self) -> Any | None:
        """The document (bytes, text or decoded JSON), None when unchanged.

        CloudError (``retryable`` when worth trying again) on failure.
        """

    def forget(self) -> None:  # noqa: B027 (optional: most have nothing to forget)
        """Read the whole document on the next call, changed or not."""


class RequestCollector(Collector):
    """A document behind a URL (a Swift GET TempURL for POLL_TEMP_URL)."""

    name = REQUEST

    def __init__(
        self, metadata_url: str, *, session: requests.Session, timeout: float = 10.0
    ) -> None:
        self.metadata_url = metadata_url
        self.session = session
        self.timeout = timeout
        self._etag: str | None = None
        self._modified: str | None = None

    def __repr__(self) -> str:
        return f"RequestCollector({http.safe_url(self.metadata_url)!r})"

    def collect(self) -> bytes | None:
        headers = {}
        if self._etag:
            headers["If-None-Match"] = self._etag
        elif self._modified:
            headers["If-Modified-Since"] = self._modified
        resp = http.request(
            self.session,
            "GET",
            self.metadata_url,
            service="metadata",
            what="read the metadata",
            headers=headers,
            timeout=self.timeout,
        )
        if resp.status_code == 304:
            return None
        etag = resp.headers.get("ETag")
        if etag and etag == self._etag:
            return None  # a server that ignores If-None-Match
        self._etag = etag
        self._modified = resp.headers.get("Last-Modified")
        return resp.content

    def forget(self) -> None:
        self._etag = self._modified = None


class ZaqarCollector(Collector):
    """The newest message of the server's metadata queue."""

    name = ZAQAR

    def __init__(
        self,
        *,
        session: requests.Session,
        signed_url: Mapping[str, Any] | None = None,
        keystone: http.Keystone | None = None,
        queue_id: str | None = None,
        timeout: float = 10.0,
        client_id: str | None = None,
    ) -> None:
        if (signed_url is None) == (keystone is None):
            raise exceptions.ValidationError(
                "zaqar", "give either a signed URL or credentials"
            )
        self.session = session
        self.signed = dict(signed_url) if signed_url is not None else None
        self.keystone = keystone
        self.queue_id = queue_id
        self.timeout = timeout
        self.client_id = client_id or str(uuid.uuid4())
        self._last: str | None = None
        if self.signed is not None:
            messages_path(self.signed)  # validates
        elif not queue_id:
            raise exceptions.ValidationError("zaqar.queue_id", "is required")

    def __repr__(self) -> str:
        how = "signed URL" if self.signed is not None else repr(self.keystone)
        return f"ZaqarCollector({how})"

    def collect(self) -> Any | None:
        messages = self._list()
        if not messages:
            return None  # nothing published yet (or it expired): keep what we have
        newest = messages[-1]
        ident = str(newest.get("id"))
        if ident == self._last:
            return None
        self._last = ident
        return newest.get("body")

    def forget(self) -> None:
        self._last = None

    def _list(self) -> list[Mapping[str, Any]]:
        base, path = self._where()
        url = f"{base}{path}"
        params: dict[str, Any] | None = {"limit": ZAQAR_PAGE, "echo": "true"}
        found: list[Mapping[str, Any]] = []
        seen: set[str] = set()
        for _ in range(ZAQAR_MAX_PAGES):
            resp = self._get(url, params)
            if resp.status_code == 204 or not resp.content:
                break
            try:
                page = resp.json()
            except ValueError:
                raise exceptions.CloudError(
                    "zaqar", "read the metadata: the answer is not JSON"
                ) from None
            items = page.get("messages") if isinstance(page, Mapping) else None
            new = [
                m
                for m in items or ()
                if isinstance(m, Mapping) and str(m.get("id")) not in seen
            ]
            seen.update(str(m.get("id")) for m in new)
            found.extend(new)
            following = _next_link(page)
            if not new or len(items or ()) < ZAQAR_PAGE or not following:
                break
            url, params = f"{base}{following}", None
        return found

    def _where(self) -> tuple[str, str]:
        if self.signed is not None:
            return str(self.signed["url"]).rstrip("/"), messages_path(self.signed)
        assert self.keystone is not None
        base = api_root(self.keystone.endpoint("messaging"))
        queue = urllib.parse.quote(str(self.queue_id), safe="")
        return base, f"{ZAQAR_API}/queues/{queue}/messages"

    def _get(self, url: str, params: dict[str, Any] | None) -> requests.Response:
        if self.keystone is None:
            return self._get_once(url, params)
        return http.with_fresh_token(self.keystone, lambda: self._get_once(url, params))

    def _get_once(self, url: str, params: dict[str, Any] | None) -> requests.Response:
        headers = {"Client-ID": self.client_id}
        if self.signed is not None:
            headers.update(signed_headers(self.signed))
        else:
            assert self.keystone is not None
            headers["X-Auth-Token"] = self.keystone.token()
        return http.request(
            self.session,
            "GET",
            url,
            service="zaqar",
            what="read the metadata",
            headers=headers,
            params=params,
            timeout=self.timeout,
        )


def signed_url_value(value: Any) -> dict[str, Any]:
    """A signed URL given as an object or as its JSON text, checked."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise exceptions.ValidationError(
                "signed_url", "must be a JSON object"
            ) from None
    if not isinstance(value, Mapping):
        raise exceptions.ValidationError("signed_url", "must be an object")
    missing = [
        k
        for k in ("signature", "expires", "methods", "paths", "project", "url")
        if not value.get(k)
    ]
    if missing:
        raise exceptions.ValidationError(
            "signed_url", f"missing key(s) {', '.join(missing)}"
        )
    for key in ("methods", "paths"):
        if not isinstance(value[key], list):
            raise exceptions.ValidationError(f"signed_url.{key}", "must be a list")
    return dict(value)


def messages_path(signed: Mapping[str, Any]) -> str:
    """The messages path a signed URL is valid for (``/v2/queues/<q>/messages``)."""
    for path in signed.get("paths") or ():
        parts = str(path).strip("/").split("/")
        if len(parts) == 4 and parts[1] == "queues" and parts[3] == "messages":
            return "/" + "/".join(parts)
    raise exceptions.ValidationError(
        "signed_url.paths", "none is a queue's messages path"
    )


def signed_headers(signed: Mapping[str, Any]) -> dict[str, str]:
    """The headers that authenticate a request with a Zaqar signed URL."""
    return {
        "URL-Signature": str(signed["signature"]),
        "URL-Expires": str(signed["expires"]),
        "URL-Methods": ",".join(str(m) for m in signed["methods"]),
        "URL-Paths": ",".join(str(p) for p in signed["paths"]),
        "X-Project-ID": str(signed["project"]),
    }


def api_root(endpoint: str) -> str:
    """Zaqar's root URL from a catalog endpoint that may end in a version."""
    root = endpoint.rstrip("/")
    last = root.rsplit("/", 1)[-1]
    if last.startswith("v") and last[1:].replace(".", "").isdigit():
        root = root[: -len(last) - 1]
    return root


def _next_link(page: Any) -> str | None:
    if not isinstance(page, Mapping):
        return None
    links = page.get("links")
    if not isinstance(links, list):
        return None
    for link in links:
        if isinstance(link, Mapping) and link.get("rel") == "next":
            href = link.get("href")
            if isinstance(href, str) and href.startswith("/"):
                return href
    return None
