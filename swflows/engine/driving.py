"""Driving flows: each on one of the runner's threads, step by step,
until it ends, parks at a wait, is cancelled or stops.

When a flow reaches a step that waits for its server
(:attr:`~swflows.tasks.base.Task.parks`), the engine is suspended and the
flow *parked*: no thread waits for it.  The :class:`~swflows.engine.watcher.
Watcher` resumes it when its signal lands, it times out or it is cancelled.

A developer's own flow (kind ``custom``) can be cancelled as a whole
(:meth:`Driving.request_cancel`): it is stopped at its next step boundary,
or woken from its wait, and reverted.

Recording how a flow ended (or that it parked) is retried while the
database is unreachable, for up to :data:`RECORD_RETRY_SECONDS`.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import tenacity
from taskflow import atom as tf_atom
from taskflow import exceptions as tf_exc
from taskflow import states as tf_states
from taskflow.types import failure as tf_failure
from taskflow.types import notifier

from swflows import exceptions, metadata, outcomes, projects, signals, states, trusts
from swflows.engine import faults
from swflows.engine.results import FlowCancelled, Results
from swflows.engine.watcher import Watcher, waiting_of
from swflows.flows import compose
from swflows.model import Deployment
from swflows.persistence import flow_registry as flow_rows
from swflows.persistence import logbook
from swflows.services import SERVICES_KEY, Services

if TYPE_CHECKING:
    from swflows.engine import jobboard

LOG = logging.getLogger(__name__)

#: states of a waiting step that has not ended: a flow resumed with its wait
#: in another state is past it or reverting, and is never parked again
WAIT_NOT_DONE = frozenset({tf_states.PENDING, tf_states.RUNNING})
#: atom states a conductor's runner enters only while it holds the claim
FENCED_STATES = frozenset({tf_states.RUNNING, tf_states.REVERTING})
#: how long recording a flow's end (or its parking) is retried while the
#: database is unreachable; past that, the flow is taken over once its
#: lease runs out
RECORD_RETRY_SECONDS = 300.0
#: stored values never kept in a custom flow's result
PRIVATE_VALUES = frozenset(
    {SERVICES_KEY, compose.FLOW_ID_KEY, "signal_store", "stack_user"}
)


class _Drive:
    """One engine this runner is driving now."""

    def __init__(self, flow_id: str, engine: Any, park_after: dict[str, Any]) -> None:
        self.flow_id = flow_id
        self.engine = engine
        self.park_after = park_after
        self.parking = False
        self.lost = False
        #: rebuilt from its logbook (not a new flow)
        self.resumed = False
        #: what it waits for, once known
        self.waiting: dict[str, Any] | None = None
        #: a developer's own flow (kind ``custom``)
        self.custom = False
        #: stopped at a step boundary because it was cancelled
        self.cancelling = False
        #: the deployment it works on ('' for a developer's own flow)
        self.deployment_id = ""
        #: its end or its parking was recorded (its job may be consumed)
        self.settled = False
        #: the logbook its engine writes through, fenced on its row
        self.writes: logbook.Fenced | None = None
        #: called before each step (under a conductor: raises
        #: :class:`~swflows.engine.conductor.ClaimLost` once the job's
        #: claim is another's)
        self.fence: Callable[[_Drive], None] | None = None
        #: set each time one of its steps that write its deployment's row
        #: succeeds (see :meth:`Driving.progress_of`)
        self.progressed = threading.Event()
        #: the names of those steps
        self.row_writers: frozenset[str] = frozenset()


@dataclasses.dataclass(eq=False)
class Claim:
    """What a conductor lends a flow of a job it claimed when the flow is
    launched in a round (:mod:`~swflows.engine.batching`) rather than in an
    engine: the check of the job's claim right before the round writes
    outside the database for it, and the round's end of it."""

    #: raises :class:`~swflows.persistence.logbook.FlowFenced` once the
    #: job's claim may be another conductor's
    fence: Callable[[], None]
    #: called once the round is done with the flow: True when it parked
    #: (its job is consumed), False when it left it (its job is settled
    #: by its row), None when an engine of its own drives it now (its job
    #: is settled as that drive ends)
    done: Callable[[bool | None], None]
    #: set by the round that took the flow on
    adopted: bool = False


