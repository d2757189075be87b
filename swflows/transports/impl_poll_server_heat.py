"""POLL_SERVER_HEAT: the embedder serves the metadata from swflows' store.

Nothing is pushed anywhere: the embedder's own API answers the server's
polls with :meth:`swflows.api.Swflows.server_metadata`.
"""

from __future__ import annotations

from swflows import transport_names as names
from swflows.transports import base


class PollServerHeat(base.ConfigTransport):
    name = names.POLL_SERVER_HEAT

    def ensure_channel(self, services: base.Context, server_id: str) -> base.JsonDict:
        return {}

    def publish(
        self,
        services: base.Context,
        server_id: str,
        channel: base.JsonDict,
        document: base.JsonDict,
    ) -> None:
        return None

    def remove_channel(
        self, services: base.Context, server_id: str, channel: base.JsonDict
    ) -> None:
        return None
