"""Zaqar v2 queues, messages, claims and signed URLs, over python-zaqarclient.

Zaqar's rules are checked before any call: queue names are at most 64
characters of ``[a-zA-Z0-9_.-]`` (Heat's deployment queues could break
this, heat-semantics §8 row 18), and message TTLs, claim TTLs and graces are
at least 60 s.  Every request carries the client's ``Client-ID`` UUID;
messages a client posted itself are only listed with ``echo=True``.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import requests
from keystoneauth1 import exceptions as ksa_exc
from keystoneauth1 import session as ksa_session
from zaqarclient import errors as zaqar_errors
from zaqarclient.queues.v2 import client as zaqar_client
from zaqarclient.queues.v2 import core
from zaqarclient.transport import errors as zaqar_transport_errors

from swflows.clients.base import (
    DEFAULT_RETRY,
    RetryPolicy,
    http_error,
    ksa_error,
    redact,
    retried,
    unreachable,
)
from swflows.exceptions import CloudError, ValidationError

LOG = logging.getLogger(__name__)

SERVICE = "messaging"
QUEUE_NAME_RE = re.compile(r"[a-zA-Z0-9_.-]{1,64}")
#: Zaqar's floor for message TTLs, claim TTLs and claim graces.
MIN_TTL = 60
#: Zaqar's default ``max_message_ttl`` (14 days).
MAX_MESSAGE_TTL = 1_209_600
#: Zaqar's largest page for message and queue listings.
PAGE = 20
SIGNED_PATHS = frozenset({"messages", "claims", "subscriptions"})
SIGNED_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "POST", "PUT", "DELETE"})

T = TypeVar("T")
JsonDict = dict[str, Any]


def check_queue_name(name: str) -> str:
    """``name`` if Zaqar accepts it as a queue name, else ValidationError."""
    if not isinstance(name, str) or not QUEUE_NAME_RE.fullmatch(name):
        raise ValidationError(
            "queue", "must be 1 to 64 characters of letters, digits, '_', '.', '-'"
        )
    return name


def _check_ttl(field: str, value: int, maximum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_TTL:
        raise ValidationError(field, f"must be an int of at least {MIN_TTL} s")
    if maximum is not None and value > maximum:
        raise ValidationError(field, f"must be at most {maximum} s")


@dataclasses.dataclass(frozen=True)
class Message:
    """A message; ``claim_id`` is set when it came from a claim."""

    id: str
    #: The posted JSON body, whatever its type.
    body: Any
    claim_id: str | None
    #: Seconds since it was posted.
    age: int


def _message(item: Mapping[str, Any]) -> Message:
    href = str(item.get("href", ""))
    path, _, query = href.partition("?")
    claim = urllib.parse.parse_qs(query).get("claim_id")
    return Message(
        id=str(item.get("id") or path.rsplit("/", 1)[-1]),
        body=item.get("body"),
        claim_id=item.get("claim_id") or (claim[0] if claim else None),
        age=int(item.get("age", 0)),
    )


def _next_marker(page: Mapping[str, Any]) -> str | None:
    for link in page.get("links") or ():
        if link.get("rel") == "next":
            query = urllib.parse.urlsplit(str(link.get("href", ""))).query
            marker = urllib.parse.parse_qs(query).get("marker")
            return marker[0] if marker else None
    return None


class _HttpStatus(Exception):
    """An error status zaqarclient passes through instead of raising."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class _Zaqar:
    """The calls a keystone client and a signed-URL client share."""

    retry_policy: RetryPolicy

    def __init__(self, client: zaqar_client.Client, secrets: Iterable[str] = ()):
        self.client = client
        self._secrets = tuple(secrets)

    def _call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a ``zaqarclient.queues.v2.core`` function as one request."""
        try:
            req, trans = self.client._request_and_transport()
            send = trans.send

            def checked(request: Any) -> Any:
                resp = send(request)
                if resp.status_code is not None and resp.status_code >= 400:
                    raise _HttpStatus(resp.status_code)
                return resp

            trans.send = checked
            return fn(trans, req, *args, **kwargs)
        except zaqar_transport_errors.TransportError as exc:
            detail = redact(str(exc), self._secrets)
            raise http_error(SERVICE, what, exc.code, detail) from None
        except _HttpStatus as exc:
            raise http_error(SERVICE, what, exc.status) from None
        except ksa_exc.ClientException as exc:
            raise ksa_error(SERVICE, what, exc) from None
        except requests.RequestException as exc:
            raise unreachable(SERVICE, what, exc) from None
        except zaqar_errors.ZaqarError as exc:
            raise CloudError(SERVICE, f"{what} failed: {type(exc).__name__}") from None

    def _post(self, queue: str, body: Any, ttl: int) -> str:
        _check_ttl("ttl", ttl, MAX_MESSAGE_TTL)
        result = self._call(
            f"post to queue {queue}",
            core.message_post,
            queue,
            {"messages": [{"body": body, "ttl": ttl}]},
        )
        return str(result["resources"][0]).rsplit("/", 1)[-1]

    def _list_messages(self, queue: str, *, echo: bool) -> list[Message]:
        # Claimed messages are left out: Zaqar's Redis store fails (503) on a
        # first page that includes them.
        found: dict[str, Message] = {}
        marker: str | None = None
        while True:
            params: JsonDict = {"limit": PAGE, "echo": echo}
            if marker:
                params["marker"] = marker
            page = self._call(
                f"list messages of queue {queue}", core.message_list, queue, **params
            )
            items = [_message(item) for item in (page or {}).get("messages") or []]
            new = [m for m in items if m.id not in found]
            found.update((m.id, m) for m in new)
            marker = _next_marker(page or {})
            if len(items) < PAGE or not new or not marker:
                return list(found.values())


class Messaging(_Zaqar):
    """Queues of one project, as its (keystone-authenticated) user."""

    def __init__(
        self, client: zaqar_client.Client, *, retry: RetryPolicy = DEFAULT_RETRY
    ) -> None:
        super().__init__(client)
        self.retry_policy = retry

    @classmethod
    def from_session(
        cls,
        session: ksa_session.Session,
        *,
        url: str | None = None,
        interface: str = "public",
        region_name: str | None = None,
        **kwargs: Any,
    ) -> Messaging:
        """Zaqar at ``url``, or at the session catalog's messaging endpoint."""
        if url is None:
            try:
                url = session.get_endpoint(
                    service_type="messaging",
                    interface=interface,
                    region_name=region_name,
                )
            except ksa_exc.ClientException as exc:
                raise ksa_error(SERVICE, "find the endpoint", exc) from None
            if not url:
                raise CloudError(SERVICE, "no messaging endpoint in the catalog")
        return cls(zaqar_client.Client(url, version=2, session=session), **kwargs)

    @classmethod
    def from_auth_options(
        cls, url: str | None, backend: str, options: Mapping[str, Any], **kwargs: Any
    ) -> Messaging:
        """zaqarclient's own ``auth_opts`` (``keystone`` or ``noauth`` backend)."""
        conf = {"auth_opts": {"backend": backend, "options": dict(options)}}
        return cls(zaqar_client.Client(url, version=2, conf=conf), **kwargs)

    @property
    def url(self) -> str:
        return str(self.client.api_url)

    # -- queues -----------------------------------------------------------

    @retried
    def ensure_queue(
        self, name: str, metadata: Mapping[str, str] | None = None
    ) -> None:
        """Create the queue (an existing one is kept, its metadata too)."""
        check_queue_name(name)
        self._call(
            f"create queue {name}",
            core.queue_create,
            name,
            dict(metadata) if metadata else None,
        )

    @retried
    def queue_exists(self, name: str) -> bool:
        """Whether the queue was created (and not deleted).

        Zaqar v2 answers a GET of any queue name with 200 and HEAD with 405,
        and ignores the listing's ``name`` filter on some stores, so this
        reads the project's queue listing: one request per 20 queues.
        """
        return check_queue_name(name) in self._list_queues()

    @retried
    def delete_queue(self, name: str) -> bool:
        """Delete a queue and its messages; False if it was already gone."""
        existed = check_queue_name(name) in self._list_queues()
        if existed:
            self._call(f"delete queue {name}", core.queue_delete, name)
        return existed

    @retried
    def list_queues(self) -> list[str]:
        """The names of every queue of the project."""
        return self._list_queues()

    @retried
    def queue_metadata(self) -> dict[str, dict[str, Any]]:
        """Every queue of the project with its metadata (a detailed listing)."""
        found: dict[str, dict[str, Any]] = {}
        marker: str | None = None
        while True:
            params: JsonDict = {"limit": PAGE, "detailed": True}
            if marker:
                params["marker"] = marker
            page = self._call("list queues", core.queue_list, **params)
            items = (page or {}).get("queues") or []
            for item in items:
                found[str(item["name"])] = dict(item.get("metadata") or {})
            if len(items) < PAGE:
                return found
            marker = str(items[-1]["name"])

    def _list_queues(self) -> list[str]:
        names: list[str] = []
        marker: str | None = None
        while True:
            params: JsonDict = {"limit": PAGE}
            if marker:
                params["marker"] = marker
            page = self._call("list queues", core.queue_list, **params)
            items = (page or {}).get("queues") or []
            names.extend(str(item["name"]) for item in items)
            if len(items) < PAGE:
                return names
            marker = names[-1]

    @retried
    def signed_url(
        self,
        queue: str,
        *,
        paths: Iterable[str] = ("messages",),
        methods: Iterable[str] = ("GET", "POST"),
        ttl_seconds: int,
    ) -> JsonDict:
        """A pre-signed URL for ``queue``, as a JSON-able dict.

        Keys ``signature``, ``expires``, ``methods``, ``paths``, ``project``
        and ``url`` (Zaqar's endpoint): all a :class:`SignedUrlClient` needs.
        """
        check_queue_name(queue)
        paths, methods = list(paths), [m.upper() for m in methods]
        if not paths or not set(paths) <= SIGNED_PATHS:
            raise ValidationError("paths", f"must be among {sorted(SIGNED_PATHS)}")
        if not methods or not set(methods) <= SIGNED_METHODS:
            raise ValidationError("methods", f"must be among {sorted(SIGNED_METHODS)}")
        if isinstance(ttl_seconds, bool) or ttl_seconds <= 0:
            raise ValidationError("ttl_seconds", "must be a positive int")
        signed = self._call(
            f"sign a URL for queue {queue}",
            core.signed_url_create,
            queue,
            paths=paths,
            ttl_seconds=ttl_seconds,
            methods=methods,
        )
        return {
            "signature": signed["signature"],
            "expires": signed["expires"],
            "methods": list(signed["methods"]),
            "paths": list(signed["paths"]),
            "project": signed["project"],
            "url": self.url,
        }

    # -- messages ---------------------------------------------------------

    @retried
    def post(self, queue: str, body: Any, ttl: int) -> str:
        """Post one message; returns its id.

        A retried post may deliver twice, as Zaqar itself may: readers must
        tolerate duplicates.
        """
        return self._post(check_queue_name(queue), body, ttl)

    @retried
    def list_messages(self, queue: str, *, echo: bool = True) -> list[Message]:
        """Every live unclaimed message, oldest first, without claiming any.

        ``echo=False`` hides the messages this client posted itself.
        """
        return self._list_messages(check_queue_name(queue), echo=echo)

    @retried
    def claim(
        self, queue: str, *, ttl: int = MIN_TTL, grace: int = MIN_TTL, limit: int = 10
    ) -> list[Message]:
        """Claim up to ``limit`` unclaimed messages for ``ttl`` seconds."""
        check_queue_name(queue)
        _check_ttl("ttl", ttl)
        _check_ttl("grace", grace)
        if not 0 < limit <= PAGE:
            raise ValidationError("limit", f"must be 1 to {PAGE}")
        claimed = self._call(
            f"claim messages of queue {queue}",
            core.claim_create,
            queue,
            ttl=ttl,
            grace=grace,
            limit=limit,
        )
        return [_message(item) for item in (claimed or {}).get("messages") or []]

    @retried
    def delete_message(
        self, queue: str, message_id: str, claim_id: str | None = None
    ) -> None:
        """Delete a message (a missing one is fine); claimed ones need the claim."""
        check_queue_name(queue)
        self._call(
            f"delete a message of queue {queue}",
            core.message_delete,
            queue,
            message_id,
            claim_id=claim_id,
        )

    # -- subscriptions ------------------------------------------------------

    @retried
    def subscribe(
        self,
        queue: str,
        subscriber: str,
        *,
        ttl: int,
        headers: Mapping[str, str] | None = None,
    ) -> str:
        """Have Zaqar post each message of ``queue`` to the ``subscriber``
        URL (a webhook), with ``headers``, for ``ttl`` seconds; the
        subscription's id.  Subscribing the same URL again returns the
        same subscription.  A subscription outlives its queue: remove it
        with :meth:`unsubscribe`."""
        check_queue_name(queue)
        _check_ttl("ttl", ttl)
        options: JsonDict = {"post_headers": dict(headers)} if headers else {}
        made = self._call(
            f"subscribe to queue {queue}",
            core.subscription_create,
            queue,
            {"subscriber": subscriber, "ttl": ttl, "options": options},
        )
        return str((made or {})["subscription_id"])

    @retried
    def subscriptions(self, queue: str) -> list[str]:
        """The ids of the subscriptions to ``queue`` (gone or not)."""
        check_queue_name(queue)
        found: list[str] = []
        marker: str | None = None
        while True:
            params: JsonDict = {"limit": PAGE}
            if marker:
                params["marker"] = marker
            page = self._call(
                f"list subscriptions of queue {queue}",
                core.subscription_list,
                queue,
                **params,
            )
            items = (page or {}).get("subscriptions") or []
            new = [str(i["id"]) for i in items if str(i["id"]) not in found]
            found.extend(new)
            if len(items) < PAGE or not new:
                return found
            marker = new[-1]

    @retried
    def unsubscribe(self, queue: str, subscription_id: str) -> None:
        """Remove a subscription (one already gone is fine)."""
        check_queue_name(queue)
        self._call(
            f"unsubscribe from queue {queue}",
            core.subscription_delete,
            queue,
            subscription_id,
        )


