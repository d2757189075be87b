"""POLL_TEMP_URL: the server polls its metadata object through a GET TempURL.

One object per server, ``<container>/<server id>``; swflows writes it with
its own token and the server reads it with a GET TempURL that lasts until
2038, the way Heat does it.  The ``os-collect-config`` section points Heat's
``request`` collector at the same URL, so Heat's agents poll it too.
"""

from __future__ import annotations

import json

from swflows import transport_names as names
from swflows.transports import base, owner

DEFAULT_CONTAINER = "swflows-metadata"
#: the TempURL lifetime of a server's metadata URL (Heat uses the same)
NEVER = 2**31 - 1


class PollTempUrl(base.ConfigTransport):
    name = names.POLL_TEMP_URL

    @property
    def container(self) -> str:
        return str(self.options.get("container") or DEFAULT_CONTAINER)

    def ensure_channel(self, services: base.Context, server_id: str) -> base.JsonDict:
        swift = services.clients.object_store
        swift.ensure_container(self.container)
        channel = {"container": self.container, "object": server_id}
        if swift.head_object(self.container, server_id) is None:
            swift.put_object(
                self.container,
                server_id,
                b"{}",
                content_type=owner.content_type(owner.tag(services)),
            )
        return channel

    def metadata_url(self, services: base.Context, channel: base.JsonDict) -> str:
        return services.clients.object_store.temp_url(
            channel["container"],
            channel["object"],
            "GET",
            NEVER,
            digest=str(self.options.get("digest", "sha256")),
        )

    def publish(
        self,
        services: base.Context,
        server_id: str,
        channel: base.JsonDict,
        document: base.JsonDict,
    ) -> None:
        body = json.dumps(document, sort_keys=True).encode()
        services.clients.object_store.put_object(
            channel["container"],
            channel["object"],
            body,
            content_type=owner.content_type(owner.tag(services)),
        )

    def remove_channel(
        self, services: base.Context, server_id: str, channel: base.JsonDict
    ) -> None:
        services.clients.object_store.delete_object(
            channel["container"], channel["object"]
        )

    def collect_config(
        self, services: base.Context, channel: base.JsonDict
    ) -> base.JsonDict:
        return {
            "collectors": ["request"],
            "request": {"metadata_url": self.metadata_url(services, channel)},
        }

    def channel_id(self, channel: base.JsonDict) -> str | None:
        if not channel.get("container") or not channel.get("object"):
            return None
        return f"{channel['container']}/{channel['object']}"

    def existing_channels(self, services: base.Context) -> dict[str, base.FoundChannel]:
        """The objects of this transport's container."""
        found: dict[str, base.FoundChannel] = {}
        for item in services.clients.object_store.list_objects(self.container):
            channel = {"container": self.container, "object": item.name}
            found[f"{self.container}/{item.name}"] = base.FoundChannel(
                channel, owner.of_content_type(item.content_type)
            )
        return found
