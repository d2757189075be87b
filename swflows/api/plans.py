"""Choices resolved before a flow starts: transports and their options.

Every choice that depends on configuration (which transports, whether a
stack user is needed) is resolved here and handed to the flow's factory,
so a flow is always rebuilt the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from swflows import bootdata, exceptions, metadata
from swflows import transport_names as names
from swflows.api.base import Base

if TYPE_CHECKING:
    from swflows.flows import common

#: agents that cannot send a ZAQAR_SIGNAL (see Plans._refuse_for_agent)
_NO_ZAQAR_SIGNAL = frozenset({bootdata.HEAT_AGENTS})
#: a server's record not read yet (``None`` is a server never deployed to)
UNREAD: Any = object()


class Plans(Base):
    """Resolves the transports of a deployment and the plan of its flow."""

    def _server(self, server_id: str, server: Any = UNREAD) -> Any:
        """``server`` when the caller read it already (None included), else
        ``server_id``'s record as it is now (None before its first
        deployment): a deploy's choices read it once, not once each."""
        if server is UNREAD:
            return metadata.find_server(self.services, server_id)
        return server

    def _signal_transport(
        self,
        requested: str | None,
        server_id: str | None = None,
        *,
        server: Any = UNREAD,
    ) -> str:
        """The signal transport to use, AUTO resolved; one the agent of
        ``server_id`` cannot use is refused (AUTO passes over it).
        ``server``: its record, when the caller read it (:meth:`_server`)."""
        name = names.normalize_signal_transport(
            requested or self.conf.default_deployment_signal_transport
        )
        agent = (
            metadata.agent_of(self._server(server_id, server))
            if server_id
            else bootdata.SWFLOWS_AGENT
        )
        if name != names.AUTO:
            self.services.signal_transport(name, self.services.signal_options(name))
            self._refuse_for_agent(name, agent, server_id)
            return name
        offered = {
            names.TEMP_URL_SIGNAL: self.services.clients.offers("object_store"),
            names.ZAQAR_SIGNAL: self.services.clients.offers("messaging")
            and agent not in _NO_ZAQAR_SIGNAL,
            names.HEAT_SIGNAL: self.services.clients.offers("stack_users"),
            names.NO_SIGNAL: True,
        }
        for candidate in self.conf.auto_signal_transport_order:
            candidate = names.normalize_signal_transport(
                candidate, "auto_signal_transport_order"
            )
            if offered.get(candidate):
                return candidate
        raise exceptions.NotSupported(
            "AUTO found no signal transport this cloud offers among "
            + ", ".join(self.conf.auto_signal_transport_order)
        )

    @staticmethod
    def _refuse_for_agent(name: str, agent: str, server_id: str | None) -> None:
        if name == names.ZAQAR_SIGNAL and agent in _NO_ZAQAR_SIGNAL:
            raise exceptions.NotSupported(
                f"server {server_id} runs Heat's agents, which cannot send a "
                "ZAQAR_SIGNAL: heat-config-notify posts it with "
                "python-zaqarclient's v1 API, which current clients no longer "
                "ship and current Zaqar (v2) no longer serves; use "
                "TEMP_URL_SIGNAL (or AUTO, which picks it)"
            )

    def _config_transport(
        self, server_id: str, requested: str | None, *, server: Any = UNREAD
    ) -> str:
        """The server's enrolled transport; else ``requested`` or the default.

        An unknown ``requested`` name is refused even when the server's own
        transport is used."""
        asked = names.normalize_config_transport(requested) if requested else None
        server = self._server(server_id, server)
        if server is not None and server.config_transport:
            return str(server.config_transport)
        return asked or names.normalize_config_transport(
            self.conf.default_software_config_transport
        )

    def _config_options(self, name: str) -> dict[str, Any]:
        return self.services.config_options(name)

    def _plan(
        self,
        server_id: str,
        signal_transport: str,
        config_transport: str | None,
        *,
        server: Any = UNREAD,
    ) -> common.Plan:
        transport = self.services.signal_transport(
            signal_transport, self.services.signal_options(signal_transport)
        )
        from swflows.flows import common

        config_name = self._config_transport(server_id, config_transport, server=server)
        return common.Plan(
            signal_transport=signal_transport,
            config_transport=config_name,
            signal_options=self.services.signal_options(signal_transport),
            config_options=self._config_options(config_name),
            needs_stack_user=bool(transport.needs_stack_user),
            waits=bool(transport.waits),
        )