class SignedUrlClient(_Zaqar):
    """What an agent holds: one queue, through a pre-signed URL only."""

    def __init__(
        self, signed: Mapping[str, Any], *, retry: RetryPolicy = DEFAULT_RETRY
    ) -> None:
        self.queue = _signed_queue(signed)
        options = {
            "signature": signed["signature"],
            "expires": signed["expires"],
            "methods": list(signed["methods"]),
            "paths": list(signed["paths"]),
            "os_project_id": signed["project"],
        }
        conf = {"auth_opts": {"backend": "signed-url", "options": options}}
        client = zaqar_client.Client(signed["url"], version=2, conf=conf)
        super().__init__(client, secrets=(str(signed["signature"]),))
        self.retry_policy = retry

    @retried
    def post(self, body: Any, ttl: int) -> str:
        return self._post(self.queue, body, ttl)

    @retried
    def list_messages(self, *, echo: bool = True) -> list[Message]:
        return self._list_messages(self.queue, echo=echo)


def _signed_queue(signed: Mapping[str, Any]) -> str:
    """The queue a signed URL is for, from its paths (``/v2/queues/<q>/…``)."""
    for path in signed.get("paths") or ():
        parts = str(path).strip("/").split("/")
        if len(parts) >= 3 and parts[1] == "queues":
            return check_queue_name(parts[2])
    raise ValidationError("signed_url", "its paths name no queue")
