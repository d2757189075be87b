"""The task that publishes a server's metadata document (:mod:`swflows.metadata`)."""

from __future__ import annotations

from swflows import failpoints, metadata
from swflows.services import Services
from swflows.tasks import base


class PublishMetadata(base.TransportTask):
    """Publish the server's metadata so its agent sees this action."""

    default_provides = "published_version"
    publishes = True

    def execute(self, services: Services, server_id: str) -> int:
        failpoints.hit("publish_metadata")
        return metadata.publish_server(
            services, server_id, self.transport_name, self.transport_options
        )
