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
  at most every ``SERVER_CHECK_INTERVAL`` seconds, whatever the number of
  flows;
- it is a custom flow asked to cancel (FAILED, kind ``cancelled``, if the
  canceller had not ended it yet).

A "started" progress signal, or the server reading its metadata through the
API, counts as picked up.  Every ``sweep_interval`` the watcher also
removes signal stores no flow waits on: a TempURL PUT or a queue post sent
after its deployment ended recreates a store nobody would read.  Only
stores of deployments in its own database are swept, never those of
another installation sharing the account.  The same sweep removes
metadata objects and queues that carry this installation's owner tag and
that no server of its store has owned at any sweep for
``channel_sweep_grace`` seconds (a crash, or a version before unenroll
closed its race, left them).

With ``[coordination] backend_url`` set, the runners sharing a database
elect one watcher (:mod:`swflows.engine.election`): only the elected one
looks at parked flows and sweeps; the others stand by, and still take over
the flows of runners that died.  A watcher checks that it is still elected
before each cycle and before acting on what it read, so one that lost its
lease (paused, cut from the backend) stops; an outcome is recorded by
compare-and-set and a flow resumed by one runner only, so the rare cycle
two watchers overlap on does nothing twice.

One flow never stops the others: a failure handling one of them is logged
once, counted in :attr:`Watcher.failures`, and the cycle goes on with the
rest.  An outage (:mod:`swflows.engine.faults`) is simply met again next
cycle; a fault of the flow's own data, met :data:`MAX_DATA_FAILURES` times
in a row, ends its deployment FAILED (kind ``internal_error``), or sets the
flow aside as BROKEN when even that cannot be written.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import tenacity

from swflows import enrollment, exceptions, metadata, signals, states, trusts
from swflows import outcomes as signal_tasks
from swflows import transport_names as names
from swflows.engine import faults
from swflows.engine.election import Election
from swflows.persistence import flow_registry as flow_rows
from swflows.services import Services
from swflows.transports import owner
from swflows.transports.base import (
    ConfigTransport,
    FoundChannel,
    SignalRead,
    SignalRef,
)

LOG = logging.getLogger(__name__)
_T = TypeVar("_T")

