"""The runner: drives flows with persistence, parks them, resumes them.

Each flow gets its own logbook, holding the factory's dotted name, its JSON
arguments, the flow's version and the deployment it serves, so any process
can rebuild the flow later.  The run-time services are injected as a
transient value and never written to the logbook.  A finished flow's
logbook and row are removed: the deployment row is the lasting record.

A row in the flows table (:mod:`swflows.persistence.flow_registry`) is written
before the logbook and names the runner holding the flow, under a lease
the runner renews.  When a flow reaches a step that waits for its server
(:attr:`~swflows.tasks.base.Task.parks`), the engine is suspended and the
flow *parked*: no thread waits for it.  The :class:`~swflows.engine.watcher.
Watcher` resumes it when its signal lands, it times out or it is cancelled.

After a crash, a runner (the same one restarted, or another) finds the
flows whose runner is gone and resumes them from their logbooks: steps that
ended are not run again, the one that was running is run again (every task
is idempotent), and a flow that was waiting stays parked.

A developer's own flow (:meth:`Runner.launch_custom`, kind ``custom``) is
run the same way.  It may hold several waits, on several deployments: its
row names the deployment it awaits now.  It can be cancelled as a whole
(:meth:`Runner.request_cancel`): it is stopped at its next step boundary,
or woken from its wait, and reverted.  Its outcome (the values its steps
provided, or its error) stays in its logbook's meta after it ended, until
:meth:`Runner.forget_result`.

A database outage loses no flow: recording how a flow ended (or that it
parked) is retried while the database is unreachable, for up to
:data:`RECORD_RETRY_SECONDS`; a flow left behind all the same (this
runner's own, whose lease ran out while nothing drove it) is taken over
like a dead runner's.  Resuming one flow never stops the others: a failure
is logged, counted in :attr:`Runner.failures`, and the flow left for a
later try, or set aside as BROKEN once it failed too often.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import functools
import importlib
import json
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Final

import tenacity
from taskflow import atom as tf_atom
from taskflow import engines, storage
from taskflow import states as tf_states
from taskflow.persistence import models
from taskflow.types import failure as tf_failure
from taskflow.types import notifier

from swflows import exceptions, flows
from swflows.engine import faults, jobboard
from swflows.engine.election import Election
from swflows.flows import compose
from swflows.persistence import flow_registry as flow_rows
from swflows.services import SERVICES_KEY, Services

LOG = logging.getLogger(__name__)

#: the logbook meta key holding swflows' own description of a flow
META_KEY = "swflows"
#: flow states after which a logbook must never be loaded again: loading a
#: REVERTED flow would run all of it anew
TERMINAL_FLOW_STATES = frozenset(
    {tf_states.SUCCESS, tf_states.REVERTED, tf_states.FAILURE}
)


#: a flow taken over this many times is set aside as BROKEN, not resumed
#: again: something in it kills or stops every runner that drives it
MAX_TAKEOVERS = 5
#: the atom holding the inputs a flow was launched with, in its logbook
INJECTOR: Final = storage.Storage.injector_name
#: states of a waiting step that has not ended: a flow resumed with its wait
#: in another state is past it or reverting, and is never parked again
WAIT_NOT_DONE = frozenset({tf_states.PENDING, tf_states.RUNNING})
#: atom states a conductor's runner enters only while it holds the claim
FENCED_STATES = frozenset({tf_states.RUNNING, tf_states.REVERTING})
#: how many ended flows' outcomes a runner keeps for a wait() that comes late
FINISHED_KEPT = 1024
#: how long recording a flow's end (or its parking) is retried while the
#: database is unreachable; past that, the flow is taken over once its
#: lease runs out
RECORD_RETRY_SECONDS = 300.0
#: the flows-table kind of a developer's own flow
CUSTOM = flow_rows.CUSTOM
#: stored values never kept in a custom flow's result
PRIVATE_VALUES = frozenset(
    {SERVICES_KEY, compose.FLOW_ID_KEY, "signal_store", "stack_user"}
)


class FlowCancelled(exceptions.FlowError):
    """A custom flow was cancelled: it was stopped and reverted."""


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
        #: called before each step (under a conductor: raises
        #: :class:`~swflows.engine.conductor.ClaimLost` once the job's
        #: claim is another's)
        self.fence: Callable[[_Drive], None] | None = None


class Runner:
    """Runs, parks and resumes flows for one :class:`Services`.

    ``start()`` begins the signal watcher and lease renewal, and (with
    ``[runner] resume_on_start``) resumes the flows interrupted by a crash.
    With ``[coordination] backend_url``, the runners sharing the database
    elect the one whose watcher looks at parked flows (:attr:`election`);
    the others' watchers stand by.
    """

    def __init__(
        self,
        services: Services,
        *,
        workers: int | None = None,
        jobs: jobboard.Jobs | None = None,
    ) -> None:
        self.services = services
        self.conf = services.conf
        self.backend = services.store.taskflow_backend()
        self.registry = flow_rows.FlowRegistry(services.store)
        self.owner = flow_rows.new_owner(uuid.uuid4().hex[:12])
        self.lease_seconds = float(self.conf.runner.lease_seconds)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers or int(self.conf.runner.workers),
            thread_name_prefix="swflows-runner",
        )
        self._lock = threading.Lock()
        self._drives: dict[str, _Drive] = {}
        self._futures: dict[str, concurrent.futures.Future[str]] = {}
        self._finished: collections.OrderedDict[str, concurrent.futures.Future[str]] = (
            collections.OrderedDict()
        )
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        #: flows whose end is being recorded (not to be taken over meanwhile)
        self._recording: set[str] = set()
        #: failures contained, by step (``record end``, ``resume``...)
        self.failures: collections.Counter[str] = collections.Counter()
        from swflows.engine.watcher import Watcher

        self.watcher = Watcher(self)
        #: the watcher's election among the runners sharing the database
        #: (None: no ``[coordination] backend_url``, this watcher watches)
        self.election: Election | None = None
        backend_url = self.conf.coordination.backend_url
        if not backend_url and self.conf.jobboard.enabled:
            # conductors and posters elect their one watcher on the board's server
            backend_url = jobboard.election_url(self.conf.jobboard.backend_url)
        if backend_url:
            self.election = Election(
                backend_url,
                self.watcher.role(),
                member_id=self.owner,
                timeout=int(self.conf.coordination.leader_timeout),
                on_elected=self.watcher.wake,
                on_revoked=self.watcher.wake,
            )
        #: with ``[jobboard] enabled``: flows are posted as jobs for
        #: conductors, not driven here (unless this is a conductor's runner)
        self.jobs = jobs
        if jobs is None and self.conf.jobboard.enabled:
            board = jobboard.Board.from_conf(self.conf).connect()
            self.jobs = jobboard.Jobs(self, board)

    # -- lifecycle --------------------------------------------------------
    def start(self) -> None:
        """Start the watcher and lease renewal; resume interrupted flows."""
        if self._threads:
            return
        if self.conf.runner.resume_on_start:
            self.resume_interrupted()
        if self.election is not None:
            self.election.start()
        for target, name in (
            (self.watcher.run_forever, "swflows-watcher"),
            (self._renew_forever, "swflows-leases"),
        ):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def close(self) -> None:
        """Stop: running flows are suspended and released for any runner."""
        self._stopping.set()
        self.watcher.wake()
        with self._lock:
            drives = list(self._drives.values())
        for drive in drives:
            drive.engine.suspend()
        self._executor.shutdown(wait=True)
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads.clear()
        if self.election is not None:
            self.election.stop()  # a standby watches from its next tick
        if self.jobs is not None:
            self.jobs.close_board()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def wake(self) -> None:
        """Have the watcher look at parked flows now (a signal was pushed)."""
        self.watcher.wake()

    def resume_ended(self, deployment_id: str) -> None:
        """Resume at once, on the runner's threads, the parked flows of a
        deployment whose action just ended (a signal pushed through the API,
        a cancel), rather than at the watcher's next look.

        Nothing is waited for and nothing is raised: the watcher, woken
        too, resumes whatever this could not.
        """
        self.watcher.wake()
        self.offload(functools.partial(self._resume_ended, deployment_id))

    def offload(self, job: Callable[[], object]) -> bool:
        """Queue ``job`` on the runner's worker threads; False if they are
        shut down.  It waits there behind the flows being driven."""
        if self.stopping:
            return False
        try:
            self._executor.submit(job)
        except RuntimeError:
            return False
        return True

    def _resume_ended(self, deployment_id: str) -> None:
        from swflows.engine.watcher import Watcher

        try:
            rows = self.registry.find(
                states=[flow_rows.PARKED], deployment_id=deployment_id
            )
            for row in rows:
                if Watcher.ended(row):
                    self.resume_parked(row.id, dict(row.waiting or {}) or None)
        except Exception as exc:  # the watcher's next look tries again
            self.failures["resume ended"] += 1
            LOG.warning(
                "deployment %s: its flow is left to the watcher: %s",
                deployment_id,
                faults.describe(exc),
            )

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        with contextlib.closing(self.backend.get_connection()) as conn:
            yield conn

    # -- new flows --------------------------------------------------------
    def launch(
        self, kind: str, plan: dict[str, Any], inputs: dict[str, Any]
    ) -> tuple[str, concurrent.futures.Future[str]]:
        """Build flow ``kind``, record it, and start it on the runner's threads.

        The future ends when the flow does (its error if it reverted); a
        parked flow's future ends once the watcher resumed and finished it.
        """
        try:
            factory = flows.FACTORIES[kind]
        except KeyError:
            raise exceptions.FlowError(None, f"unknown flow {kind!r}") from None
        flow = factory(**plan)
        flow_id = str(uuid.uuid4())
        deployment_id = str(inputs["deployment_id"])
        meta = {
            "kind": kind,
            "version": flows.VERSIONS[kind],
            "deployment_id": deployment_id,
        }
        return self._start(
            flow_id,
            flow,
            factory,
            plan,
            inputs,
            meta,
            server_id=str(inputs.get("server_id") or ""),
            book_name=f"swflows-{kind}-{deployment_id}",
        )

    def launch_custom(
        self,
        factory: Any,
        kwargs: dict[str, Any],
        plans: dict[str, dict[str, Any]],
    ) -> tuple[str, concurrent.futures.Future[str]]:
        """Build a developer's flow with ``factory(**kwargs)`` and start it.

        ``factory`` is a module-level callable or its dotted path, checked
        (:func:`factory_path`) before anything is written; ``kwargs`` must
        be JSON; ``plans`` are the signal transports' resolved plans, stored
        with the flow and used to build it (:func:`~swflows.flows.compose.
        planning`).  The flow's store holds only its own id.
        """
        path = factory_path(factory)
        check_json("kwargs", kwargs)
        check_json("plans", plans)
        made = load_factory(path)
        with compose.planning(plans):
            flow = made(**kwargs)
        if not hasattr(flow, "iter_links"):
            raise exceptions.ValidationError(
                "factory", f"{path} returned {type(flow).__name__}, not a flow"
            )
        flow_id = str(uuid.uuid4())
        meta = {"kind": CUSTOM, "factory": path, "plans": plans}
        return self._start(
            flow_id,
            flow,
            made,
            kwargs,
            {compose.FLOW_ID_KEY: flow_id},
            meta,
            server_id="",
            book_name=f"swflows-{CUSTOM}-{flow_id}",
        )

    def _start(
        self,
        flow_id: str,
        flow: Any,
        factory: Any,
        factory_kwargs: dict[str, Any],
        inputs: dict[str, Any],
        meta: dict[str, Any],
        *,
        server_id: str,
        book_name: str,
    ) -> tuple[str, concurrent.futures.Future[str]]:
        kind = str(meta["kind"])
        self.registry.add(
            flow_id,
            kind=kind,
            deployment_id=str(meta.get("deployment_id") or ""),
            server_id=server_id,
            owner=None if self.jobs is not None else self.owner,
            lease_until=self.jobs.deadline()
            if self.jobs is not None
            else time.time() + self.lease_seconds,
        )
        try:
            # one logbook per flow, sharing the flow's id, so it is found by it
            book = models.LogBook(book_name, uuid=flow_id)
            if kind == CUSTOM:  # its outcome joins this once it ended
                book.meta = {META_KEY: {"kind": kind, "factory": meta["factory"]}}
            detail = models.FlowDetail(flow.name, uuid=flow_id)
            book.add(detail)
            engines.save_factory_details(detail, factory, [], factory_kwargs)
            detail.meta[META_KEY] = meta
            with self._connection() as conn:
                conn.save_logbook(book)
            engine = engines.load(
                flow, store=inputs, flow_detail=detail, book=book, backend=self.backend
            )
            if self.jobs is not None:  # a conductor drives it
                self.jobs.post(flow_id)
        except BaseException:
            self.registry.remove(flow_id)
            with contextlib.suppress(Exception), self._connection() as conn:
                conn.destroy_logbook(flow_id)
            raise
        if self.jobs is not None:
            return flow_id, concurrent.futures.Future()
        future = self._future(flow_id)
        self._submit(flow_id, engine, flow, custom=kind == CUSTOM)
        return flow_id, future

    # -- driving ----------------------------------------------------------
    def _future(self, flow_id: str) -> concurrent.futures.Future[str]:
        with self._lock:
            future = self._futures.get(flow_id)
            if future is None or future.done():
                future = concurrent.futures.Future()
                self._futures[flow_id] = future
            return future

    def _submit(
        self,
        flow_id: str,
        engine: Any,
        flow: Any,
        *,
        resumed: bool = False,
        custom: bool = False,
    ) -> None:
        engine.storage.inject({SERVICES_KEY: self.services}, transient=True)
        drive = _Drive(flow_id, engine, parks_after(flow))
        drive.resumed = resumed
        drive.custom = custom
        if self.jobs is not None:
            drive.fence = self.jobs.fence_for(flow_id)
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
            if state != tf_states.SUCCESS:
                return
            if drive.custom and self.registry.cancel_requested(drive.flow_id):
                drive.cancelling = True
                drive.engine.suspend()
            elif details.get("task_name") in drive.park_after:
                drive.parking = True
                drive.engine.suspend()

        return callback

    def _drive(self, drive: _Drive) -> None:
        error: BaseException | None = None
        try:
            if not (drive.resumed and self._park_if_waiting(drive)):
                if drive.custom and self.registry.cancel_requested(drive.flow_id):
                    drive.cancelling = True
                while True:
                    if drive.cancelling and not drive.lost:
                        drive.parking = False
                        self._stop_for_cancel(drive)
                        drive.cancelling = False
                    drive.engine.run()
                    if not drive.cancelling or drive.lost or self.stopping:
                        break
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
            with self._lock:
                self._recording.discard(drive.flow_id)
            if self.jobs is not None:
                self.jobs.drive_done(drive.flow_id)

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
            try:
                status = self.services.store.get_deployment(waiting["deployment_id"])
            except exceptions.DeploymentNotFound:
                return False
            if status.is_terminal or status.generation != waiting["generation"]:
                return False  # it ended meanwhile: run on
            waiting["server_id"] = status.server_id
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
                    LOG.debug("flow %s parked", flow_id)
                    if drive.custom and self.registry.cancel_requested(flow_id):
                        end_wait(
                            self.services, waiting, self.registry.cancel_note(flow_id)
                        )
                    self.watcher.wake()
                return
        state = drive.engine.storage.get_flow_state()
        if state in (tf_states.SUCCESS, tf_states.REVERTED):
            if drive.custom:
                self._keep_result(drive, state, error)
            self._forget(flow_id, keep_book=drive.custom)
            self._finish(flow_id, error)
        elif state == tf_states.FAILURE:
            # a revert failed: keep the logbook for an operator
            note = f"revert failed: {type(error).__name__}: {error}"
            self.registry.break_flow(flow_id, note)
            self._finish(flow_id, error or exceptions.FlowError(None, note))
        elif drive.lost:
            LOG.warning("flow %s: lease lost, left to its new owner", flow_id)
        else:  # suspended by close(), or stopped by an error of storage
            # an outage is nobody's fault: it is not counted against the flow
            failed = error is not None and not faults.is_outage(error)
            self.registry.release(flow_id, self.owner, failed=failed)
            if error is not None:
                LOG.error("flow %s stopped: %s", flow_id, faults.describe(error))

    def _finish(self, flow_id: str, error: BaseException | None) -> None:
        with self._lock:
            future = self._futures.pop(flow_id, None)
            if future is not None:
                self._finished[flow_id] = future
                while len(self._finished) > FINISHED_KEPT:
                    self._finished.popitem(last=False)
        if future is None or future.done():
            return
        if error is None:
            future.set_result(flow_id)
        else:
            future.set_exception(error)

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
        from swflows.engine import watcher

        return watcher.waiting_of(self.services, drive.engine, atom)

    def _forget(self, flow_id: str, *, keep_book: bool = False) -> None:
        """Remove an ended flow's row and logbook (a custom flow's logbook
        stays, holding its result, without its steps)."""
        with self._connection() as conn:
            try:
                if keep_book:
                    self._drop_steps(flow_id)
                else:
                    conn.destroy_logbook(flow_id)
            except Exception:  # already gone is fine; anything else is logged
                LOG.debug("logbook %s not removed", flow_id, exc_info=True)
        self.registry.remove(flow_id)

    def _drop_steps(self, flow_id: str) -> None:
        """Delete a flow's detail and its atoms' details, not its logbook."""
        tables = self.backend.tables
        with self.backend.engine.begin() as conn:
            conn.execute(
                tables.atomdetails.delete().where(
                    tables.atomdetails.c.parent_uuid == flow_id
                )
            )
            conn.execute(
                tables.flowdetails.delete().where(tables.flowdetails.c.uuid == flow_id)
            )

    def _keep_result(
        self, drive: _Drive, state: str, error: BaseException | None
    ) -> None:
        """Write a custom flow's outcome into its logbook's meta."""
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
        self._save_result(
            drive.flow_id,
            {
                "state": state,
                "result": values,
                "error": None if error is None else f"{type(error).__name__}: {error}",
                "ended_at": time.time(),
            },
        )

    def _save_result(self, flow_id: str, outcome: dict[str, Any]) -> None:
        with self._connection() as conn:
            book = conn.get_logbook(flow_id, lazy=True)
            meta = dict(book.meta or {})
            meta[META_KEY] = {**dict(meta.get(META_KEY) or {}), **outcome}
            book.meta = meta
            conn.save_logbook(book)

    def result_of(self, flow_id: str) -> dict[str, Any] | None:
        """A custom flow's stored outcome (``state``, ``result``, ``error``,
        ``factory``); None while it has none (not ended, or unknown)."""
        try:
            with self._connection() as conn:
                book = conn.get_logbook(flow_id, lazy=True)
        except Exception:
            return None
        meta = dict((book.meta or {}).get(META_KEY) or {})
        if meta.get("kind") != CUSTOM or "state" not in meta:
            return None
        return {
            "id": flow_id,
            "factory": meta.get("factory"),
            "state": meta["state"],
            "result": meta.get("result") or {},
            "error": meta.get("error"),
        }

    def forget_result(self, flow_id: str) -> bool:
        """Remove an ended custom flow's stored outcome; False if none."""
        if self.result_of(flow_id) is None:
            return False
        with self._connection() as conn:
            conn.destroy_logbook(flow_id)
        return True

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
            driven = row.id in self._drives or row.id in self._recording
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

    def _load_and_submit(self, flow_id: str) -> bool:
        """Rebuild a claimed flow from its logbook and drive it."""
        try:
            with self._connection() as conn:
                book = conn.get_logbook(flow_id)
            detail = book.find(flow_id)
        except Exception:  # no logbook: the flow never started
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
                    )
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
        if not any(atom.name == INJECTOR for atom in detail):
            # its runner died between writing the logbook and storing the
            # flow's inputs: the launch did not complete (its caller got no
            # answer) and no step ran, so there is nothing to finish
            LOG.info("flow %s (%s) was never given its inputs: removed", flow_id, kind)
            self._forget(flow_id)
            self._finish(flow_id, None)
            return False
        flow = engines.flow_from_detail(detail)
        engine = engines.load(flow, flow_detail=detail, backend=self.backend)
        self._future(flow_id)
        self._submit(flow_id, engine, flow, resumed=True)
        return True

    def _reverted_by(self, flow_id: str, detail: Any) -> str | None:
        """What made an ended flow revert, as :meth:`_keep_result` words it:
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
        # its id again: a runner may have died before storing it
        engine = engines.load(
            flow,
            store={compose.FLOW_ID_KEY: flow_id},
            flow_detail=detail,
            backend=self.backend,
        )
        self._future(flow_id)
        self._submit(flow_id, engine, flow, resumed=True, custom=True)
        return True

    # -- leases -----------------------------------------------------------
    def _renew_forever(self) -> None:
        interval = self.lease_seconds / 3
        failures = 0
        while not self._stopping.wait(interval):
            try:
                self.renew_leases()
                failures = 0
            except Exception as exc:
                failures += 1
                self.failures["renew leases"] += 1
                LOG.log(
                    logging.ERROR if failures == 1 else logging.DEBUG,
                    "could not renew flow leases (%d in a row): %s",
                    failures,
                    faults.describe(exc),
                )

    def renew_leases(self) -> None:
        """Extend this runner's leases; stop the flows whose lease was lost."""
        with self._lock:
            drives = dict(self._drives)
        if not drives:
            return
        held = self.registry.renew(self.owner, drives, time.time() + self.lease_seconds)
        for flow_id, drive in drives.items():
            if flow_id not in held and not drive.parking:
                # another runner took it over: stop before the next step
                drive.lost = True
                drive.engine.suspend()
        cancelled = self.registry.cancelled_among(
            flow_id
            for flow_id, drive in drives.items()
            if drive.custom and flow_id in held and not drive.parking
        )
        for flow_id in cancelled:
            self._end_waits(drives[flow_id])

    def lose(self, flow_id: str) -> None:
        """Another process owns ``flow_id`` now: stop before its next step."""
        with self._lock:
            drive = self._drives.get(flow_id)
        if drive is not None:
            drive.lost = True
            drive.engine.suspend()

    def _end_waits(self, drive: _Drive) -> None:
        """End the actions a running cancelled flow awaits in its thread
        (waits reached at once in parallel branches), so that it reaches
        its next step boundary without waiting for them."""
        storage = drive.engine.storage
        note = self.registry.cancel_note(drive.flow_id)
        for name, wait_atom in drive.park_after.items():
            if (
                storage.get_atom_state(name) != tf_states.SUCCESS
                or storage.get_atom_state(wait_atom.name) not in WAIT_NOT_DONE
            ):
                continue
            try:
                end_wait(self.services, self._waiting_at(drive, wait_atom), note)
            except Exception:
                LOG.warning(
                    "flow %s: could not end the wait of %s",
                    drive.flow_id,
                    wait_atom.name,
                    exc_info=True,
                )

    # -- waiting ----------------------------------------------------------
    def wait(self, flow_id: str, timeout: float | None = None) -> None:
        """Block until flow ``flow_id`` ended (raising its error, if any).

        A flow finished by another runner is seen by its row going away.
        """
        started = time.monotonic()
        interval = float(self.conf.watcher.poll_interval)
        while True:
            future = self._known_future(flow_id)
            if future is not None:
                try:
                    future.result(interval)
                    return
                except concurrent.futures.TimeoutError:
                    pass
            else:
                time.sleep(interval)
            row = self.registry.get(flow_id)
            if row is None:
                future = self._known_future(flow_id)
                if future is not None:  # ended here: its outcome is being set
                    with contextlib.suppress(concurrent.futures.TimeoutError):
                        future.result(interval)
                return
            if row.state == flow_rows.BROKEN:
                raise exceptions.FlowError(None, f"flow {flow_id}: {row.note}")
            if timeout is not None and time.monotonic() - started >= timeout:
                raise exceptions.WaitTimeout(
                    row.deployment_id,
                    timeout,
                    flow_id=flow_id if row.kind == CUSTOM else None,
                )

    def _known_future(self, flow_id: str) -> concurrent.futures.Future[str] | None:
        """The future of a flow running here, or of one that recently ended."""
        with self._lock:
            return self._futures.get(flow_id) or self._finished.get(flow_id)

    @property
    def driving(self) -> int:
        """How many flows an engine of this runner drives now."""
        with self._lock:
            return len(self._drives)


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


