"""The signal watcher: one thread per runner looks after every parked flow.

Each cycle reads the parked flows with their deployments' status in one
query, then asks each signal transport about all its stores at once (for
TEMP_URL_SIGNAL, one container listing per container, and a GET only for an
object whose ETag moved).  A flow may go on when:

- its deployment ended by other means (a signal pushed through the API, a
  cancel, another watcher);
- its final signal landed (recorded here, once: the deployment row's
  compare-and-set lets only the first outcome in);
- its deadline passed (FAILED, kind ``timeout``), or its delivery deadline
  passed with no sign that the server picked it up (FAILED, kind
  ``never_picked_up``);
- Nova deleted its server or reports it in ERROR (FAILED, kind
  ``server_gone``), for servers Nova is known to hold: one server listing
  per project (swflows' own, or a project's through one of its trusts:
  :func:`swflows.enrollment.servers_gone`) at most every
  ``SERVER_CHECK_INTERVAL`` seconds, whatever the number of flows;
- it is a custom flow asked to cancel (FAILED, kind ``cancelled``, if the
  canceller had not ended it yet).

A "started" progress signal, or the server reading its metadata through the
API, counts as picked up.  Every ``sweep_interval`` the watcher also sweeps
what no flow or server needs any more (:mod:`swflows.engine.sweeper`).

With ``[coordination] backend_url`` set, the runners sharing a database
elect one watcher (:mod:`swflows.engine.election`): only the elected one
looks at parked flows and sweeps; the others stand by, and still take over
the flows of runners that died.  A watcher checks that it is still elected
before each cycle and before acting on what it read, so one that lost its
lease (paused, cut from the backend) stops; an outcome is recorded by
compare-and-set and a flow resumed by one runner only, so the rare cycle
two watchers overlap on does nothing twice.

One flow never stops the others: a failure handling one of them is
contained (:mod:`swflows.engine.containment`) and the cycle goes on with
the rest.  The signals one cycle finds are handled at once on the runner's
idle workers (:mod:`swflows.engine.fanout`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import tenacity

from swflows import enrollment, failpoints, signals, states
from swflows import outcomes as signal_tasks
from swflows.engine import faults
from swflows.engine import liveness as loops
from swflows.engine.containment import Containment
from swflows.engine.election import Election
from swflows.engine.pacing import MIN_REST, Pacing
from swflows.engine.reading import SignalReader
from swflows.engine.sweeper import Sweeper
from swflows.persistence import flow_registry as flow_rows
from swflows.services import Services
from swflows.transports.base import SignalRead

LOG = logging.getLogger(__name__)

#: seconds between two looks at Nova for deleted or broken servers
SERVER_CHECK_INTERVAL = 2.0
#: the interval after a cycle that found a signal, as a fraction of the
#: poll interval (idle cycles keep to the poll interval: their cost)
BUSY_INTERVAL = 0.5


def waiting_of(services: Services, engine: Any, atom: Any) -> dict[str, Any]:
    """What a flow parked before ``atom`` waits for: the stored values the
    wait step itself is bound to (a composed flow holding several waits
    keeps each one's under names of its own)."""
    storage = engine.storage
    if getattr(atom, "rebind", None) is not None:
        value = storage.fetch_mapped_args(
            atom.rebind, atom_name=atom.name, optional_args=atom.optional
        ).__getitem__
    else:
        value = storage.fetch
    deployment_id = str(value("deployment_id"))
    generation = int(value("generation"))
    timeout = int(value("timeout"))
    started = float(value("action_started"))
    store = dict(value("signal_store") or {})
    delivery = int(services.conf.delivery_timeout or 0)
    return {
        "transport": atom.transport_name,
        "options": dict(atom.transport_options),
        "store": store,
        "deployment_id": deployment_id,
        "generation": generation,
        "timeout": timeout,
        "deadline": started + timeout,
        "pickup_deadline": started + delivery if 0 < delivery < timeout else None,
        "delivery_timeout": delivery,
        "picked_up": False,
        "seen": None,
    }


class JitteredWait(tenacity.wait.wait_base):
    """A tenacity wait scaled by a random factor in ``1 +- jitter``, so that
    watchers do not poll in lockstep."""

    def __init__(self, wait: tenacity.wait.wait_base, jitter: float) -> None:
        self.wait = wait
        self.jitter = jitter

    def __repr__(self) -> str:
        return f"JitteredWait({self.wait!r}, jitter={self.jitter:g})"

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        return self.scale(self.wait(retry_state), self.jitter)

    @staticmethod
    def scale(seconds: float, jitter: float) -> float:
        return seconds * (1 + random.uniform(-jitter, jitter))


def watcher_role(store: Any) -> str:
    """The election's role name of the watchers of ``store``'s database
    and table prefix (see :meth:`Watcher.role`), named from the store's
    own id, so processes reaching it by different URLs elect together."""
    where = f"{store.installation_id} {store.table_prefix}".encode()
    return f"swflows-watcher-{hashlib.sha256(where).hexdigest()[:16]}"


class Resumer(Protocol):
    """What the watcher needs of the runner that owns it (a
    :class:`swflows.engine.runner.Runner`): its flows, its election, and
    to resume flows on its threads."""

    @property
    def services(self) -> Services: ...

    @property
    def registry(self) -> flow_rows.FlowRegistry: ...

    @property
    def election(self) -> Election | None: ...

    @property
    def lease_seconds(self) -> float: ...

    @property
    def stopping(self) -> bool: ...

    @property
    def liveness(self) -> loops.Liveness: ...

    def resume_parked(
        self, flow_id: str, waiting: dict[str, Any] | None = None
    ) -> bool: ...

    def resume_interrupted(self, flow_id: str | None = None) -> list[str]: ...

    def offload(self, job: Callable[[], object]) -> bool: ...


class Watcher:
    """Checks every parked flow, and resumes those that may go on."""

    def __init__(self, runner: Resumer) -> None:
        self.runner: Resumer = runner
        self.services = runner.services
        self.conf = runner.services.conf.watcher
        #: when the background loop looks next, and at which flows
        self.pacing = Pacing(self.conf)
        self._last_takeover = time.monotonic()
        self._last_server_check = -SERVER_CHECK_INTERVAL
        self.server_check_interval = SERVER_CHECK_INTERVAL
        #: cycles run (full looks), fresh looks, and flows resumed (for
        #: tests and status)
        self.cycles = 0
        self.fresh_looks = 0
        self.resumed = 0
        self.containment = Containment(self.services, runner.registry)
        #: contain a failure: count it, log it once, end what keeps failing
        self.contain = self.containment.contain
        #: failures contained, by step (``check``, ``resume``, ``sweep``...)
        self.failures = self.containment.failures
        self.reader = SignalReader(
            self.services, runner.offload, self.containment.contain
        )
        #: this watcher's loop, and its sweeper's
        self.loop = runner.liveness.loop("watcher", float(self.conf.max_poll_interval))
        self.sweeper = Sweeper(
            self.services,
            runner.registry,
            self.conf,
            self.containment.contain,
            loop=runner.liveness.loop("sweeper", float(self.conf.sweep_interval)),
        )
        #: the last cycle found a signal
        self.busy = False
        #: held by the background loop through each of its cycles
        self._cycling = threading.RLock()

    def wake(self) -> None:
        """Look at every parked flow now: a signal was pushed, a flow
        cancelled."""
        self.pacing.wake()

    def wake_soon(self, flow_id: str | None = None) -> None:
        """Look soon at ``flow_id``, which parked: its signal may be there
        already (:meth:`Pacing.wake_soon`; the flows parking meanwhile share
        that look)."""
        self.pacing.wake_soon(flow_id)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Hold the background loop between two cycles: the cycle under way
        ends, and none starts until the block is left (:meth:`cycle` may be
        called in it).  What the block counts is then its own doing."""
        with self._cycling:
            yield

    def role(self) -> str:
        """The election's role name of the watchers of this database: one
        per database and table prefix, so installations sharing a
        coordination backend each elect their own."""
        return watcher_role(self.services.store)

    @property
    def active(self) -> bool:
        """Whether this watcher looks at parked flows now: always without
        an election, else while its runner leads."""
        election = self.runner.election
        return election is None or election.is_leader

    def stand_by(self) -> None:
        """What a watcher not elected does: take over dead runners' flows
        (every lease's length), then rest until woken or the next look."""
        clock = time.monotonic()
        if (
            self.services.conf.runner.resume_on_start
            and clock - self._last_takeover >= self.runner.lease_seconds
        ):
            self._last_takeover = clock
            try:
                self.runner.resume_interrupted()
            except loops.FATAL:
                raise
            except BaseException as exc:
                self.contain("takeover", exc)
        self._sleep(float(self.conf.poll_interval))

    def run_forever(self) -> None:
        """Cycle until the runner stops; one iteration's error, whatever
        it is, is contained (:mod:`swflows.engine.liveness`)."""
        with self.loop.running_in(lambda: self.runner.stopping):
            while not self.runner.stopping:
                if not self.loop.run(self._iteration):
                    self._sleep(float(self.conf.poll_interval))

    def _iteration(self) -> None:
        """One cycle (tried again with backoff while it fails), or a rest
        on standby."""
        failpoints.hit("watcher.iteration")
        if not self.active:
            self.sweeper.loop.set_idle(True)
            self.pacing.forget_fresh()
            self.stand_by()
            return
        self.sweeper.loop.set_idle(False)
        only = self.pacing.next_look()
        started = time.monotonic()
        # a failed cycle (the parked flows could not be read: the
        # database is out of reach) is tried again with backoff
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(
                lambda exc: not isinstance(exc, loops.FATAL)
            ),
            stop=lambda state: self.runner.stopping,
            wait=self._backoff(),
            sleep=self._sleep,
            after=self._cycle_failed,
            reraise=True,
        )
        try:
            with self._cycling:
                retrying(self._cycle_unless_stopping, only)
        except loops.FATAL:
            raise
        except BaseException:
            if self.runner.stopping:
                return  # it failed as the runner stopped
            raise
        if self.runner.stopping:
            return
        failed = int(retrying.statistics.get("attempt_number", 1)) - 1
        if failed:
            LOG.warning("signal watcher: cycles run again, after %d failed", failed)
        ended = time.monotonic()
        self.pacing.looked(ended)
        if only is not None:
            self._sleep(self.pacing.rest_after_fresh(ended))
            return
        rest = self._delay(0, ended - started)
        self.pacing.full_due = ended + rest
        self._sleep(rest)

    def _cycle_unless_stopping(self, only: frozenset[str] | None) -> None:
        if not self.runner.stopping:
            self.cycle(only)

    def _cycle_failed(self, state: tenacity.RetryCallState) -> None:
        self.failures["cycle"] += 1
        exc = state.outcome.exception() if state.outcome is not None else None
        LOG.log(
            logging.ERROR if state.attempt_number == 1 else logging.DEBUG,
            "signal watcher cycle failed (%d in a row; tried again with backoff): %s",
            state.attempt_number,
            faults.describe(exc) if exc is not None else "?",
        )

    def _sleep(self, seconds: float) -> None:
        self.pacing.sleep(seconds)

    def _backoff(self) -> tenacity.wait.wait_base:
        """After ``n`` failed cycles in a row: ``poll_interval`` times
        ``backoff_multiplier ** n``, at most ``max_poll_interval``, jittered."""
        interval = float(self.conf.poll_interval)
        multiplier = float(self.conf.backoff_multiplier)
        return JitteredWait(
            tenacity.wait_exponential(
                multiplier=interval * multiplier,
                exp_base=multiplier,
                max=float(self.conf.max_poll_interval),
            ),
            float(self.conf.poll_jitter),
        )

    def _delay(self, failures: int, spent: float = 0.0) -> float:
        """Seconds to rest after a cycle that took ``spent``: cycles start
        ``poll_interval`` apart (jittered), so a long cycle does not stretch
        the time a signal waits; the rest is a quarter of the interval at
        least, and backs off after failed cycles.  After a cycle that found
        a signal, the next comes sooner (:data:`BUSY_INTERVAL`): signals
        come in bursts, a stack's servers answering together."""
        interval = float(self.conf.poll_interval)
        if self.busy and not failures:
            interval *= BUSY_INTERVAL
        if failures:
            interval = min(
                interval * float(self.conf.backoff_multiplier) ** failures,
                float(self.conf.max_poll_interval),
            )
        jitter = float(self.conf.poll_jitter)
        interval *= 1 + random.uniform(-jitter, jitter)
        return max(interval - spent, interval * MIN_REST)

    # -- one cycle ----------------------------------------------------------
    def cycle(self, only: frozenset[str] | None = None) -> list[str]:
        """Look once at every parked flow (or, a fresh look, at those of
        ``only`` still parked); the ids of those resumed.

        Only reading the parked flows can fail the cycle (the database is
        down: every flow meets it alike); what fails for one flow is
        contained (:meth:`contain`) and the others are looked at.  Servers
        gone, takeovers, sweeps and forgetting flows no longer parked are
        left to full looks.
        """
        if only is None:
            self.cycles += 1
        else:
            self.fresh_looks += 1
        self.containment.new_cycle()
        now = time.time()
        rows = self.runner.registry.parked(only)
        by_id = {row.id: row for row in rows}
        ready = []
        waiting: list[flow_rows.FlowRow] = []
        for row in rows:
            try:
                if self.ended(row) or self._cancel_asked(row):
                    ready.append(row.id)
                else:
                    waiting.append(row)
            except Exception as exc:
                self.contain("cancel", exc, row)
        try:
            gone = self._servers_gone(waiting) if only is None else {}
        except Exception as exc:
            self.contain("server check", exc)
            gone = {}
        landed: list[tuple[flow_rows.FlowRow, SignalRead | None]] = []
        for row, read in self.reader.observe(waiting):
            if _news(row, read):  # handled below, all at once
                landed.append((row, read))
                continue
            try:
                if self._check(row, read, now) or self._gone(row, gone):
                    ready.append(row.id)
                self.containment.looked_clean(row.id)
            except Exception as exc:
                self.contain("check", exc, row)
        self.busy = bool(landed) or (only is not None and self.busy)
        if not self.active:  # the lease ran out as it read: the new one acts
            return []
        # the signals that landed are recorded, and their flows resumed, on
        # the runner's workers and this thread at once: a cycle that finds
        # many takes the time of a few; what failed is contained here
        jobs: list[Callable[[], tuple[str, Any]]] = [
            functools.partial(self._land, row, read, now, gone) for row, read in landed
        ]
        jobs.extend(
            functools.partial(self._resume, flow_id, _waiting_of(by_id, flow_id))
            for flow_id in ready
        )
        owners: list[flow_rows.FlowRow | None] = [row for row, _ in landed]
        owners.extend(by_id.get(flow_id) for flow_id in ready)
        resumed = []
        done = self.reader.run_all(jobs)
        for held, (step, result) in zip(owners, done, strict=True):
            if isinstance(result, BaseException):
                self.contain(step, result, held)
                continue
            if held is not None:
                self.containment.looked_clean(held.id)
            if result and held is not None:
                resumed.append(held.id)
        self.resumed += len(resumed)
        if only is not None:
            return resumed
        try:
            self._housekeeping()
        except loops.FATAL:
            raise
        except BaseException as exc:
            self.contain("housekeeping", exc)
        self.containment.forget_all_but(by_id)
        return resumed

    def _land(
        self,
        row: flow_rows.FlowRow,
        read: SignalRead | None,
        now: float,
        gone: dict[str, str],
    ) -> tuple[str, Any]:
        """Record what landed for one flow, and resume it if it may go on:
        ``(step, whether resumed)``, or ``(step, the error)`` of the step
        that failed (raising nothing: it runs on a worker)."""
        try:
            if not (self._check(row, read, now) or self._gone(row, gone)):
                return "check", False
        except loops.FATAL:
            raise
        except BaseException as exc:
            return "check", exc
        return self._resume(row.id, dict(row.waiting) if row.waiting else None)

    def _resume(self, flow_id: str, waiting: dict[str, Any] | None) -> tuple[str, Any]:
        try:
            return "resume", self.runner.resume_parked(flow_id, waiting)
        except loops.FATAL:
            raise
        except BaseException as exc:
            return "resume", exc

    @staticmethod
    def ended(row: flow_rows.FlowRow) -> bool:
        """Whether a parked flow's action ended by other means."""
        waiting = row.waiting or {}
        return (
            row.deployment_status != states.IN_PROGRESS
            or row.deployment_generation != waiting.get("generation")
        )

    def _cancel_asked(self, row: flow_rows.FlowRow) -> bool:
        """End the wait of a parked custom flow asked to cancel (whoever
        asked, or parked it, may have died before ending it); whether asked."""
        note = row.note or ""
        if row.kind != flow_rows.CUSTOM or not note.startswith(flow_rows.CANCEL_NOTE):
            return False
        generation = int((row.waiting or {})["generation"])
        signal_tasks.record_outcome(
            self.services,
            row.deployment_id,
            generation,
            signals.cancelled_outcome(note),
        )
        return True

    def _check(
        self, row: flow_rows.FlowRow, read: SignalRead | None, now: float
    ) -> bool:
        """Apply what was seen of one parked flow; whether it may go on."""
        waiting: Mapping[str, Any] = row.waiting or {}  # read-only: no copy
        deployment_id = row.deployment_id
        generation = int(waiting["generation"])
        if (
            read is not None
            and read.payload is not None
            and not (read.version and read.version == waiting.get("seen"))
        ):
            deployment = self.services.store.get_deployment(deployment_id)
            self.services.store.saw_server(deployment.server_id)
            outcome = signal_tasks.outcome_from_payload(
                self.services, deployment, read.payload
            )
            if outcome is not None:
                signal_tasks.record_outcome(
                    self.services, deployment_id, generation, outcome
                )
                return True
            # a "started" progress signal: the server picked it up
            updated = {**flow_rows.started(waiting, now), "seen": read.version}
            self.runner.registry.update_waiting(row.id, updated, expected=waiting)
            waiting = updated
        outcome = None
        if now >= float(waiting["deadline"]):
            stage = signals.stage_of(waiting)
            outcome = signals.timeout_outcome(int(waiting["timeout"]), stage)
        elif (
            waiting.get("pickup_deadline") is not None
            and not waiting.get("picked_up")
            and now >= float(waiting["pickup_deadline"])
        ):
            outcome = signals.never_picked_up_outcome(int(waiting["delivery_timeout"]))
        if outcome is None:
            return False
        signal_tasks.record_outcome(self.services, deployment_id, generation, outcome)
        return True

    def _servers_gone(self, rows: list[flow_rows.FlowRow]) -> dict[str, str]:
        clock = time.monotonic()
        if not rows or clock - self._last_server_check < self.server_check_interval:
            return {}
        self._last_server_check = clock
        return enrollment.server_gone_check(
            self.services, {row.server_id for row in rows}
        )

    def _gone(self, row: flow_rows.FlowRow, gone: dict[str, str]) -> bool:
        """Fail a flow whose server Nova deleted or broke; whether it did."""
        if row.server_id not in gone:
            return False
        outcome = signals.server_gone_outcome(row.server_id, gone[row.server_id])
        generation = int((row.waiting or {})["generation"])
        signal_tasks.record_outcome(
            self.services, row.deployment_id, generation, outcome
        )
        return True

    # -- housekeeping -------------------------------------------------------
    def _housekeeping(self) -> None:
        clock = time.monotonic()
        if (
            self.services.conf.runner.resume_on_start
            and clock - self._last_takeover >= self.runner.lease_seconds
        ):
            self._last_takeover = clock
            self.runner.resume_interrupted()
        self.sweeper.send_results()
        self.sweeper.sweep_if_due()


def _news(row: flow_rows.FlowRow, read: SignalRead | None) -> bool:
    """Whether a read holds a payload the flow has not seen yet."""
    return (
        read is not None
        and read.payload is not None
        and not (read.version and read.version == (row.waiting or {}).get("seen"))
    )


def _waiting_of(
    rows: dict[str, flow_rows.FlowRow], flow_id: str
) -> dict[str, Any] | None:
    row = rows.get(flow_id)
    return dict(row.waiting) if row is not None and row.waiting else None


__all__ = ["Resumer", "Watcher", "waiting_of"]
