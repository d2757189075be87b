"""POLL_TEMP_URL: the server polls its metadata object through a GET TempURL.

One object per server, ``<container>/<server id>``; swflows writes it with
its own token and the server reads it with a GET TempURL that lasts until
2038, the way Heat does it.  The ``os-collect-config`` section points Heat's
``request`` collector at the same URL, so Heat's agents poll it too.
"""

from __future__ import annotations

import json
import math
import threading
import time

from swflows import bootdata
from swflows import transport_names as names
from swflows.transports import base, owner

DEFAULT_CONTAINER = "swflows-metadata"
#: the TempURL lifetime of a server's metadata URL (Heat uses the same)
NEVER = 2**31 - 1
#: how far past a whole second a write read by Heat's agents waits, for a
#: clock a little off Swift's
SECOND_MARGIN = 0.05

#: when this process last wrote each object read by Heat's agents
_WRITTEN: dict[tuple[str, str], float] = {}
_WRITTEN_LOCK = threading.Lock()


def _past_the_last_write(key: tuple[str, str]) -> None:
    """Wait until the whole second after the last write of ``key`` began.

    Heat's ``request`` collector fetches the object only when its
    ``Last-Modified`` (whole seconds) is newer than the one it read: a
    version written in the same second as one it already read was never
    fetched (a deployment its agents never ran).  swflows' own agent tells
    versions by their ETag and needs no wait.
    """
    with _WRITTEN_LOCK:
        last = _WRITTEN.get(key)
    if last is None:
        return
    wait = math.ceil(last) + SECOND_MARGIN - time.time()
    if wait > 0:
        time.sleep(wait)


def _written(key: tuple[str, str]) -> None:
    now = time.time()
    with _WRITTEN_LOCK:
        _WRITTEN[key] = now
        if len(_WRITTEN) > 4096:  # only the last second's writes matter
            for old in [k for k, at in _WRITTEN.items() if at < now - 2]:
                del _WRITTEN[old]


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
        key = (str(channel["container"]), str(channel["object"]))
        heat_reads = channel.get(bootdata.CHANNEL_AGENT) == bootdata.HEAT_AGENTS
        if heat_reads:
            _past_the_last_write(key)
        services.clients.object_store.put_object(
            key[0],
            key[1],
            body,
            content_type=owner.content_type(owner.tag(services)),
        )
        if heat_reads:
            _written(key)  # after Swift stamped it: never earlier than its stamp

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