def stored_error(flow_id: str, outcome: dict[str, Any]) -> exceptions.FlowError | None:
    """The error of a custom flow that reverted, rebuilt from its stored
    outcome (:meth:`Runner.result_of`) for a caller the flow did not end
    in; None unless it reverted.  Its own type is kept only for a cancel."""
    if outcome.get("state") != tf_states.REVERTED:
        return None
    text = str(outcome.get("error") or "it was reverted")
    name, _, message = text.partition(": ")
    if name == FlowCancelled.__name__ and message:
        return FlowCancelled(flow_id, message)
    return exceptions.FlowError(flow_id, text)


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


def factory_path(factory: Any) -> str:
    """The dotted path a custom flow's factory is re-imported by.

    Refused (:class:`~swflows.exceptions.ValidationError`) unless that
    path imports this very callable: a lambda, a closure, a method, a
    function of ``__main__`` or one defined inside another is refused now,
    not when the flow resumes in another process.
    """
    if isinstance(factory, str):
        path = factory
        found = load_factory(path)
    else:
        module = getattr(factory, "__module__", None)
        qualname = getattr(factory, "__qualname__", None)
        if not callable(factory) or not module or not qualname:
            raise exceptions.ValidationError(
                "factory", f"{factory!r} is not a module-level function"
            )
        path = f"{module}.{qualname}"
        if module == "__main__":
            raise exceptions.ValidationError(
                "factory",
                f"{path} lives in __main__: another process cannot import it; "
                "move it to a module",
            )
        if "<" in qualname or "." in qualname:
            raise exceptions.ValidationError(
                "factory",
                f"{path} is not a module-level function (a lambda, closure, "
                "method or nested function cannot be re-imported by name)",
            )
        found = load_factory(path)
        if found is not factory:
            raise exceptions.ValidationError(
                "factory", f"{path} imports another object than the one given"
            )
    if not callable(found):
        raise exceptions.ValidationError("factory", f"{path} is not callable")
    return path


