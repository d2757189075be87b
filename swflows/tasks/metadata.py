"""Publishing a server's metadata document through its config transport."""

from __future__ import annotations

import logging
from typing import Any

import tenacity

from swflows import exceptions
from swflows.services import Services
from swflows.tasks import base

LOG = logging.getLogger(__name__)

#: seconds a publisher keeps trying to leave the latest document published;
#: a round is only lost to a new change of the server's deployments, so
#: once the changes stop every writer finishes on its next round, however
#: many there are and however slow each round is on a loaded machine
PUBLISH_PATIENCE = 120.0


def find_server(services: Services, server_id: str) -> Any:
    """The server's record, or None before its first deployment."""
    try:
        return services.store.get_server(server_id)
    except exceptions.ServerNotFound:
        return None


def publish_server(
    services: Services,
    server_id: str,
    transport: str,
    options: dict[str, Any] | None = None,
) -> int:
    """Publish ``server_id``'s current document; return the version published.

    The document is read with its version, published, and then confirmed
    with a compare-and-swap; if another writer changed the server in
    between, it is read and published again, so the last copy published
    always matches the store.  The server keeps the transport it was first
    published with (or enrolled with); ``transport`` applies to new servers.
    """
    store = services.store
    server = find_server(services, server_id)
    name = (server.config_transport if server else None) or transport
    config_transport = services.config_transport(name, options)
    channel = server.channel if server and server.channel is not None else None
    if channel is None:
        channel = config_transport.ensure_channel(services, server_id)
        collect = config_transport.collect_config(services, channel)
        channel = {**channel, "os-collect-config": collect}
        store.set_server_channel(server_id, name, channel)

    @tenacity.retry(
        retry=tenacity.retry_if_exception_type(exceptions.ConcurrentUpdate),
        stop=tenacity.stop_after_delay(PUBLISH_PATIENCE),
        wait=tenacity.wait_random_exponential(multiplier=0.05, max=1),
        reraise=True,
    )
    def attempt() -> int:
        snapshot = store.server_metadata(server_id)
        document = {
            "deployments": snapshot.deployments,
            "os-collect-config": channel.get("os-collect-config", {}),
        }
        config_transport.publish(services, server_id, channel, document)
        if not store.mark_published(server_id, snapshot.version):
            if store.server_metadata(server_id).version <= snapshot.version:
                return snapshot.version  # a concurrent publisher got there first
            raise exceptions.ConcurrentUpdate(
                f"server {server_id} changed while publishing", server_id=server_id
            )
        return snapshot.version

    return attempt()


class PublishMetadata(base.TransportTask):
    """Publish the server's metadata so its agent sees this action."""

    default_provides = "published_version"

    def execute(self, services: Services, server_id: str) -> int:
        return publish_server(
            services, server_id, self.transport_name, self.transport_options
        )
