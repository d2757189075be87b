"""NO_SIGNAL: nothing comes back; the deployment is complete once published."""

from __future__ import annotations

from typing import TYPE_CHECKING

from swflows.transports import base, names

if TYPE_CHECKING:
    from swflows.services import Services


class NoSignal(base.SignalTransport):
    name = names.NO_SIGNAL
    pulled = False
    waits = False

    def create_store(
        self, services: Services, ref: base.SignalRef, user: base.StackUser | None
    ) -> base.JsonDict:
        return {}

    def agent_inputs(
        self,
        services: Services,
        ref: base.SignalRef,
        store: base.JsonDict,
        user: base.StackUser | None,
    ) -> base.InputPairs:
        return []

    def delete_store(self, services: Services, store: base.JsonDict) -> None:
        return None