#: transports whose stores a late signal can bring back (swept)
SWEPT_TRANSPORTS = (names.TEMP_URL_SIGNAL, names.ZAQAR_SIGNAL)
#: seconds between two looks at Nova for deleted or broken servers
SERVER_CHECK_INTERVAL = 2.0
#: a flow whose own data made the watcher fail this many times in a row is
#: ended (``internal_error``) rather than left waiting forever
MAX_DATA_FAILURES = 3
#: the least rest between two cycles, as a fraction of the poll interval
MIN_REST = 0.25
#: the interval after a cycle that found a signal, as a fraction of the
#: poll interval (idle cycles keep to the poll interval: their cost)
BUSY_INTERVAL = 0.5
#: failures remembered (not to log them twice) before starting afresh
LOGGED_KEPT = 10000


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
    (see :meth:`Watcher.role`)."""
    where = f"{store.url} {store.table_prefix}".encode()
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
        self._wake = threading.Event()
        self._last_sweep = time.monotonic()
        self._last_takeover = time.monotonic()
        self._last_server_check = -SERVER_CHECK_INTERVAL
        self.server_check_interval = SERVER_CHECK_INTERVAL
        #: orphaned metadata channels, (transport, id) -> when first seen
        self._orphans: dict[tuple[str, str], float] = {}
        #: cycles run, and flows resumed (for tests and status)
        self.cycles = 0
        self.resumed = 0
        #: failures contained, by step (``check``, ``resume``, ``sweep``...)
        self.failures: collections.Counter[str] = collections.Counter()
        #: data faults in a row, by flow id
        self._strikes: dict[str, int] = {}
        #: what was last logged, by flow id and by step: each failure once
        self._logged: dict[str, str] = {}
        self._logged_steps: dict[str, str] = {}
        #: flows that failed in the current cycle
        self._failed_now: set[str] = set()
        #: the last cycle found a signal
        self.busy = False

    def wake(self) -> None:
        self._wake.set()

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
            except Exception as exc:
                self.contain("takeover", exc)
        self._sleep(float(self.conf.poll_interval))

    def run_forever(self) -> None:
        while not self.runner.stopping:
            if not self.active:
                self.stand_by()
                continue
            started = time.monotonic()
            # a failed cycle (the parked flows could not be read: the
            # database is out of reach) is tried again with backoff
            retrying = tenacity.Retrying(
                retry=tenacity.retry_if_exception_type(Exception),
                stop=lambda state: self.runner.stopping,
                wait=self._backoff(),
                sleep=self._sleep,
                after=self._cycle_failed,
                reraise=True,
            )
            try:
                retrying(self._cycle_unless_stopping)
            except Exception:
                return  # it failed as the runner stopped
            if self.runner.stopping:
                return
            failed = int(retrying.statistics.get("attempt_number", 1)) - 1
            if failed:
                LOG.warning("signal watcher: cycles run again, after %d failed", failed)
            self._sleep(self._delay(0, time.monotonic() - started))

    def _cycle_unless_stopping(self) -> None:
        if not self.runner.stopping:
            self.cycle()

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
        """Wait ``seconds``, or less if woken (a signal was pushed)."""
        self._wake.wait(seconds)
        self._wake.clear()

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
    def cycle(self) -> list[str]:
        """Look once at every parked flow; the ids of those resumed.

        Only reading the parked flows can fail the cycle (the database is
        down: every flow meets it alike); what fails for one flow is
        contained (:meth:`contain`) and the others are looked at.
        """
        self.cycles += 1
        self._failed_now.clear()
        now = time.time()
        rows = self.runner.registry.parked()
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
            gone = self._servers_gone(waiting)
        except Exception as exc:
            self.contain("server check", exc)
            gone = {}
        landed: list[tuple[flow_rows.FlowRow, SignalRead | None]] = []
        for row, read in self._observe(waiting):
            if _news(row, read):  # handled below, all at once
                landed.append((row, read))
                continue
            try:
                if self._check(row, read, now) or self._gone(row, gone):
                    ready.append(row.id)
                if row.id not in self._failed_now:  # a clean look: start afresh
                    self._strikes.pop(row.id, None)
            except Exception as exc:
                self.contain("check", exc, row)
        self.busy = bool(landed)
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
        for held, (step, result) in zip(owners, self.run_all(jobs), strict=True):
            if isinstance(result, BaseException):
                self.contain(step, result, held)
                continue
            if held is not None and held.id not in self._failed_now:
                self._strikes.pop(held.id, None)
            if result and held is not None:
                resumed.append(held.id)
        self.resumed += len(resumed)
        try:
            self._housekeeping()
        except Exception as exc:
            self.contain("housekeeping", exc)
        for gone_id in set(self._strikes).union(self._logged) - set(by_id):
            self._strikes.pop(gone_id, None)
            self._logged.pop(gone_id, None)
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
        except Exception as exc:
            return "check", exc
        return self._resume(row.id, dict(row.waiting) if row.waiting else None)

    def _resume(self, flow_id: str, waiting: dict[str, Any] | None) -> tuple[str, Any]:
        try:
            return "resume", self.runner.resume_parked(flow_id, waiting)
        except Exception as exc:
            return "resume", exc

    def run_all(self, jobs: Sequence[Callable[[], _T]]) -> list[_T]:
        """Run ``jobs`` on this thread and, at once, on the runner's idle
        workers; their results, in order.

        This thread takes jobs too, so busy workers never hold a cycle up:
        a worker that starts once every job is taken has nothing to do.
        The jobs must raise nothing (an error is lost: the job's result is
        then None).
        """
        if len(jobs) < 2:
            return [job() for job in jobs]
        results: list[Any] = [None] * len(jobs)
        pending = collections.deque(enumerate(jobs))
        lock = threading.Lock()
        done = threading.Semaphore(0)

        def drain() -> None:
            while True:
                with lock:
                    if not pending:
                        return
                    index, job = pending.popleft()
                try:
                    results[index] = job()
                except Exception:  # pragma: no cover - jobs raise nothing
                    LOG.exception("signal watcher: a job failed")
                finally:
                    done.release()

        helpers = min(len(jobs) - 1, int(self.services.conf.runner.workers))
        for _ in range(helpers):
            if not self.runner.offload(drain):
                break
        drain()
        for _ in jobs:
            done.acquire()
        return results

    def _read_all(self, reads: Sequence[Callable[[], SignalRead]]) -> list[SignalRead]:
        """:data:`~swflows.transports.base.ReadAll` on the runner's workers."""
        outcomes = self.run_all([functools.partial(_result_or_error, r) for r in reads])
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return outcomes  # type: ignore[return-value]

    # -- containing failures ----------------------------------------------
    def contain(
        self, step: str, exc: BaseException, row: flow_rows.FlowRow | None = None
    ) -> None:
        """Count and log (once) a failure of ``step``, for ``row``'s flow if
        it is one flow's; end that flow's deployment once its own data
        failed :data:`MAX_DATA_FAILURES` times in a row."""
        self.failures[step] += 1
        detail = faults.describe(exc)
        outage = faults.is_outage(exc)
        logged = self._logged if row is not None else self._logged_steps
        key = row.id if row is not None else step
        if logged.get(key) != detail:
            if len(logged) >= LOGGED_KEPT:
                logged.clear()
            logged[key] = detail
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
        if row is None or outage:
            return
        self._failed_now.add(row.id)
        strikes = self._strikes.get(row.id, 0) + 1
        self._strikes[row.id] = strikes
        if strikes >= MAX_DATA_FAILURES:
            self._strikes.pop(row.id, None)
            self._give_up(row, detail, strikes)

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
            ended = signal_tasks.record_outcome(
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
            self.runner.registry.break_flow(row.id, note)
            LOG.error("flow %s %s", row.id, note)
        except Exception as exc:
            LOG.error(
                "flow %s could not be set aside: %s", row.id, faults.describe(exc)
            )

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

    def _observe(
        self, rows: Iterable[flow_rows.FlowRow]
    ) -> list[tuple[flow_rows.FlowRow, SignalRead | None]]:
        """Each row with its store's read (None: nothing to read)."""
        rows = list(rows)
        groups: dict[tuple[str, str, str], list[flow_rows.FlowRow]] = {}
        out: list[tuple[flow_rows.FlowRow, SignalRead | None]] = []
        through = self._trusts(rows)
        for row in rows:
            waiting = row.waiting or {}
            if not waiting.get("store"):
                out.append((row, None))
                continue
            key = (
                waiting["transport"],
                json.dumps(waiting.get("options"), sort_keys=True),
                # a store made through a trust is read through it
                through.get(row.deployment_id, ""),
            )
            groups.setdefault(key, []).append(row)
        for (name, options, trust), members in groups.items():
            try:
                services = self.services.for_trust(trust or None)
                reads = self._reads(services, name, json.loads(options), members)
            except Exception as exc:
                if faults.is_outage(exc):
                    # the service is down: deadlines still count
                    self.contain(f"reading {name} signals", exc)
                    reads = {}
                else:  # one flow's store, most likely: read each alone
                    reads = self._reads_one_by_one(
                        trust, name, json.loads(options), members
                    )
            out.extend((row, reads.get(row.id)) for row in members)
        return out

    def _trusts(self, rows: list[flow_rows.FlowRow]) -> dict[str, str]:
        """Deployment id -> the trust its store is reached through."""
        if self.services.clients.trustee is None:
            return {}
        return trusts.acting_trusts(
            self.services.store, (row.deployment_id for row in rows)
        )

    def _reads(
        self,
        services: Services,
        name: str,
        options: dict[str, Any],
        members: list[flow_rows.FlowRow],
    ) -> dict[str, SignalRead]:
        transport = services.signal_transport(name, options)
        if not transport.pulled:
            return {}
        stores = {row.id: row.waiting["store"] for row in members if row.waiting}
        known = {row.id: (row.waiting or {}).get("seen") for row in members}
        return dict(transport.observe(services, stores, known, self._read_all))

    def _reads_one_by_one(
        self,
        trust: str,
        name: str,
        options: dict[str, Any],
        members: list[flow_rows.FlowRow],
    ) -> dict[str, SignalRead]:
        reads: dict[str, SignalRead] = {}
        for row in members:
            try:
                services = self.services.for_trust(trust or None)
                reads.update(self._reads(services, name, options, [row]))
            except Exception as exc:
                self.contain("read", exc, row)
        return reads

    def _check(
        self, row: flow_rows.FlowRow, read: SignalRead | None, now: float
    ) -> bool:
        """Apply what was seen of one parked flow; whether it may go on."""
        waiting = dict(row.waiting or {})
        deployment_id = row.deployment_id
        generation = int(waiting["generation"])
        if (
            read is not None
            and read.payload is not None
            and not (read.version and read.version == waiting.get("seen"))
        ):
            deployment = self.services.store.get_deployment(deployment_id)
            outcome = signal_tasks.outcome_from_payload(
                self.services, deployment, read.payload
            )
            if outcome is not None:
                signal_tasks.record_outcome(
                    self.services, deployment_id, generation, outcome
                )
                return True
            # a "started" progress signal: the server picked it up
            updated = {**waiting, "picked_up": True, "seen": read.version}
            self.runner.registry.update_waiting(row.id, updated, expected=waiting)
            waiting = updated
        outcome = None
        if now >= float(waiting["deadline"]):
            outcome = signals.timeout_outcome(int(waiting["timeout"]))
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
        runner_conf = self.services.conf.runner
        if (
            runner_conf.resume_on_start
            and clock - self._last_takeover >= self.runner.lease_seconds
        ):
            self._last_takeover = clock
            self.runner.resume_interrupted()
        if clock - self._last_sweep >= float(self.conf.sweep_interval):
            self._last_sweep = clock
            for step, sweep in (
                ("sweeping signal stores", self.sweep),
                ("sweeping channels", self.sweep_channels),
            ):
                try:
                    sweep()
                except Exception as exc:
                    self.contain(step, exc)

    def sweep(self) -> list[str]:
        """Remove signal stores no unfinished flow can read; their keys."""
        removed: list[str] = []
        clients = self.services.clients
        offered = {
            names.TEMP_URL_SIGNAL: clients.offers("object_store"),
            names.ZAQAR_SIGNAL: clients.offers("messaging"),
        }
        for name in SWEPT_TRANSPORTS:
            if not offered[name]:
                continue
            transport = self.services.signal_transport(
                name, self.services.signal_options(name)
            )
            try:
                # stores first, flows second: a store made after this listing
                # belongs to a flow whose row is already written
                existing = transport.existing_stores(self.services)
                if not existing:
                    continue
                live = {row.deployment_id for row in self.runner.registry.find()}
            except Exception as exc:
                self.contain(f"sweeping {name} stores", exc)
                continue
            for key, store in existing.items():
                try:
                    if self._stray(key, live):
                        transport.delete_store(self.services, store)
                        removed.append(key)
                except Exception as exc:  # that store only: the others go on
                    self.contain(f"sweeping {name} store {key}", exc)
        if removed:
            LOG.info("removed %d signal store(s) no flow waits on", len(removed))
        return removed

    def _stray(self, key: str, live: set[str]) -> bool:
        """Whether a store is this installation's, and nothing will read it.

        A store of a deployment this database does not hold is left alone:
        another installation sharing the Swift account or Zaqar project may
        be waiting on it.
        """
        ref = _ref_of(key)
        if ref is None or ref.deployment_id in live:
            return False
        try:
            deployment = self.services.store.get_deployment(ref.deployment_id)
        except exceptions.DeploymentNotFound:
            return False
        return deployment.is_terminal or deployment.generation != ref.generation

    def sweep_channels(self) -> list[str]:
        """Remove metadata channels no server of the store owns; their ids.

        Only channels tagged with this installation's owner tag are
        considered (untagged ones too with ``sweep_untagged_channels``),
        and one goes only once every sweep for ``channel_sweep_grace``
        seconds found it unowned, so an enrollment that has made its channel
        and not recorded it yet keeps it.
        """
        grace = float(self.conf.channel_sweep_grace)
        untagged = bool(self.conf.sweep_untagged_channels)
        mine = owner.tag(self.services)
        now = time.monotonic()
        listed: list[tuple[str, ConfigTransport, dict[str, FoundChannel]]] = []
        failed: set[str] = set()
        for name, transport in self._channel_transports():
            try:
                listed.append(
                    (name, transport, transport.existing_channels(self.services))
                )
            except exceptions.SwflowsError as exc:
                LOG.warning("could not list %s channels: %s", name, exc)
                failed.add(name)
        # channels first, servers second: a channel recorded after its
        # listing is owned here
        owned = self._owned_channels() if any(found for *_, found in listed) else {}
        # a listing that failed keeps its orphans' clocks
        orphans = {key: t for key, t in self._orphans.items() if key[0] in failed}
        removed: list[tuple[str, str]] = []
        for name, transport, existing in listed:
            due, waiting = sweep_plan(
                existing,
                {cid for (n, cid) in owned if n == name},
                mine,
                untagged=untagged,
                seen={cid: t for (n, cid), t in self._orphans.items() if n == name},
                now=now,
                grace=grace,
            )
            orphans.update(((name, cid), t) for cid, t in waiting.items())
            for channel_id in due:
                try:
                    transport.remove_channel(
                        self.services, channel_id, existing[channel_id].channel
                    )
                except exceptions.SwflowsError as exc:
                    LOG.warning("could not remove channel %s: %s", channel_id, exc)
                    orphans[(name, channel_id)] = now - grace
                    continue
                removed.append((name, channel_id))
        self._orphans = orphans
        if removed:
            LOG.info("removed %d metadata channel(s) no server owns", len(removed))
            self._republish_owned(removed)
        return [channel_id for _, channel_id in removed]

    def _channel_transports(self) -> list[tuple[str, ConfigTransport]]:
        """The config transports to list: POLL_TEMP_URL in the configured
        container and in every container a server's channel is in."""
        services = self.services
        found: list[tuple[str, ConfigTransport]] = []
        if services.clients.offers("object_store"):
            containers = {str(services.conf.metadata_container)}
            for record in services.store.list_servers():
                if record.config_transport == names.POLL_TEMP_URL:
                    container = (record.channel or {}).get("container")
                    if container:
                        containers.add(str(container))
            found.extend(
                (
                    names.POLL_TEMP_URL,
                    services.config_transport(
                        names.POLL_TEMP_URL, {"container": container}
                    ),
                )
                for container in sorted(containers)
            )
        if services.clients.offers("messaging"):
            found.append(
                (names.ZAQAR_MESSAGE, services.config_transport(names.ZAQAR_MESSAGE))
            )
        return found

    def _owned_channels(self) -> dict[tuple[str, str], str]:
        """(transport, channel id) of every server's channel -> its server."""
        owned: dict[tuple[str, str], str] = {}
        for record in self.services.store.list_servers():
            if not record.config_transport or not record.channel:
                continue
            transport = self.services.config_transport(record.config_transport)
            channel_id = transport.channel_id(record.channel)
            if channel_id:
                owned[(record.config_transport, channel_id)] = record.server_id
        return owned

    def _republish_owned(self, removed: list[tuple[str, str]]) -> None:
        """Publish again to a channel a server recorded while it was being
        removed (its id enrolled again at that very moment)."""
        owned = self._owned_channels()
        for key in removed:
            server_id = owned.get(key)
            if server_id is None:
                continue
            LOG.warning("server %s took channel %s as it was swept", server_id, key[1])
            try:
                metadata.publish_server(self.services, server_id, key[0], create=False)
            except exceptions.SwflowsError as exc:
                LOG.warning("could not publish server %s again: %s", server_id, exc)


def sweep_plan(
    existing: Mapping[str, FoundChannel],
    owned: Collection[str],
    mine: str,
    *,
    untagged: bool,
    seen: Mapping[str, float],
    now: float,
    grace: float,
) -> tuple[list[str], dict[str, float]]:
    """Which listed channels to remove now, and which orphans to remember.

    A channel is an orphan when no server owns it and it carries ``mine``
    (or no tag, with ``untagged``); it is due once it has been an orphan at
    every look since ``seen`` says it first was, ``grace`` seconds ago.
    The orphans not due yet are returned with when they were first seen;
    one that is owned again, or gone, is forgotten.
    """
    due: list[str] = []
    waiting: dict[str, float] = {}
    for channel_id, found in sorted(existing.items()):
        if channel_id in owned:
            continue
        if found.owner != mine and not (untagged and found.owner is None):
            continue
        first = seen.get(channel_id, now)
        if now - first >= grace:
            due.append(channel_id)
        else:
            waiting[channel_id] = first
    return due, waiting


def _news(row: flow_rows.FlowRow, read: SignalRead | None) -> bool:
    """Whether a read holds a payload the flow has not seen yet."""
    return (
        read is not None
        and read.payload is not None
        and not (read.version and read.version == (row.waiting or {}).get("seen"))
    )


def _result_or_error(job: Callable[[], _T]) -> _T | BaseException:
    try:
        return job()
    except Exception as exc:
        return exc


def _waiting_of(
    rows: dict[str, flow_rows.FlowRow], flow_id: str
) -> dict[str, Any] | None:
    row = rows.get(flow_id)
    return dict(row.waiting) if row is not None and row.waiting else None


def _ref_of(key: str) -> SignalRef | None:
    deployment_id, _, generation = key.partition("/")
    if not deployment_id or not generation.isdigit():
        return None
    return SignalRef(deployment_id, int(generation), 0)


__all__ = ["Resumer", "Watcher", "sweep_plan", "waiting_of"]
