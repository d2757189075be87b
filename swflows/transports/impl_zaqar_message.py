"""ZAQAR_MESSAGE: the server reads its metadata from a per-server queue.

Each publish replaces the queue's content with one message holding the whole
document, so a reader always finds the latest copy.  The server reads it with
a signed URL (GET on the queue's messages), so no Keystone user is needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from swflows.transports import base, names

if TYPE_CHECKING:
    from swflows.services import Services

QUEUE_PREFIX = "swm-"
#: Zaqar's default upper bound on a message's lifetime (14 days)
DEFAULT_TTL = 1209600
#: the signed URL's lifetime; re-issued by enrolling the server again
SIGNED_URL_TTL = 365 * 24 * 3600


def queue_name(server_id: str) -> str:
    return f"{QUEUE_PREFIX}{server_id}"[:64]


class ZaqarMessage(base.ConfigTransport):
    name = names.ZAQAR_MESSAGE

    def ensure_channel(self, services: Services, server_id: str) -> base.JsonDict:
        queue = queue_name(server_id)
        services.clients.messaging.ensure_queue(queue)
        return {"queue": queue}

    def publish(
        self,
        services: Services,
        server_id: str,
        channel: base.JsonDict,
        document: base.JsonDict,
    ) -> None:
        messaging = services.clients.messaging
        queue = channel["queue"]
        stale = messaging.list_messages(queue)
        messaging.post(queue, document, ttl=int(self.options.get("ttl", DEFAULT_TTL)))
        for message in stale:
            messaging.delete_message(queue, message.id)

    def remove_channel(
        self, services: Services, server_id: str, channel: base.JsonDict
    ) -> None:
        services.clients.messaging.delete_queue(channel["queue"])

    def collect_config(
        self, services: Services, channel: base.JsonDict
    ) -> base.JsonDict:
        signed = services.clients.messaging.signed_url(
            channel["queue"],
            paths=("messages",),
            methods=("GET",),
            ttl_seconds=SIGNED_URL_TTL,
        )
        return {"collectors": ["zaqar"], "zaqar": {"signed_url": signed}}