class Driving(Results):
    """Drives one runner's flows on its worker threads; parks and cancels
    them."""

    #: the signal watcher resuming this runner's parked flows
    watcher: Watcher
    #: with ``[jobboard] enabled``: the board flows are posted to
    jobs: jobboard.Jobs | None

    def __init__(self, services: Services, *, workers: int | None = None) -> None:
        super().__init__(services)
        self.owner = flow_rows.new_owner(uuid.uuid4().hex[:12])
        self.lease_seconds = float(self.conf.runner.lease_seconds)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers or int(self.conf.runner.workers),
            thread_name_prefix="swflows-runner",
        )
        self._drives: dict[str, _Drive] = {}
        self._stopping = threading.Event()
        #: flows whose end is being recorded (not to be taken over meanwhile)
        self._recording: set[str] = set()
        #: flows launched here, row written and drive not yet: leased, driven
        self._launching: set[str] = set()
        #: failures contained, by step (``record end``, ``resume``...)
        self.failures: collections.Counter[str] = collections.Counter()

    def services_for(self, deployment_id: str) -> Services:
        """The services a deployment's flow runs with: acting through the
        deployment's trust when it has one (see :mod:`swflows.trusts`)."""
        if not deployment_id or self.services.clients.trustee is None:
            return self.services
        return self.services.for_deployment(deployment_id)

    def _adopt(self, flow_id: str, book: Any, detail: Any, claim: Claim) -> bool:
        """Hand a claimed flow to a round, not an engine (:class:`Claim`)."""
        return False

    def drives_now(self, flow_id: str) -> bool | None:
        """Whether this runner drives ``flow_id`` now: None if not, else
        whether that drive goes on (False: it lost the flow and is
        stopping, or its end is being recorded)."""
        with self._lock:
            drive = self._drives.get(flow_id)
            if drive is None:
                return False if flow_id in self._recording else None
            return not drive.lost

    def _ending_here(self, flow_id: str) -> bool:
        with self._lock:
            return flow_id in self._drives or flow_id in self._recording

    def progress_of(self, flow_id: str) -> threading.Event | None:
        """An event set each time a step of ``flow_id``, driven here, that
        writes its deployment's row succeeds (a task whose ``writes_row``
        is true; None: not driven here): who waits for that row reads the
        store when it is set, neither every few milliseconds nor after
        each of the steps before."""
        with self._lock:
            drive = self._drives.get(flow_id)
        return None if drive is None else drive.progressed

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def wake(self) -> None:
        """Have the watcher look at parked flows now (a signal was pushed)."""
        self.watcher.wake()

    def _submit(
        self,
        flow_id: str,
        engine: Any,
        flow: Any,
        *,
        resumed: bool = False,
        custom: bool = False,
        deployment_id: str = "",
        writes: logbook.Fenced | None = None,
        progressed: threading.Event | None = None,
    ) -> None:
        drive = _Drive(flow_id, engine, parks_after(flow))
        if progressed is not None:  # who waits for its row waits on this
            drive.progressed = progressed
        drive.row_writers = row_writers(flow)
        drive.resumed = resumed
        drive.custom = custom
        drive.deployment_id = deployment_id
        drive.writes = writes
        if writes is not None and custom:
            writes.stops_on = flow_rows.is_cancel_note
        if self.jobs is not None:
            drive.fence = self.jobs.fence_for(flow_id)
        fence = write_fence(self.registry, self.owner, drive)
        services = self.services_for(deployment_id).fenced(fence)
        engine.storage.inject({SERVICES_KEY: services}, transient=True)
        engine.atom_notifier.register(notifier.Notifier.ANY, self._on_atom(drive))
        with self._lock:
            self._drives[flow_id] = drive
        try:
            self._executor.submit(self._drive, drive)
        except RuntimeError:  # shutting down: leave it for the next runner
            with self._lock:
                self._drives.pop(flow_id, None)
            self.registry.release(flow_id, self.owner)
            if self.jobs is not None:
                self.jobs.drive_done(flow_id)

    def _on_atom(self, drive: _Drive) -> Any:
        def callback(state: str, details: dict[str, Any]) -> None:
            if drive.fence is not None and state in FENCED_STATES:
                drive.fence(drive)  # a BaseException: the step does not run
            if drive.lost and state in FENCED_STATES:  # another's now
                raise logbook.FlowFenced(drive.flow_id, self.owner, None)
            if state != tf_states.SUCCESS:
                return
            if details.get("task_name") in drive.row_writers:
                drive.progressed.set()
            if drive.custom and cancel_requested(self.registry, drive):
                drive.cancelling = True
                drive.engine.suspend()
            elif details.get("task_name") in drive.park_after:
                drive.parking = True
                drive.engine.suspend()

        return callback

    def _drive(self, drive: _Drive) -> None:
        error: BaseException | None = None
        try:
            # one lost or stopped before it began is left as stored
            if not (drive.lost or self.stopping) and not (
                drive.resumed and self._park_if_waiting(drive)
            ):
                if drive.custom and cancelled_before_run(self.registry, drive):
                    drive.cancelling = True
                while True:
                    if drive.cancelling and not drive.lost:
                        drive.parking = False
                        self._stop_for_cancel(drive)
                        drive.cancelling = False
                    try:
                        drive.engine.run()
                    except logbook.CancelSeen:  # before a step: none runs
                        drive.cancelling = True
                    if not drive.cancelling or drive.lost or self.stopping:
                        break
        except logbook.FlowFenced as exc:  # another runner holds it now
            drive.lost = True
            LOG.warning("%s", exc)
        except BaseException as exc:  # the flow's own error, after its revert
            error = exc
        finally:
            with self._lock:
                self._drives.pop(drive.flow_id, None)
                self._recording.add(drive.flow_id)
        try:
            self.through_outage(lambda: self._after_run(drive, error), "record end")
        except Exception as exc:
            self.failures["record end"] += 1
            LOG.error(
                "flow %s: could not record how it ended (%s); it is taken "
                "over once its lease runs out",
                drive.flow_id,
                faults.describe(exc),
            )
        finally:
            try:
                if self.jobs is not None:
                    # settled while still driven: a job claimed meanwhile goes back
                    self.jobs.drive_done(drive.flow_id, settled=drive.settled)
            finally:
                with self._lock:
                    self._recording.discard(drive.flow_id)

    def through_outage(
        self,
        call: Callable[[], Any],
        what: str,
        seconds: float = RECORD_RETRY_SECONDS,
    ) -> Any:
        """``call()``, made again while it fails on an outage (the database
        unreachable) for up to ``seconds``, or until the runner stops."""

        def retry(state: tenacity.RetryCallState) -> bool:
            outcome = state.outcome
            if outcome is None or not outcome.failed:
                return False
            exc = outcome.exception()
            if exc is None or not faults.is_outage(exc):
                return False
            if state.attempt_number == 1:
                LOG.warning(
                    "%s: waiting for the database: %s", what, faults.describe(exc)
                )
            return True

        retrying = tenacity.Retrying(
            retry=retry,
            stop=tenacity.stop_after_delay(seconds)
            | tenacity.stop_when_event_set(self._stopping),
            wait=tenacity.wait_exponential(multiplier=0.5, max=5.0),
            reraise=True,
        )
        return retrying(call)

    def _park_if_waiting(self, drive: _Drive) -> bool:
        """Park a resumed flow that is at its waiting step with nothing to do.

        A flow with several waits reached (parallel branches of a custom
        flow) runs on if one of them may go on, and parks on one that may
        not otherwise.
        """
        drive.engine.compile()
        drive.engine.prepare()
        storage = drive.engine.storage
        found: dict[str, Any] | None = None
        for name, wait_atom in drive.park_after.items():
            if storage.get_atom_state(name) != tf_states.SUCCESS:
                continue
            wait_state = storage.get_atom_state(wait_atom.name)
            if wait_state not in WAIT_NOT_DONE:
                if drive.custom and wait_state == tf_states.SUCCESS:
                    continue  # a wait it is past; another may be pending
                return False  # past its wait, or reverting: run on
            waiting = self._waiting_at(drive, wait_atom)
            row = still_waiting(self.services, waiting)
            if row is None:
                return False  # it ended meanwhile: run on
            waiting["server_id"] = row.server_id
            found = found or waiting
            if not drive.custom:
                break
        if found is None:
            return False
        drive.waiting = found
        drive.parking = True
        return True

    def _stop_for_cancel(self, drive: _Drive) -> None:
        """Make a cancelled flow revert when it runs next.

        TaskFlow reverts a flow it finds with a failed step: the first step
        not yet run whose inputs are all there (its wait, for a parked
        flow) is recorded as failed with :class:`FlowCancelled`.
        """
        engine = drive.engine
        engine.compile()
        engine.prepare()
        storage = engine.storage
        note = self.registry.cancel_note(drive.flow_id) or "cancelled"
        error = FlowCancelled(drive.flow_id, f"flow {drive.flow_id}: {note}")
        waits = list(drive.park_after.values())
        others = [
            node
            for node in engine.compilation.execution_graph.topological_sort()
            if isinstance(node, tf_atom.Atom) and node not in waits
        ]
        for atom in [*waits, *others]:
            if storage.get_atom_state(atom.name) != tf_states.PENDING:
                continue
            if getattr(atom, "parks", False) and not any(
                before
                for before, after in drive.park_after.items()
                if after is atom and storage.get_atom_state(before) == tf_states.SUCCESS
            ):
                continue
            try:
                storage.fetch_mapped_args(
                    atom.rebind, atom_name=atom.name, optional_args=atom.optional
                )
            except Exception as exc:  # an input is missing: not this one
                LOG.debug(
                    "flow %s: %s cannot fail yet: %s", drive.flow_id, atom.name, exc
                )
                continue
            storage.save(
                atom.name,
                tf_failure.Failure.from_exception(error),
                state=tf_states.FAILURE,
            )
            LOG.info(
                "flow %s: cancelled before %s; reverting", drive.flow_id, atom.name
            )
            return
        LOG.info("flow %s: cancelled after its last step", drive.flow_id)

    def _after_run(self, drive: _Drive, error: BaseException | None) -> None:
        flow_id = drive.flow_id
        if drive.parking and error is None and not drive.lost:
            state = drive.engine.storage.get_flow_state()
            if state in (tf_states.SUSPENDED, tf_states.RUNNING, tf_states.PENDING):
                waiting = drive.waiting or self._waiting(drive)
                if self.registry.park(
                    flow_id,
                    self.owner,
                    waiting,
                    deployment_id=waiting["deployment_id"] if drive.custom else None,
                    server_id=waiting.get("server_id") if drive.custom else None,
                ):
                    drive.settled = True
                    LOG.debug("flow %s parked", flow_id)
                    if drive.custom and self.registry.cancel_requested(flow_id):
                        end_wait(
                            self.services, waiting, self.registry.cancel_note(flow_id)
                        )
                        self.watcher.wake_soon(flow_id)
                    elif drive.resumed or not still_waiting(self.services, waiting):
                        self.watcher.wake_soon(flow_id)
                else:
                    LOG.warning("flow %s: not parked: its row is another's", flow_id)
                return
        state = drive.engine.storage.get_flow_state()
        if drive.lost:
            # another owner drives it now, from the logbook: its row and its
            # logbook are that owner's, even if this run reached the end
            # (the last step finished as the loss was noticed)
            LOG.warning(
                "flow %s: lease lost, left to its new owner (stopped %s here)",
                flow_id,
                state,
            )
            return
        if state in (tf_states.SUCCESS, tf_states.REVERTED):
            removed = state == tf_states.REVERTED and after_revert(
                self.services, drive, error
            )
            # the end is the drive's last write, fenced as the others: its
            # SUCCESS was held for it (logbook.Fenced.may_hold_flow)
            outcome = self._outcome(drive, state, error) if drive.custom else None
            if removed and error is not None and kind_of(drive) == "deploy":
                # a new deployment whose creation reverted leaves no row:
                # why it failed is kept for a waiter in another process
                outcome = kept_failure(error)
            if not self._record_end(flow_id, outcome):
                drive.lost = True
                return
            drive.settled = True
            self._finish(flow_id, error)
        elif state == tf_states.FAILURE:
            # a revert failed: keep the logbook for an operator
            note = f"revert failed: {type(error).__name__}: {error}"
            # its deployment ends first: a waiter sees the flow BROKEN only
            # once its deployment says so
            end_left_running(
                self.services, drive, signals.flow_broken_outcome(flow_id, note)
            )
            self.registry.break_flow(flow_id, note)
            LOG.error("flow %s is BROKEN: %s", flow_id, note)
            self._finish(flow_id, error or exceptions.FlowError(None, note))
        else:  # suspended by close(), or stopped by an error of storage
            # an outage is nobody's fault: it is not counted against the flow
            failed = error is not None and not faults.is_outage(error)
            self.registry.release(flow_id, self.owner, failed=failed)
            if error is not None:
                LOG.error("flow %s stopped: %s", flow_id, faults.describe(error))

    def _waiting(self, drive: _Drive) -> dict[str, Any]:
        """What a parked flow waits for, from its stored values: the first
        wait reached whose step has not run (a custom flow may have passed
        others)."""
        storage = drive.engine.storage
        reached = [
            atom
            for name, atom in drive.park_after.items()
            if storage.get_atom_state(name) == tf_states.SUCCESS
        ]
        pending = [
            a for a in reached if storage.get_atom_state(a.name) in WAIT_NOT_DONE
        ]
        for atom in pending or reached:
            waiting = self._waiting_at(drive, atom)
            if drive.custom:
                with contextlib.suppress(exceptions.DeploymentNotFound):
                    found = self.services.store.get_deployment(waiting["deployment_id"])
                    waiting["server_id"] = found.server_id
            return waiting
        raise exceptions.FlowError(None, f"flow {drive.flow_id} is not at a wait")

    def _waiting_at(self, drive: _Drive, atom: Any) -> dict[str, Any]:
        return waiting_of(self.services, drive.engine, atom)

    def _outcome(
        self, drive: _Drive, state: str, error: BaseException | None
    ) -> dict[str, Any]:
        """A custom flow's outcome, to keep in its logbook's meta."""
        storage = drive.engine.storage
        values: dict[str, Any] = {}
        if state == tf_states.SUCCESS:
            for key, value in storage.fetch_all().items():
                if "." in key or key in PRIVATE_VALUES:
                    continue
                try:
                    values[key] = json.loads(json.dumps(value))
                except (TypeError, ValueError):
                    LOG.debug("flow %s: %s is not JSON, not kept", drive.flow_id, key)
        return {
            "state": state,
            "result": values,
            "error": None if error is None else f"{type(error).__name__}: {error}",
            "ended_at": time.time(),
        }

    def request_cancel(self, flow_id: str, reason: str | None = None) -> bool:
        """Cancel custom flow ``flow_id``: stop it, end its wait, revert it.

        The request is written to its row, so whichever runner drives it
        sees it at its next step boundary; a parked flow's awaited action is
        ended FAILED (``cancelled``), which wakes it, and so are those a
        running flow awaits in its thread, at its runner's next lease
        renewal.  False when the flow is not unfinished.
        """
        note = f"cancelled: {reason}" if reason else "cancelled"
        if not self.registry.request_cancel(flow_id, note):
            return False
        row = self.registry.get(flow_id)
        if row is not None and row.state == flow_rows.PARKED and row.waiting:
            end_wait(self.services, row.waiting, note)
        self.wake()
        return True


