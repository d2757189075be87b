"""Nova over python-novaclient: boot, list, show and delete servers."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from keystoneauth1 import exceptions as ksa_exc
from keystoneauth1 import session as ksa_session

from swflows.clients.base import (
    DEFAULT_RETRY,
    RetryPolicy,
    http_error,
    is_missing,
    ksa_error,
    retried,
)
from swflows.exceptions import CloudError

SERVICE = "compute"
API_VERSION = "2.1"

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class ServerInfo:
    id: str
    name: str
    #: Nova's status: ACTIVE, BUILD, ERROR, SHUTOFF, ...
    status: str
    metadata: dict[str, str]


class Compute:
    """Servers of the session's project."""

    def __init__(self, nova: Any, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.nova = nova
        self.retry_policy = retry

    @classmethod
    def from_session(
        cls,
        session: ksa_session.Session,
        *,
        endpoint_override: str | None = None,
        interface: str = "public",
        region_name: str | None = None,
        **kwargs: Any,
    ) -> Compute:
        # novaclient loads at first use: most commands never call Nova
        from novaclient import client as nova_client

        nova = nova_client.Client(
            API_VERSION,
            session=session,
            endpoint_override=endpoint_override,
            endpoint_type=interface,
            region_name=region_name,
        )
        return cls(nova, **kwargs)

    def _call(self, what: str, fn: Callable[..., T], *args: Any) -> T:
        from novaclient import exceptions as nova_exc

        try:
            return fn(*args)
        except nova_exc.ClientException as exc:
            raise http_error(SERVICE, what, exc.code, exc.message) from None
        except ksa_exc.ClientException as exc:
            raise ksa_error(SERVICE, what, exc) from None

    @retried
    def get_server(self, server_id: str) -> ServerInfo | None:
        """The server, or None when Nova says it does not exist."""
        try:
            server = self._call(
                f"show server {server_id}", self.nova.servers.get, server_id
            )
        except CloudError as exc:
            if is_missing(exc, SERVICE):
                return None
            raise
        return ServerInfo(
            id=str(server.id),
            name=str(server.name),
            status=str(server.status),
            metadata={str(k): str(v) for k, v in (server.metadata or {}).items()},
        )

    @retried
    def console_output(self, server_id: str, lines: int) -> str | None:
        """The last ``lines`` lines of the server's console log (where its
        agent's errors show), None when Nova says it does not exist."""
        try:
            return self._call(
                f"show the console log of server {server_id}",
                lambda: str(
                    self.nova.servers.get_console_output(server_id, length=lines) or ""
                ),
            )
        except CloudError as exc:
            if is_missing(exc, SERVICE):
                return None
            raise

    def server_exists(self, server_id: str) -> bool:
        return self.get_server(server_id) is not None

    def server_status(self, server_id: str) -> str | None:
        """Nova's status of the server, None if it does not exist."""
        server = self.get_server(server_id)
        return server.status if server is not None else None

    @retried
    def list_servers(self) -> dict[str, str]:
        """Every server of the project, by id: its status (one call per
        page of Nova's listing)."""
        servers = self._call(
            "list servers", lambda: self.nova.servers.list(detailed=True, limit=-1)
        )
        return {str(server.id): str(server.status) for server in servers}

    def create_server(
        self,
        name: str,
        image: str,
        flavor: str,
        *,
        user_data: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> ServerInfo:
        """Boot a server (not retried: a retry could boot two)."""
        server = self._call(
            f"create server {name}",
            lambda: self.nova.servers.create(
                name,
                image,
                flavor,
                userdata=user_data,
                meta=metadata or None,
            ),
        )
        return ServerInfo(
            id=str(server.id),
            name=name,
            status=str(getattr(server, "status", "BUILD")),
            metadata=dict(metadata or {}),
        )

    @retried
    def delete_server(self, server_id: str) -> bool:
        """Delete a server; False when Nova says it does not exist."""
        try:
            self._call(
                f"delete server {server_id}", self.nova.servers.delete, server_id
            )
        except CloudError as exc:
            if is_missing(exc, SERVICE):
                return False
            raise
        return True
