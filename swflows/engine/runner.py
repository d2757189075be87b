"""The runner: drives flows with persistence, parks them, resumes them.

Each flow gets its own logbook, holding the factory's dotted name, its JSON
arguments, the flow's version and the deployment it serves, so any process
can rebuild the flow later.  The run-time services are injected as a
transient value and never written to the logbook.  A finished flow's
logbook and row are removed: the deployment row is the lasting record.

A row in the flows table (:mod:`swflows.persistence.flows`) is written
before the logbook and names the runner holding the flow, under a lease
the runner renews.  When a flow reaches a step that waits for its server
(:attr:`~swflows.tasks.base.Task.parks`), the engine is suspended and the
flow *parked*: no thread waits for it.  The :class:`~swflows.engine.watcher.
Watcher` resumes it when its signal lands, it times out or it is cancelled.

After a crash, a runner (the same one restarted, or another) finds the
flows whose runner is gone and resumes them from their logbooks: steps that
ended are not run again, the one that was running is run again (every task
is idempotent), and a flow that was waiting stays parked.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from taskflow import engines
from taskflow import states as tf_states
from taskflow.persistence import models
from taskflow.types import notifier

from swflows import exceptions, flows
from swflows.persistence import flows as flow_rows
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
#: states of a waiting step that has not ended: a flow resumed with its wait
#: in another state is past it or reverting, and is never parked again
WAIT_NOT_DONE = frozenset({tf_states.PENDING, tf_states.RUNNING})
#: how many ended flows' outcomes a runner keeps for a wait() that comes late
FINISHED_KEPT = 1024


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


class Runner:
    """Runs, parks and resumes flows for one :class:`Services`.

    ``start()`` begins the signal watcher and lease renewal, and (with
    ``[runner] resume_on_start``) resumes the flows interrupted by a crash.
    """

    def __init__(self, services: Services, *, workers: int | None = None) -> None:
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
        from swflows.engine.watcher import Watcher

        self.watcher = Watcher(self)

    # -- lifecycle --------------------------------------------------------
    def start(self) -> None:
        """Start the watcher and lease renewal; resume interrupted flows."""
        if self._threads:
            return
        if self.conf.runner.resume_on_start:
            self.resume_interrupted()
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

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def wake(self) -> None:
        """Have the watcher look at parked flows now (a signal was pushed)."""
        self.watcher.wake()

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
        self.registry.add(
            flow_id,
            kind=kind,
            deployment_id=deployment_id,
            server_id=str(inputs.get("server_id") or ""),
            owner=self.owner,
            lease_until=time.time() + self.lease_seconds,
        )
        try:
            # one logbook per flow, sharing the flow's id, so it is found by it
            book = models.LogBook(f"swflows-{kind}-{deployment_id}", uuid=flow_id)
            detail = models.FlowDetail(flow.name, uuid=flow_id)
            book.add(detail)
            engines.save_factory_details(detail, factory, [], plan)
            detail.meta[META_KEY] = {
                "kind": kind,
                "version": flows.VERSIONS[kind],
                "deployment_id": deployment_id,
            }
            with self._connection() as conn:
                conn.save_logbook(book)
            engine = engines.load(
                flow, store=inputs, flow_detail=detail, book=book, backend=self.backend
            )
        except BaseException:
            self.registry.remove(flow_id)
            raise
        future = self._future(flow_id)
        self._submit(flow_id, engine, flow)
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
        self, flow_id: str, engine: Any, flow: Any, *, resumed: bool = False
    ) -> None:
        engine.storage.inject({SERVICES_KEY: self.services}, transient=True)
        drive = _Drive(flow_id, engine, parks_after(flow))
        drive.resumed = resumed
        engine.atom_notifier.register(notifier.Notifier.ANY, self._on_atom(drive))
        with self._lock:
            self._drives[flow_id] = drive
        try:
            self._executor.submit(self._drive, drive)
        except RuntimeError:  # shutting down: leave it for the next runner
            with self._lock:
                self._drives.pop(flow_id, None)
            self.registry.release(flow_id, self.owner)

    def _on_atom(self, drive: _Drive) -> Any:
        def callback(state: str, details: dict[str, Any]) -> None:
            if (
                state == tf_states.SUCCESS
                and details.get("task_name") in drive.park_after
            ):
                drive.parking = True
                drive.engine.suspend()

        return callback

    def _drive(self, drive: _Drive) -> None:
        error: BaseException | None = None
        try:
            if not (drive.resumed and self._park_if_waiting(drive)):
                drive.engine.run()
        except BaseException as exc:  # the flow's own error, after its revert
            error = exc
        finally:
            with self._lock:
                self._drives.pop(drive.flow_id, None)
        try:
            self._after_run(drive, error)
        except Exception:
            LOG.exception("flow %s: could not record how it ended", drive.flow_id)

    def _park_if_waiting(self, drive: _Drive) -> bool:
        """Park a resumed flow that is at its waiting step with nothing to do."""
        drive.engine.compile()
        drive.engine.prepare()
        storage = drive.engine.storage
        for name, wait_atom in drive.park_after.items():
            if storage.get_atom_state(name) != tf_states.SUCCESS:
                continue
            if storage.get_atom_state(wait_atom.name) not in WAIT_NOT_DONE:
                return False  # past its wait, or reverting: run on
            waiting = self._waiting(drive)
            drive.waiting = waiting
            try:
                status = self.services.store.get_deployment(waiting["deployment_id"])
            except exceptions.DeploymentNotFound:
                return False
            if status.is_terminal or status.generation != waiting["generation"]:
                return False  # it ended meanwhile: run on
            drive.parking = True
            return True
        return False

    def _after_run(self, drive: _Drive, error: BaseException | None) -> None:
        flow_id = drive.flow_id
        if drive.parking and error is None and not drive.lost:
            state = drive.engine.storage.get_flow_state()
            if state in (tf_states.SUSPENDED, tf_states.RUNNING, tf_states.PENDING):
                waiting = drive.waiting or self._waiting(drive)
                if self.registry.park(flow_id, self.owner, waiting):
                    LOG.debug("flow %s parked", flow_id)
                    self.watcher.wake()
                return
        state = drive.engine.storage.get_flow_state()
        if state in (tf_states.SUCCESS, tf_states.REVERTED):
            self._forget(flow_id)
            self._finish(flow_id, error)
        elif state == tf_states.FAILURE:
            # a revert failed: keep the logbook for an operator
            note = f"revert failed: {type(error).__name__}: {error}"
            self.registry.break_flow(flow_id, note)
            self._finish(flow_id, error or exceptions.FlowError(None, note))
        elif drive.lost:
            LOG.warning("flow %s: lease lost, left to its new owner", flow_id)
        else:  # suspended by close(), or stopped by an error of storage
            self.registry.release(flow_id, self.owner)
            if error is not None:
                LOG.error("flow %s stopped: %s", flow_id, error)

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
        """What a parked flow waits for, from its stored values."""
        from swflows.engine import watcher

        storage = drive.engine.storage
        for name, atom in drive.park_after.items():
            if storage.get_atom_state(name) == tf_states.SUCCESS:
                return watcher.waiting_of(self.services, drive.engine, atom)
        raise exceptions.FlowError(None, f"flow {drive.flow_id} is not at a wait")

    def _forget(self, flow_id: str) -> None:
        with self._connection() as conn:
            try:
                conn.destroy_logbook(flow_id)
            except Exception:  # already gone is fine; anything else is logged
                LOG.debug("logbook %s not removed", flow_id, exc_info=True)
        self.registry.remove(flow_id)

    # -- resuming ---------------------------------------------------------
    def resume_parked(self, flow_id: str) -> bool:
        """Claim a parked flow and run it on; False if another runner has it."""
        if self.stopping:
            return False
        if not self.registry.claim(
            flow_id,
            self.owner,
            lease_until=time.time() + self.lease_seconds,
            now=time.time(),
            from_states=(flow_rows.PARKED,),
        ):
            return False
        return self._load_and_submit(flow_id)

    def interrupted(self) -> list[flow_rows.FlowRow]:
        """Flows no live runner drives: their runner died or gave them up,
        or they were set aside as BROKEN (with a note saying why)."""
        now = time.time()
        return [
            row
            for row in self.registry.find(states=[flow_rows.RUNNING, flow_rows.BROKEN])
            if row.state == flow_rows.BROKEN
            or (row.owner != self.owner and self._owner_gone(row, now))
        ]

    @staticmethod
    def _owner_gone(row: flow_rows.FlowRow, now: float) -> bool:
        return row.lease_expired(now) or flow_rows.owner_is_dead(row.owner)

    def resume_interrupted(self, flow_id: str | None = None) -> list[str]:
        """Take over and resume interrupted flows (all, or ``flow_id``).

        Returns the ids resumed.  A BROKEN flow is not resumed; a flow a
        live runner holds is left alone.
        """
        resumed = []
        now = time.time()
        for row in self.registry.find(states=[flow_rows.RUNNING]):
            if flow_id is not None and row.id != flow_id:
                continue
            if row.owner == self.owner or not self._owner_gone(row, now):
                continue
            if row.takeovers >= MAX_TAKEOVERS:
                note = (
                    f"taken over {row.takeovers} times without finishing: "
                    "its runners keep dying or failing on it"
                )
                self.registry.break_flow(row.id, note)
                LOG.error("flow %s (%s) set aside: %s", row.id, row.kind, note)
                continue
            if not self.registry.claim(
                row.id,
                self.owner,
                lease_until=time.time() + self.lease_seconds,
                now=now,
                from_states=(flow_rows.RUNNING,),
                dead_owner=row.owner if flow_rows.owner_is_dead(row.owner) else None,
            ):
                continue
            LOG.info("flow %s (%s): taken over from %s", row.id, row.kind, row.owner)
            if self._load_and_submit(row.id):
                resumed.append(row.id)
        return resumed

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
            if detail.state == tf_states.FAILURE:
                self.registry.break_flow(flow_id, "a revert failed")
            else:
                self._forget(flow_id)
            self._finish(flow_id, None)
            return False
        meta = detail.meta.get(META_KEY) or {}
        kind = str(meta.get("kind"))
        if kind not in flows.VERSIONS or meta.get("version") != flows.VERSIONS[kind]:
            note = (
                f"stored flow {kind!r} version {meta.get('version')!r} does not "
                f"match this version of swflows ({flows.VERSIONS.get(kind)!r})"
            )
            self.registry.break_flow(flow_id, note)
            self._finish(flow_id, exceptions.FlowError(None, note))
            return False
        flow = engines.flow_from_detail(detail)
        engine = engines.load(flow, flow_detail=detail, backend=self.backend)
        self._future(flow_id)
        self._submit(flow_id, engine, flow, resumed=True)
        return True

    # -- leases -----------------------------------------------------------
    def _renew_forever(self) -> None:
        interval = self.lease_seconds / 3
        while not self._stopping.wait(interval):
            try:
                self.renew_leases()
            except Exception:
                LOG.exception("could not renew flow leases")

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
                raise exceptions.WaitTimeout(row.deployment_id, timeout)

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
    waiting step (a task whose ``parks`` is true), with that step."""
    found = {}
    for before, after, _ in flow.iter_links():
        if getattr(after, "parks", False):
            found[before.name] = after
    return found


__all__ = ["META_KEY", "Runner", "parks_after"]