def cancelled_before_run(registry: flow_rows.FlowRegistry, drive: _Drive) -> bool:
    """Whether a custom flow about to run was asked to cancel.  Not read
    when the write of its next step's RUNNING reads it (its logbook stops
    on a cancel) and no step of it was left RUNNING (TaskFlow runs such a
    step again without writing its RUNNING anew)."""
    writes = drive.writes
    if writes is not None and writes.stops_on is not None:
        engine = drive.engine
        engine.compile()
        engine.prepare()
        names = [
            node.name
            for node in engine.compilation.execution_graph
            if isinstance(node, tf_atom.Atom)
        ]
        states = engine.storage.get_atoms_states(names)
        if all(state not in logbook.BUSY_STATES for state, _ in states.values()):
            return False
    return registry.cancel_requested(drive.flow_id)


def cancel_requested(registry: flow_rows.FlowRegistry, drive: _Drive) -> bool:
    """Whether a custom flow was asked to cancel, after a step: as the
    write that recorded the step read the flow's row, else read now."""
    writes = drive.writes
    if writes is not None:
        fresh, note = writes.take_note()
        if fresh:
            return flow_rows.is_cancel_note(note)
        if writes.stops_on is not None:
            return False  # the write of its next step's RUNNING reads it
    return registry.cancel_requested(drive.flow_id)


