"""The facade's flows: custom flows, and every unfinished flow.

A custom flow is a developer's TaskFlow flow built from
:mod:`swflows.flows.compose` pieces; it parks while it awaits a signal
and survives a runner restart as a deployment's flow does.
"""

from __future__ import annotations

from typing import Any

from swflows import exceptions
from swflows import transport_names as names
from swflows.api.deployments import Deployments
from swflows.persistence import flow_registry as flow_rows
from swflows.persistence.flow_registry import FlowRow


class Flows(Deployments):
    """Custom flows, and the runner's view of every unfinished flow."""

    def run_flow(
        self,
        factory: Any,
        /,
        *,
        wait: bool = False,
        wait_timeout: float | None = None,
        **kwargs: Any,
    ) -> str:
        """Run a developer's flow, built by ``factory(**kwargs)``; its id.

        ``factory`` is a module-level function (or its dotted path) that
        returns a TaskFlow flow, typically of :mod:`swflows.flows.compose`
        pieces; ``kwargs`` must be JSON.  Both are checked before anything
        is stored, and a factory another process could not import by its
        dotted path is refused (ValidationError).  The flow parks while it
        awaits a signal, survives a runner restart, and can be cancelled
        (:meth:`cancel_flow`); :meth:`flow_result` reads its outcome.
        ``wait=True`` blocks until it ended (raising its error, if any).
        """
        flow_id, _ = self.runner.launch_custom(factory, dict(kwargs), self._plans())
        if wait:
            self.runner.wait(flow_id, wait_timeout)
        return flow_id

    def _plans(self) -> dict[str, dict[str, Any]]:
        """The plan of every signal transport offered here, and the default's,
        resolved now from the configuration (a custom flow keeps them)."""
        plans: dict[str, dict[str, Any]] = {}
        for name in names.CONCRETE_SIGNAL_TRANSPORTS:
            try:
                plans[name] = self._plan("", name, None).to_kwargs()
            except exceptions.SwflowsError:
                continue  # not offered here
        from swflows.flows import compose

        default = self._signal_transport(None)
        plans[compose.DEFAULT_TRANSPORT] = self._plan("", default, None).to_kwargs()
        return plans

    def wait_flow(self, flow_id: str, timeout: float | None = None) -> dict[str, Any]:
        """Block until flow ``flow_id`` ended; a custom flow's outcome
        (:meth:`flow_result`).  Raises the flow's error, if it failed (a
        :class:`~swflows.exceptions.FlowError` saying it, when the flow
        ended in another process)."""
        from swflows.engine import runner as engine_runner

        self.runner.wait(flow_id, timeout)
        outcome = self.flow_result(flow_id)
        error = engine_runner.stored_error(flow_id, outcome)
        if error is not None:
            raise error
        return outcome

    def flow_result(self, flow_id: str) -> dict[str, Any]:
        """A custom flow's outcome: ``state`` (SUCCESS or REVERTED once it
        ended; RUNNING, PARKED or BROKEN before), ``result`` (the values
        its steps provided under names without a dot), ``error`` and
        ``factory``.  Raises FlowNotFound for an unknown flow."""
        ended = self.runner.result_of(flow_id)
        if ended is not None:
            return ended
        row = self.runner.registry.get(flow_id)
        if row is None:
            raise exceptions.FlowNotFound(flow_id)
        return {
            "id": flow_id,
            "factory": None,
            "state": row.state,
            "result": {},
            "error": row.note if row.state == flow_rows.BROKEN else None,
        }

    def forget_flow(self, flow_id: str) -> bool:
        """Drop an ended custom flow's stored outcome; False if it had none."""
        return self.runner.forget_result(flow_id)

    def cancel_flow(self, flow_id: str, reason: str | None = None) -> None:
        """Cancel an unfinished flow.

        A custom flow is stopped at its next step boundary, or woken from
        its wait (that deployment ends FAILED, kind ``cancelled``), and
        reverted: every step it ran is undone in reverse order.  A built-in
        flow's deployment is cancelled (:meth:`cancel`).  Raises
        FlowNotFound when no such flow is unfinished.
        """
        row = self.runner.registry.get(flow_id)
        if row is None or row.state == flow_rows.BROKEN:
            raise exceptions.FlowNotFound(flow_id)
        if row.kind != flow_rows.CUSTOM:
            self.cancel(row.deployment_id, reason)
            return
        if not self.runner.request_cancel(flow_id, reason):
            raise exceptions.FlowNotFound(flow_id)

    def list_flows(self, deployment_id: str | None = None) -> list[FlowRow]:
        """Unfinished flows: running, parked (waiting) or broken.

        A custom flow's row (kind ``custom``) names the deployment it
        awaits now, found by ``deployment_id`` here.
        """
        return self.runner.registry.find(deployment_id=deployment_id)

    def current_step(self, flow_id: str) -> str | None:
        """The step a flow is running now (``CreateSignalStore``, or
        ``PublishMetadata (reverting)``), read from its logbook; None when
        no step is at work (parked, or between steps)."""
        from swflows.persistence import logbook

        busy = logbook.busy_atoms(self.store.taskflow_backend(), flow_id)
        if not busy:
            return None
        name, state = busy[0]
        step = name.split(".", 2)[-1]
        return f"{step} (reverting)" if state == "REVERTING" else step

    def list_interrupted(self) -> list[FlowRow]:
        """Flows no live runner drives: their runner died (its lease ran
        out) or they were set aside as BROKEN, with a note saying why."""
        return self.runner.interrupted()

    def resume(self, flow_id: str | None = None) -> list[str]:
        """Take over and resume interrupted flows (all, or ``flow_id``).

        Runners do this themselves when they start and while they run
        (``[runner] resume_on_start``); this is for operators who turned
        that off, or who do not want to wait for a dead runner's lease.
        Returns the ids of the flows resumed.
        """
        return self.runner.resume_interrupted(flow_id)
