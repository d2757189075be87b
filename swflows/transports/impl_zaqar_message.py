"""ZAQAR_MESSAGE: the server reads its metadata from a per-server queue.

Each publish replaces the queue's content with one message holding the whole
document, so a reader always finds the latest copy.  The server reads it with
a signed URL (GET on the queue's messages), so no Keystone user is needed.
With ``auth: credentials`` the server gets a Keystone user of its own
(:mod:`swflows.transports.server_user`) and the queue lives in that user's
project, as Heat does: Heat's ``zaqar`` collector logs in and cannot read a
signed URL.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from swflows import exceptions
from swflows import transport_names as names
from swflows.clients.identity import StackUser
from swflows.transports import base, owner, server_user

if TYPE_CHECKING:
    from swflows.clients.messaging import Messaging

CREDENTIALS = names.ZAQAR_AUTH_CREDENTIALS

QUEUE_PREFIX = "swm-"
#: Zaqar's default upper bound on a message's lifetime (14 days)
DEFAULT_TTL = 1209600
#: Zaqar's default bound on a POST of messages, in bytes
MAX_MESSAGE_SIZE = 262144
#: the signed URL's lifetime; re-issued by enrolling the server again
SIGNED_URL_TTL = 365 * 24 * 3600


def queue_name(server_id: str) -> str:
    return f"{QUEUE_PREFIX}{server_id}"[:64]


class ZaqarMessage(base.ConfigTransport):
    name = names.ZAQAR_MESSAGE

    def ensure_channel(self, services: base.Context, server_id: str) -> base.JsonDict:
        queue = queue_name(server_id)
        channel: base.JsonDict = {"queue": queue}
        if self.options.get("auth") == CREDENTIALS:
            user = server_user.ensure(services, server_id, server_user.ZAQAR, server_id)
            channel.update(key=server_id, user=user.to_dict())
        self._client(services, channel).ensure_queue(
            queue, {owner.PARAM: owner.tag(services)}
        )
        return channel

    @staticmethod
    def _client(services: base.Context, channel: base.JsonDict) -> Messaging:
        user = StackUser.from_dict(channel.get("user"))
        if user is None:
            return services.clients.messaging
        password = server_user.password(services, channel["key"], server_user.ZAQAR)
        return services.clients.messaging_for(user, password)

    def publish(
        self,
        services: base.Context,
        server_id: str,
        channel: base.JsonDict,
        document: base.JsonDict,
    ) -> None:
        ttl = int(self.options.get("ttl", DEFAULT_TTL))
        self._check_size(server_id, document, ttl)
        messaging = self._client(services, channel)
        queue = channel["queue"]
        stale = messaging.list_messages(queue)
        messaging.post(queue, document, ttl=ttl)
        for message in stale:
            messaging.delete_message(queue, message.id)

    def _check_size(self, server_id: str, document: base.JsonDict, ttl: int) -> None:
        """Refuse, before anything is posted, a document Zaqar would refuse
        ("Message collection size is too large"): the request it goes in
        is measured as Zaqar measures it, in bytes."""
        limit = int(self.options.get("max_message_size", MAX_MESSAGE_SIZE))
        size = len(json.dumps({"messages": [{"ttl": ttl, "body": document}]}).encode())
        if size > limit:
            count = len(document.get("deployments") or ())
            raise exceptions.TransportError(
                self.name,
                f"server {server_id}'s metadata ({count} deployments) is "
                f"{size} bytes, more than one Zaqar message holds ({limit} "
                "bytes: Zaqar's max_messages_post_size, swflows' "
                "zaqar_max_message_size): delete the deployments it no longer "
                "needs, or give it the POLL_TEMP_URL transport",
            )

    def remove_channel(
        self, services: base.Context, server_id: str, channel: base.JsonDict
    ) -> None:
        user = StackUser.from_dict(channel.get("user"))
        if user is None:
            services.clients.messaging.delete_queue(channel["queue"])
            return
        # the queue is reachable only as its user: gone with it, it was
        # deleted first
        if services.clients.stack_users.find_user(user.username) is not None:
            self._client(services, channel).delete_queue(channel["queue"])
        server_user.remove(services, user)

    def collect_config(
        self, services: base.Context, channel: base.JsonDict
    ) -> base.JsonDict:
        user = StackUser.from_dict(channel.get("user"))
        if user is not None:
            section = server_user.credentials(
                services, user, channel["key"], server_user.ZAQAR
            )
            section["queue_id"] = channel["queue"]
            return {"collectors": ["zaqar"], "zaqar": section}
        signed = services.clients.messaging.signed_url(
            channel["queue"],
            paths=("messages",),
            methods=("GET",),
            ttl_seconds=SIGNED_URL_TTL,
        )
        return {"collectors": ["zaqar"], "zaqar": {"signed_url": signed}}

    def channel_id(self, channel: base.JsonDict) -> str | None:
        # a queue in a server user's project is not in swflows' listing
        if channel.get("user") or not channel.get("queue"):
            return None
        return str(channel["queue"])

    def existing_channels(self, services: base.Context) -> dict[str, base.FoundChannel]:
        """The ``swm-`` queues of swflows' own project."""
        found: dict[str, base.FoundChannel] = {}
        for queue, metadata in services.clients.messaging.queue_metadata().items():
            if queue.startswith(QUEUE_PREFIX):
                tag = metadata.get(owner.PARAM)
                found[queue] = base.FoundChannel(
                    {"queue": queue}, str(tag) if tag else None
                )
        return found
