"""Containing what fails while the watcher handles one parked flow.

One flow never stops the others: a failure handling one of them is logged
once, counted by step in :attr:`Containment.failures`, and the watcher goes
on with the rest.  An outage (:mod:`swflows.engine.faults`) is simply met
again next cycle; a fault of the flow's own data, met
:data:`MAX_DATA_FAILURES` times in a row, ends its deployment FAILED (kind
``internal_error``), or sets the flow aside as BROKEN when even that cannot
be written.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Iterable

from swflows import outcomes, signals, states
from swflows.engine import faults
from swflows.persistence import flow_registry as flow_rows
from swflows.services import Services

LOG = logging.getLogger(__name__)

#: a flow whose own data made the watcher fail this many times in a row is
#: ended (``internal_error``) rather than left waiting forever
MAX_DATA_FAILURES = 3
#: failures remembered (not to log them twice) before starting afresh
LOGGED_KEPT = 10000


class Containment:
    """Counts, logs once and, past a limit, ends what keeps failing."""

    def __init__(self, services: Services, registry: flow_rows.FlowRegistry) -> None:
        self.services = services
        self.registry = registry
        #: failures contained, by step (``check``, ``resume``, ``sweep``...)
        self.failures: collections.Counter[str] = collections.Counter()
        #: data faults in a row, by flow id
        self._strikes: dict[str, int] = {}
        #: what was last logged, by flow id and by step: each failure once
        self._logged: dict[str, str] = {}
        self._logged_steps: dict[str, str] = {}
        #: flows that failed in the current cycle
        self._failed_now: set[str] = set()
        self._lock = threading.Lock()

    def new_cycle(self) -> None:
        self._failed_now.clear()

    def looked_clean(self, flow_id: str) -> None:
        """A flow was handled without failing this cycle: its strikes start
        afresh."""
        if flow_id not in self._failed_now:
            self._strikes.pop(flow_id, None)

    def forget_all_but(self, flow_ids: Iterable[str]) -> None:
        """Forget the flows no longer parked."""
        keep = set(flow_ids)
        for gone_id in set(self._strikes).union(self._logged) - keep:
            self._strikes.pop(gone_id, None)
            self._logged.pop(gone_id, None)

    def contain(
        self, step: str, exc: BaseException, row: flow_rows.FlowRow | None = None
    ) -> None:
        """Count and log (once) a failure of ``step``, for ``row``'s flow if
        it is one flow's; end that flow's deployment once its own data
        failed :data:`MAX_DATA_FAILURES` times in a row."""
        detail = faults.describe(exc)
        outage = faults.is_outage(exc)
        with self._lock:  # the signals of one cycle are read at once
            self.failures[step] += 1
            tell = self._first_time(step, detail, row)
            strikes = 0
            if row is not None and not outage:
                self._failed_now.add(row.id)
                strikes = self._strikes.get(row.id, 0) + 1
                self._strikes[row.id] = strikes
                if strikes >= MAX_DATA_FAILURES:
                    self._strikes.pop(row.id, None)
        if tell:
            where = (
                f"flow {row.id} (deployment {row.deployment_id})"
                if row is not None
                else "the watcher"
            )
            LOG.log(
                logging.WARNING if outage else logging.ERROR,
                "signal watcher: %s failed for %s (%s, the others go on): %s",
                step,
                where,
                faults.OUTAGE if outage else "its data",
                detail,
            )
        else:
            LOG.debug("signal watcher: %s failed again: %s", step, detail)
        if row is not None and strikes >= MAX_DATA_FAILURES:
            self._give_up(row, detail, strikes)

    def _first_time(
        self, step: str, detail: str, row: flow_rows.FlowRow | None
    ) -> bool:
        """Whether this failure differs from the last one logged for the
        flow (or, for no flow, the step): each is logged once."""
        logged = self._logged if row is not None else self._logged_steps
        key = row.id if row is not None else step
        if logged.get(key) == detail:
            return False
        if len(logged) >= LOGGED_KEPT:
            logged.clear()
        logged[key] = detail
        return True

    def _give_up(self, row: flow_rows.FlowRow, detail: str, attempts: int) -> None:
        """End a deployment its flow's data keeps failing on (FAILED, kind
        ``internal_error``), so its flow runs on; if it cannot be ended
        (or already was), set the flow aside as BROKEN."""
        outcome = signals.internal_error_outcome(detail, attempts)
        ended = False
        try:
            generation = row.deployment_generation
            if generation is None:
                generation = int((row.waiting or {})["generation"])
            ended = outcomes.record_outcome(
                self.services, row.deployment_id, int(generation), outcome
            )
        except Exception as exc:
            LOG.error(
                "deployment %s could not be ended: %s",
                row.deployment_id,
                faults.describe(exc),
            )
        if ended:
            LOG.error(
                "deployment %s ended FAILED (%s): %s",
                row.deployment_id,
                states.ReasonKind.INTERNAL_ERROR.value,
                outcome.status_reason,
            )
            return
        note = f"set aside after {attempts} failures handling it: {detail}"
        try:
            self.registry.break_flow(row.id, note)
            LOG.error("flow %s %s", row.id, note)
        except Exception as exc:
            LOG.error(
                "flow %s could not be set aside: %s", row.id, faults.describe(exc)
            )


__all__ = ["MAX_DATA_FAILURES", "Containment"]
