"""HEAT_SIGNAL: the agent authenticates as a stack user and signals the API.

The embedder receives the signal in its own API and passes it to
:func:`swflows.api.Swflows.signal`; swflows keeps no store for it.  The
user's password is re-derived from the store's secret, never stored.
"""

from __future__ import annotations

from swflows import derive, exceptions
from swflows import transport_names as names
from swflows.clients import identity
from swflows.clients.identity import StackUser
from swflows.transports import base


def stack_user_password(services: base.Context, deployment_id: str) -> str:
    return identity.derive_password(services.secret, "stack-user", deployment_id)


def credential_inputs(
    services: base.Context, ref: base.SignalRef, user: StackUser | None
) -> base.InputPairs:
    if user is None:
        raise exceptions.TransportError(
            names.HEAT_SIGNAL, "a stack user is required and none was created"
        )
    return list(
        derive.heat_signal_inputs(
            auth_url=services.clients.identity_url or "",
            username=user.username,
            user_id=user.user_id,
            password=stack_user_password(services, ref.deployment_id),
            project_id=user.project_id,
        )
    )


class HeatSignal(base.SignalTransport):
    name = names.HEAT_SIGNAL
    needs_stack_user = True
    pulled = False

    def create_store(
        self, services: base.Context, ref: base.SignalRef, user: StackUser | None
    ) -> base.JsonDict:
        return {}

    def agent_inputs(
        self,
        services: base.Context,
        ref: base.SignalRef,
        store: base.JsonDict,
        user: StackUser | None,
    ) -> base.InputPairs:
        return credential_inputs(services, ref, user)

    def delete_store(self, services: base.Context, store: base.JsonDict) -> None:
        return None
