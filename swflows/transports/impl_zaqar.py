"""ZAQAR_SIGNAL: the agent posts its signal to a Zaqar queue.

By default the agent gets a *signed URL* for the queue (``auth:
signed_url``): it can post there and nowhere else, and no Keystone user is
needed.  With ``auth: credentials`` it authenticates as a stack user, as Heat
does, for clouds that disable signed URLs; the queue then lives in the stack
user's project.  One queue per deployment action; it is deleted once the
signal is read.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from typing import TYPE_CHECKING

from swflows import derive, exceptions
from swflows import transport_names as names
from swflows.clients.identity import StackUser
from swflows.transports import base, impl_heat

if TYPE_CHECKING:
    from swflows.clients.messaging import Messaging

SIGNED_URL = "signed_url"
CREDENTIALS = "credentials"
QUEUE_PREFIX = "sws-"
DEFAULT_GRACE = 600
#: the header a push from Zaqar carries its queue's token in
PUSH_HEADER = "X-Swflows-Push-Token"
#: where, under the push URL, Zaqar posts a queue's messages
PUSH_PATH = "/v1/push/"

LOG = logging.getLogger(__name__)


def push_url(services: base.Context) -> str | None:
    """The base URL Zaqar pushes signals to, if push is configured."""
    url = services.conf.watcher.zaqar_push_url
    return str(url).rstrip("/") if url else None


def push_token(services: base.Context, queue: str) -> str:
    """The secret a push for ``queue`` carries in :data:`PUSH_HEADER`:
    derived from the installation's secret, one per queue."""
    key = hmac.new(services.secret, b"swflows zaqar push", hashlib.sha256).digest()
    return hmac.new(key, queue.encode(), hashlib.sha256).hexdigest()


def push_token_ok(services: base.Context, queue: str, token: str | None) -> bool:
    return bool(token) and hmac.compare_digest(push_token(services, queue), str(token))


def queue_name(ref: base.SignalRef) -> str:
    # at most 4 + 36 + 1 + 10 characters: under Zaqar's 64
    return f"{QUEUE_PREFIX}{ref.deployment_id}-{ref.generation}"


def parse_queue_name(queue: str) -> tuple[str, int] | None:
    """``(deployment id, generation)`` of a signal queue's name, else None."""
    if not queue.startswith(QUEUE_PREFIX):
        return None
    dep, sep, gen = queue[len(QUEUE_PREFIX) :].rpartition("-")
    if not sep or not dep or not gen.isdigit():
        return None
    return dep, int(gen)


class ZaqarSignal(base.SignalTransport):
    name = names.ZAQAR_SIGNAL

    def __init__(self, options: base.JsonDict | None = None) -> None:
        super().__init__(options)
        self.auth = str(self.options.get("auth") or SIGNED_URL)
        if self.auth not in (SIGNED_URL, CREDENTIALS):
            raise exceptions.ValidationError(
                "zaqar_signal_auth", f"must be {SIGNED_URL} or {CREDENTIALS}"
            )

    @property
    def needs_stack_user(self) -> bool:  # type: ignore[override]
        return self.auth == CREDENTIALS

    def _client(self, services: base.Context, store: base.JsonDict) -> Messaging:
        user = StackUser.from_dict(store.get("user"))
        if user is None:
            return services.project_clients.messaging
        password = impl_heat.stack_user_password(services, store["deployment_id"])
        return services.project_clients.messaging_for(user, password)

    def describe_store(
        self, ref: base.SignalRef, user: StackUser | None
    ) -> base.JsonDict:
        store: base.JsonDict = {
            "queue": queue_name(ref),
            "deployment_id": ref.deployment_id,
        }
        if self.auth == CREDENTIALS:
            if user is None:
                raise exceptions.TransportError(
                    self.name, "credentials mode needs a stack user"
                )
            store["user"] = user.to_dict()
        return store

    def create_store(
        self, services: base.Context, ref: base.SignalRef, user: StackUser | None
    ) -> base.JsonDict:
        store = self.describe_store(ref, user)
        self._client(services, store).ensure_queue(store["queue"])
        url = push_url(services)
        if url and self.auth == SIGNED_URL:
            queue = store["queue"]
            try:
                services.project_clients.messaging.subscribe(
                    queue,
                    f"{url}{PUSH_PATH}{queue}",
                    ttl=ref.timeout + int(self.options.get("grace", DEFAULT_GRACE)),
                    headers={PUSH_HEADER: push_token(services, queue)},
                )
                store["push"] = True
            except exceptions.SwflowsError as exc:  # polling still reads it
                LOG.warning("queue %s: no push, polled only: %s", queue, exc)
        return store

    def agent_inputs(
        self,
        services: base.Context,
        ref: base.SignalRef,
        store: base.JsonDict,
        user: StackUser | None,
    ) -> base.InputPairs:
        if self.auth == CREDENTIALS:
            pairs = impl_heat.credential_inputs(services, ref, user)
            return [*pairs, *derive.zaqar_signal_inputs(store["queue"])]
        grace = int(self.options.get("grace", DEFAULT_GRACE))
        signed = services.project_clients.messaging.signed_url(
            store["queue"],
            paths=("messages",),
            methods=("POST",),
            ttl_seconds=ref.timeout + grace,
        )
        return list(derive.zaqar_signal_inputs(store["queue"], signed_url=signed))

    def read(self, services: base.Context, store: base.JsonDict) -> base.SignalRead:
        messages = self._client(services, store).list_messages(store["queue"])
        # the newest: a final signal follows its "started" progress signal
        for message in reversed(messages):
            body = message.body
            raw = body if isinstance(body, (bytes, str)) else _dumps(body)
            return base.SignalRead(
                raw.encode() if isinstance(raw, str) else raw, message.id
            )
        return base.SignalRead(None)

    def existing_stores(self, services: base.Context) -> dict[str, base.JsonDict]:
        if self.auth == CREDENTIALS:
            # those queues live in stack users' projects, gone with the users
            return {}
        found: dict[str, base.JsonDict] = {}
        for queue in services.project_clients.messaging.list_queues():
            ref = parse_queue_name(queue)
            if ref is not None:
                found[f"{ref[0]}/{ref[1]}"] = {"queue": queue, "deployment_id": ref[0]}
        return found

    def delete_store(self, services: base.Context, store: base.JsonDict) -> None:
        if store.get("push") or (push_url(services) and not store.get("user")):
            # a subscription outlives its queue
            messaging = services.project_clients.messaging
            for subscription in messaging.subscriptions(store["queue"]):
                messaging.unsubscribe(store["queue"], subscription)
        self._client(services, store).delete_queue(store["queue"])

    def leftovers(self, services: base.Context, ref: base.SignalRef) -> list[str]:
        name = queue_name(ref)
        messaging = services.project_clients.messaging
        found = [name] if messaging.queue_exists(name) else []
        if push_url(services):
            found += [f"{name} subscription {s}" for s in messaging.subscriptions(name)]
        return found


def _dumps(body: object) -> str:
    import json

    return json.dumps(body)
