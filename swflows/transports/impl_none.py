"""NO_SIGNAL: nothing comes back; the deployment is complete once published."""

from __future__ import annotations

from swflows import transport_names as names
from swflows.clients.identity import StackUser
from swflows.transports import base


class NoSignal(base.SignalTransport):
    name = names.NO_SIGNAL
    pulled = False
    waits = False

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
        return []

    def delete_store(self, services: base.Context, store: base.JsonDict) -> None:
        return None
