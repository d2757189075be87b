"""Takeover and leases: flows resumed from their logbooks after they
were parked or their runner died, and the leases that say who drives one.

After a crash, a runner (the same one restarted, or another) finds the
flows whose runner is gone and resumes them from their logbooks: steps that
ended are not run again, the one that was running is run again (every task
is idempotent), and a flow that was waiting stays parked.  A flow left
behind by a database outage (this runner's own, whose lease ran out while
nothing drove it) is taken over like a dead runner's.  Resuming one flow
never stops the others: a failure is logged, counted in
:attr:`~swflows.engine.driving.Driving.failures`, and the flow left for a
later try, or set aside as BROKEN once it failed too often.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from taskflow import engines
from taskflow import exceptions as tf_exc
from taskflow import states as tf_states

from swflows import exceptions, failpoints, flows
from swflows.engine import faults
from swflows.engine.driving import Claim, Driving, end_waits
from swflows.engine.liveness import Liveness
from swflows.engine.results import CUSTOM, META_KEY, FlowCancelled
from swflows.flows import compose
from swflows.persistence import flow_registry as flow_rows
from swflows.persistence.logbook import INJECTOR

LOG = logging.getLogger(__name__)

#: flow states after which a logbook must never be loaded again: loading a
#: REVERTED flow would run all of it anew
TERMINAL_FLOW_STATES = frozenset(
    {tf_states.SUCCESS, tf_states.REVERTED, tf_states.FAILURE}
)


#: a flow taken over this many times is set aside as BROKEN, not resumed
#: again: something in it kills or stops every runner that drives it
MAX_TAKEOVERS = 5


class Takeover(Driving):
    """Resumes parked and interrupted flows; renews this runner's leases."""

    #: the runner's background loops, and those running beside it
    liveness: Liveness

    # -- resuming ---------------------------------------------------------
    def resume_parked(
        self, flow_id: str, waiting: dict[str, Any] | None = None
    ) -> bool:
        """Claim a parked flow and run it on; False if another runner has it.

        If it cannot be rebuilt, it is parked again on ``waiting`` (what it
        waited for) before the error is raised, for the watcher to judge.
        """
        if self.stopping:
            return False
        if self.jobs is not None:  # a conductor goes on with it
            return self.jobs.requeue(flow_id)
        if not self.registry.claim(
            flow_id,
            self.owner,
            lease_until=time.time() + self.lease_seconds,
            now=time.time(),
            from_states=(flow_rows.PARKED,),
        ):
            return False
        try:
            return self._load_and_submit(flow_id)
        except Exception:
            if waiting is not None:
                with contextlib.suppress(Exception):
                    self.registry.park(flow_id, self.owner, waiting)
            raise

    def interrupted(self) -> list[flow_rows.FlowRow]:
        """Flows no live runner drives: their runner died or gave them up,
        or they were set aside as BROKEN (with a note saying why)."""
        now = time.time()
        return [
            row
            for row in self.registry.find(states=[flow_rows.RUNNING, flow_rows.BROKEN])
            if row.state == flow_rows.BROKEN
            or (row.lease_expired(now) if self.jobs else self._orphaned(row, now))
        ]

    @staticmethod
    def _owner_gone(row: flow_rows.FlowRow, now: float) -> bool:
        return row.lease_expired(now) or flow_rows.owner_is_dead(row.owner)

    def resume_interrupted(self, flow_id: str | None = None) -> list[str]:
        """Take over and resume interrupted flows (all, or ``flow_id``).

        Returns the ids resumed.  A BROKEN flow is not resumed; a flow a
        live runner holds is left alone.
        """
        if self.jobs is not None:  # conductors resume them: re-post lost jobs
            return self.jobs.reap(flow_id)
        resumed = []
        now = time.time()
        for row in self.registry.find(states=[flow_rows.RUNNING]):
            if flow_id is not None and row.id != flow_id:
                continue
            try:
                if self._take_over(row, now):
                    resumed.append(row.id)
            except Exception as exc:
                self._resume_failed(row, exc)
        return resumed

    def _orphaned(self, row: flow_rows.FlowRow, now: float) -> bool:
        """Whether a RUNNING flow has nobody driving it: its runner is gone,
        or it is this runner's own, not driven here, its lease run out (its
        end could not be recorded through a database outage)."""
        if row.owner != self.owner:
            return self._owner_gone(row, now)
        with self._lock:
            driven = (
                row.id in self._drives
                or row.id in self._recording
                or row.id in self._launching
            )
        return not driven and row.lease_expired(now)

    def _resume_failed(self, row: flow_rows.FlowRow, exc: BaseException) -> None:
        """Contain a failure resuming one flow: logged, counted, and the flow
        released for a later try (counted as a takeover, unless it was an
        outage, so one failing on every try is set aside as BROKEN)."""
        self.failures["resume"] += 1
        outage = faults.is_outage(exc)
        LOG.log(
            logging.WARNING if outage else logging.ERROR,
            "flow %s (%s): could not be resumed (%s, the others go on): %s",
            row.id,
            row.kind,
            faults.OUTAGE if outage else "its data",
            faults.describe(exc),
        )
        with contextlib.suppress(Exception):
            self.registry.release(row.id, self.owner, failed=not outage)

    def _take_over(self, row: flow_rows.FlowRow, now: float) -> bool:
        """Claim and resume one interrupted flow; whether it was resumed."""
        if not self._orphaned(row, now):
            return False
        if row.takeovers >= MAX_TAKEOVERS:
            note = (
                f"taken over {row.takeovers} times without finishing: "
                "its runners keep dying or failing on it"
            )
            self.registry.break_flow(row.id, note)
            LOG.error("flow %s (%s) set aside: %s", row.id, row.kind, note)
            return False
        if not self.registry.claim(
            row.id,
            self.owner,
            lease_until=time.time() + self.lease_seconds,
            now=now,
            from_states=(flow_rows.RUNNING,),
            dead_owner=row.owner if flow_rows.owner_is_dead(row.owner) else None,
        ):
            return False
        LOG.info("flow %s (%s): taken over from %s", row.id, row.kind, row.owner)
        return self._load_and_submit(row.id)

    def _load_and_submit(self, flow_id: str, claim: Claim | None = None) -> bool:
        """Rebuild a claimed flow from its logbook and drive it: in a round
        when a conductor lends it with ``claim`` and it is a new deploy
        flow (:meth:`_adopt`), else in an engine of its own."""
        try:
            with self._connection() as conn:
                book = conn.get_logbook(flow_id)
            detail = book.find(flow_id)
        except tf_exc.NotFound:  # no logbook: the flow never started
            LOG.info("flow %s has no logbook: it never started", flow_id)
            self.registry.remove(flow_id)
            self._finish(flow_id, None)
            return False
        if detail is None:
            self.registry.remove(flow_id)
            return False
        if detail.state in TERMINAL_FLOW_STATES:
            # it ended but was not cleaned up: never load it (REVERTED would
            # run again from the start)
            custom = (detail.meta.get(META_KEY) or {}).get("kind") == CUSTOM
            if detail.state == tf_states.FAILURE:
                self.registry.break_flow(flow_id, "a revert failed")
            else:
                if custom and "state" not in (book.meta or {}).get(META_KEY, {}):
                    # ended before its outcome was written: its state at least,
                    # and why it reverted
                    self._save_result(
                        flow_id,
                        {
                            "state": detail.state,
                            "result": {},
                            "error": self._reverted_by(flow_id, detail),
                        },
                        forget=True,
                    )
                else:
                    self._forget(flow_id, keep_book=custom)
            self._finish(flow_id, None)
            return False
        meta = detail.meta.get(META_KEY) or {}
        kind = str(meta.get("kind"))
        if kind == CUSTOM:
            return self._load_custom(flow_id, detail, meta)
        if kind not in flows.VERSIONS or meta.get("version") != flows.VERSIONS[kind]:
            note = (
                f"stored flow {kind!r} version {meta.get('version')!r} does not "
                f"match this version of swflows ({flows.VERSIONS.get(kind)!r})"
            )
            self.registry.break_flow(flow_id, note)
            self._finish(flow_id, exceptions.FlowError(None, note))
            return False
        inputs = _inputs_row(detail)
        if inputs is None or inputs.results is None:
            # its runner died between writing the logbook and storing the
            # flow's inputs (or between adding their row and writing their
            # values): the launch did not complete (its caller got no
            # answer) and no step ran, so there is nothing to finish
            LOG.info("flow %s (%s) was never given its inputs: removed", flow_id, kind)
            self._forget(flow_id)
            self._finish(flow_id, None)
            return False
        if claim is not None and self._adopt(flow_id, book, detail, claim):
            return True
        flow = engines.flow_from_detail(detail)
        writes = self.backend.fenced(flow_id, self.owner, loaded=detail)
        engine = engines.load(flow, flow_detail=detail, backend=writes)
        self._future(flow_id)
        self._submit(
            flow_id,
            engine,
            flow,
            resumed=True,
            deployment_id=str(meta.get("deployment_id") or ""),
            writes=writes,
        )
        return True

    def _reverted_by(self, flow_id: str, detail: Any) -> str | None:
        """What made an ended flow revert, as :meth:`_outcome` words it:
        its cancel, or the failure its logbook kept; None if it succeeded."""
        if detail.state != tf_states.REVERTED:
            return None
        note = self.registry.cancel_note(flow_id)
        if note is not None:
            return f"{FlowCancelled.__name__}: flow {flow_id}: {note}"
        for atom_detail in detail:
            failure = getattr(atom_detail, "failure", None)
            if failure is not None:
                name = next(iter(failure), "Error").rpartition(".")[2]
                return f"{name}: {failure.exception_str}"
        return None

    def _load_custom(self, flow_id: str, detail: Any, meta: dict[str, Any]) -> bool:
        """Rebuild a custom flow with its stored factory, kwargs and plans."""
        try:
            with compose.planning(dict(meta.get("plans") or {})):
                flow = engines.flow_from_detail(detail)
        except Exception as exc:
            note = (
                f"custom flow {meta.get('factory')!r} could not be rebuilt: "
                f"{type(exc).__name__}: {exc}"
            )
            self.registry.break_flow(flow_id, note)
            self._finish(flow_id, exceptions.FlowError(flow_id, note))
            return False
        # its id again if a runner died before storing it (stored again
        # each time, it would cost a write of the logbook each resume)
        writes = self.backend.fenced(flow_id, self.owner, loaded=detail)
        stored = _inputs_row(detail)
        if stored is not None and stored.results is None:
            # its row was added but its values never written (the runner
            # died between the two): TaskFlow cannot load a flow whose
            # inputs row has no values; its id is all it holds, given again
            stored.results = {}
            stored.state = tf_states.SUCCESS
        has_id = (
            stored is not None and stored.results.get(compose.FLOW_ID_KEY) == flow_id
        )
        engine = engines.load(
            flow,
            store=None if has_id else {compose.FLOW_ID_KEY: flow_id},
            flow_detail=detail,
            backend=writes,
        )
        self._future(flow_id)
        self._submit(flow_id, engine, flow, resumed=True, custom=True, writes=writes)
        return True

    # -- leases -----------------------------------------------------------
    def _renew_forever(self) -> None:
        loop = self.liveness.loop("leases", self.lease_seconds / 3)
        with loop.running_in(lambda: self.stopping):
            while not self._stopping.wait(loop.every):
                if not loop.run(self._renew_once):
                    self.failures["renew leases"] += 1

    def _renew_once(self) -> None:
        failpoints.hit("runner.renew_leases")
        self.renew_leases()

    def renew_leases(self) -> None:
        """Extend this runner's leases; stop the flows whose lease was lost."""
        with self._lock:
            drives = dict(self._drives)
            launching = set(self._launching)
        if not drives and not launching:
            return
        held = self.registry.renew(
            self.owner, set(drives) | launching, time.time() + self.lease_seconds
        )
        for flow_id, drive in drives.items():
            if flow_id not in held and not drive.parking:
                # another runner took it over: stop before the next step
                drive.lost = True
        cancelled = self.registry.cancelled_among(
            flow_id
            for flow_id, drive in drives.items()
            if drive.custom and flow_id in held and not drive.parking
        )
        for flow_id in cancelled:
            end_waits(self.services, self.registry, drives[flow_id])

    def lose(self, flow_id: str) -> None:
        """Another process owns ``flow_id`` now: stop before its next step.

        The drive is marked lost, not suspended: suspending waits for the
        step it runs to end (TaskFlow runs a step holding its storage's
        lock), and the heartbeat calling this must not wait for a step.
        Its next step does not start (:meth:`~swflows.engine.driving.
        Driving._on_atom`), and the step it runs cannot record its end:
        its logbook is fenced (:mod:`swflows.persistence.logbook`).
        """
        with self._lock:
            drive = self._drives.get(flow_id)
        if drive is not None:
            drive.lost = True


def _inputs_row(detail: Any) -> Any:
    """The row of a flow's stored inputs, None if it was never written.
    Its ``results`` are None when the values never were: TaskFlow adds
    the row, then writes them, and a runner can die between the two."""
    return next((atom for atom in detail if atom.name == INJECTOR), None)


__all__ = ["INJECTOR", "MAX_TAKEOVERS", "TERMINAL_FLOW_STATES", "Takeover"]