def end_waits(
    services: Services, registry: flow_rows.FlowRegistry, drive: _Drive
) -> None:
    """End the actions a running cancelled flow awaits in its thread
    (waits reached at once in parallel branches), so that it reaches
    its next step boundary without waiting for them."""
    storage = drive.engine.storage
    note = registry.cancel_note(drive.flow_id)
    for name, wait_atom in drive.park_after.items():
        if (
            storage.get_atom_state(name) != tf_states.SUCCESS
            or storage.get_atom_state(wait_atom.name) not in WAIT_NOT_DONE
        ):
            continue
        try:
            end_wait(services, waiting_of(services, drive.engine, wait_atom), note)
        except Exception:
            LOG.warning(
                "flow %s: could not end the wait of %s",
                drive.flow_id,
                wait_atom.name,
                exc_info=True,
            )


def write_fence(
    registry: flow_rows.FlowRegistry, owner: str, drive: _Drive
) -> Callable[[], None]:
    """The check a step of ``drive`` makes right before it writes outside
    the database (:meth:`Services.check_fence`): under a conductor, that
    the job's claim is still its own; always, that the flow's row still
    names ``owner``.  The step may have been paused past its claim since
    it started: what it would write was decided before, and the flow's new
    owner may have written newer since."""

    def fence() -> None:
        if drive.fence is not None:
            drive.fence(drive)  # ClaimLost once the claim is another's
        holder = registry.holder(drive.flow_id)
        if holder != owner:
            drive.lost = True
            raise logbook.FlowFenced(drive.flow_id, owner, holder)

    return fence