def load_factory(path: str) -> Any:
    """The callable at dotted ``path`` (``package.module.function``)."""
    module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute or "<" in path:
        raise exceptions.ValidationError(
            "factory", f"{path!r} is not a dotted path module.function"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise exceptions.ValidationError(
            "factory", f"cannot import {module_name} for {path}: {exc}"
        ) from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise exceptions.ValidationError(
            "factory", f"{module_name} has no {attribute}"
        ) from None


def check_json(field: str, value: Any, where: str = "") -> None:
    """Refuse anything but JSON types (dict with str keys, list, str, int,
    finite float, bool, None): a custom flow's kwargs are stored as JSON
    and must come back as they were given."""
    here = where or field
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise exceptions.ValidationError(field, f"{here} is {value}, not JSON")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            check_json(field, item, f"{here}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise exceptions.ValidationError(
                    field, f"{here} has key {key!r}: JSON keys are strings"
                )
            check_json(field, item, f"{here}.{key}")
        return
    raise exceptions.ValidationError(
        field, f"{here} is a {type(value).__name__}, not JSON"
    )


__all__ = [
    "CUSTOM",
    "META_KEY",
    "FlowCancelled",
    "Runner",
    "check_json",
    "factory_path",
    "load_factory",
    "parks_after",
    "stored_error",
]
