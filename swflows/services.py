"""The run-time services a task reaches: the store, the cloud, the options.

A :class:`Services` object is handed to a flow's tasks as a *transient*
value: it is injected each time an engine is loaded and never written to
the logbook, so no client, token or key is ever persisted with a flow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from swflows import transport_names as names

if TYPE_CHECKING:
    from oslo_config import cfg

    from swflows.clients.cloud import Clients
    from swflows.persistence.store import Store
    from swflows.transports.base import ConfigTransport, SignalTransport

#: the store key under which tasks receive the services
SERVICES_KEY = "services"


@dataclasses.dataclass
class Services:
    """Everything a task needs at run time (never persisted)."""

    store: Store
    conf: cfg.ConfigOpts
    clients: Clients
    #: key material for values swflows re-derives instead of storing
    secret: bytes
    #: the clients acting for one deployment's project, through its trust
    #: (see :meth:`for_deployment`); None: swflows' own
    acting: Clients | None = None
    #: the check a flow's write outside the database makes right before it
    #: writes (see :meth:`check_fence`); None: not run by a fenced flow
    fence: Callable[[], None] | None = None

    @property
    def project_clients(self) -> Clients:
        """The clients a deployment's own cloud resources (its signal store)
        are made, read and removed with: through its trust when it has one,
        else swflows' own; server-wide resources always use :attr:`clients`."""
        return self.acting if self.acting is not None else self.clients

    def for_deployment(self, deployment_id: str) -> Services:
        """These services as the deployment's work sees them: acting through
        its trust (or its group's) when it has one (see :mod:`swflows.trusts`)."""
        from swflows import trusts

        found = trusts.acting_trusts(self.store, [deployment_id])
        return self.for_trust(found.get(deployment_id))

    def for_trust(self, trust_id: str | None) -> Services:
        """These services acting through ``trust_id`` (None: as they are)."""
        if trust_id is None:
            return (
                self if self.acting is None else dataclasses.replace(self, acting=None)
            )
        return dataclasses.replace(self, acting=self.clients.for_trust(trust_id))

    def check_fence(self) -> None:
        """Raise unless the flow these services run still belongs to this
        process: called right before each write outside the database (a
        metadata document, a signal store, a trust, a Keystone user), so a
        process paused past its claim and then continued writes nothing
        stale.  What it raises is a :class:`BaseException` (the runner's
        ``ClaimLost`` or ``FlowFenced``): TaskFlow records nothing, and the
        flow is left to its new owner."""
        if self.fence is not None:
            self.fence()

    def fenced(self, fence: Callable[[], None] | None) -> Services:
        """These services with ``fence`` checked before their flow's writes."""
        return dataclasses.replace(self, fence=fence)

    def __repr__(self) -> str:  # never show the secret
        return f"Services(store={self.store!r})"

    def signal_options(self, name: str) -> dict[str, Any]:
        """The options a signal transport gets from the configuration."""
        conf = self.conf
        if name == names.TEMP_URL_SIGNAL:
            return {
                "container": conf.signal_container,
                "digest": conf.tempurl_digest,
                "grace": conf.tempurl_grace_period,
            }
        if name == names.ZAQAR_SIGNAL:
            return {"auth": conf.zaqar_signal_auth, "grace": conf.tempurl_grace_period}
        return {}

    def config_options(self, name: str) -> dict[str, Any]:
        """The options a config transport gets from the configuration."""
        conf = self.conf
        if name == names.POLL_TEMP_URL:
            return {"container": conf.metadata_container, "digest": conf.tempurl_digest}
        if name == names.ZAQAR_MESSAGE:
            return {
                "auth": conf.zaqar_message_auth,
                "max_message_size": conf.zaqar_max_message_size,
            }
        return {}

    def signal_transport(
        self, name: str, options: dict[str, Any] | None = None
    ) -> SignalTransport:
        from swflows.transports import registry

        return registry.signal_transport(name, options)

    def config_transport(
        self, name: str, options: dict[str, Any] | None = None
    ) -> ConfigTransport:
        from swflows.transports import registry

        return registry.config_transport(name, options)