def suspend(drive: _Drive) -> bool:
    """Ask a drive's engine to stop before its next step; whether it was asked.

    It waits for the step running to end (TaskFlow runs a step holding its
    storage's lock): for ``close()``, not for a heartbeat.  Never raises
    for the two ways it can fail: the engine's logbook is another runner's
    now (:class:`~swflows.persistence.logbook.FlowFenced`: the engine stops
    anyway, at its next write, which the fence refuses), or the engine has
    not started yet (TaskFlow's ``InvalidState``: the drive does not run
    once it sees ``lost`` or the runner stopping).  So a ``close()`` that
    stops many flows stops them all.
    """
    try:
        drive.engine.suspend()
    except logbook.FlowFenced as exc:
        LOG.debug("flow %s: not suspended: %s", drive.flow_id, exc)
        return False
    except tf_exc.InvalidState as exc:
        LOG.debug("flow %s: not suspended (not started): %s", drive.flow_id, exc)
        return False
    return True


def parks_after(flow: Any) -> dict[str, Any]:
    """The atoms after which ``flow`` parks (by name): those right before a
    waiting step (a task whose ``parks`` is true), with that step; in
    nested flows too."""
    found = {}
    for before, after, _ in flow.iter_links():
        if getattr(after, "parks", False) and not hasattr(before, "iter_links"):
            found[before.name] = after
    for node, _ in flow.iter_nodes():
        if hasattr(node, "iter_links"):
            found.update(parks_after(node))
    return found


def row_writers(flow: Any) -> frozenset[str]:
    """The names of ``flow``'s tasks that write their deployment's row
    (``writes_row``), in nested flows too."""
    found: set[str] = set()
    for node, _ in flow.iter_nodes():
        if hasattr(node, "iter_links"):
            found |= row_writers(node)
        elif getattr(node, "writes_row", False):
            found.add(node.name)
    return frozenset(found)


def still_waiting(services: Services, waiting: dict[str, Any]) -> Deployment | None:
    """The row of the action a flow waits for (``waiting``), or None once
    it ended: removed, ended, or another action of it begun.

    A flow resumed at its wait runs on when it is None.  A flow that has
    just parked asks for a look at once only then (a pushed signal, a
    cancel or a timeout recorded before the park), or when it was resumed
    (its signal may have waited since its last owner stopped); a new
    flow's signal still in its store is read by the next poll, as every
    waiting one's is (a look per park cost a burst of launches a listing
    each 0.1 s)."""
    try:
        row = services.store.get_deployment(waiting["deployment_id"])
    except exceptions.DeploymentNotFound:
        return None
    if row.is_terminal or row.generation != int(waiting["generation"]):
        return None
    return row


def after_revert(
    services: Services, drive: _Drive, error: BaseException | None
) -> bool:
    """What follows a flow's revert, before its row goes: its deployment
    is never left IN_PROGRESS with nothing to end it, and a new one the
    revert removed lets go of its trust.  Whether that deployment is gone
    (False for a flow of no deployment)."""
    why = faults.describe(error) if error is not None else "cancelled"
    LOG.warning("flow %s reverted: %s", drive.flow_id, why)
    if not drive.deployment_id:
        return False
    end_left_running(
        services,
        drive,
        signals.orphaned_outcome(
            f"flow {drive.flow_id} reverted without ending it: {why}"
        ),
    )
    return let_go_of_removed(services, drive.deployment_id)


def let_go_of_removed(services: Services, deployment_id: str) -> bool:
    """After a revert removed a new deployment: its owner row and its
    trust, which the revert's last steps still needed, go too.  What
    fails here is left to the sweeper (:mod:`swflows.engine.sweeper`).
    Whether the deployment is gone."""
    store = services.store
    try:
        store.get_deployment(deployment_id)
        return False  # it stays (an action on it reverted, not its creation)
    except exceptions.DeploymentNotFound:
        pass
    try:
        trusts.let_go(services, projects.DEPLOYMENT, deployment_id)
    except Exception as exc:
        LOG.warning(
            "deployment %s: its trust is left to the sweeper: %s",
            deployment_id,
            faults.describe(exc),
        )
    return True


def kind_of(drive: _Drive) -> str | None:
    """The kind of flow a drive runs (``deploy``, ``undeploy``...), as
    its logbook's detail says."""
    meta = drive.engine.storage.flow_meta.get(flow_rows.META_KEY) or {}
    kind = meta.get("kind")
    return None if kind is None else str(kind)


def kept_failure(error: BaseException) -> dict[str, Any]:
    """What the store keeps of a flow that reverted the creation of its
    deployment, in place of its logbook's steps (see
    :meth:`~swflows.engine.results.Results.kept_error`)."""
    return {
        "state": tf_states.REVERTED,
        "error": faults.describe(error),
        "ended_at": time.time(),
    }


def end_left_running(
    services: Services, drive: _Drive, outcome: signals.Outcome
) -> None:
    """End FAILED the action a flow that is over left IN_PROGRESS (a
    revert that could not write its row), and withdraw it from its
    server's metadata.  A custom flow's deployments, and an action of
    another generation, are not this flow's to end."""
    if drive.custom or not drive.deployment_id:
        return
    try:
        generation = int(drive.engine.storage.fetch("generation"))
    except Exception:
        return  # an undeploy with no action of its own
    try:
        row = services.store.get_deployment(drive.deployment_id)
    except exceptions.DeploymentNotFound:
        return
    if row.status != states.IN_PROGRESS or row.generation != generation:
        return
    if outcomes.record_outcome(services, row.id, generation, outcome):
        LOG.warning("deployment %s: %s", row.id, outcome.status_reason)
        metadata.withdraw_cancelled(services, row.id)


def end_wait(services: Services, waiting: dict[str, Any], note: str | None) -> None:
    """End a parked flow's awaited action FAILED, kind ``cancelled``."""
    from swflows import outcomes as signal_tasks
    from swflows import signals

    signal_tasks.record_outcome(
        services,
        str(waiting["deployment_id"]),
        int(waiting["generation"]),
        signals.cancelled_outcome(note),
    )


__all__ = [
    "FENCED_STATES",
    "PRIVATE_VALUES",
    "RECORD_RETRY_SECONDS",
    "WAIT_NOT_DONE",
    "Claim",
    "Driving",
    "cancel_requested",
    "end_left_running",
    "end_wait",
    "let_go_of_removed",
    "parks_after",
    "suspend",
    "write_fence",
]
