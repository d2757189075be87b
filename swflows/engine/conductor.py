"""Conductors: claim flows' jobs from the jobboard and drive them.

A conductor is a runner (:class:`~swflows.engine.runner.Runner`) that takes
its flows from the board instead of starting them: it claims a job, takes
the flow's row over (the board's claim decides; the row follows it), and
drives the flow from its logbook.  The job is settled by how the drive
ended: consumed when the flow ended or parked, given back (abandoned) when
the conductor stops or the run failed, trashed when the flow was set
aside as BROKEN.

Claims stay alive while the conductor does: on Redis each claim has an
expiry of ``[jobboard] claim_expiry`` seconds, extended every third of it;
on ZooKeeper the claim is an ephemeral node of the conductor's session.  A
conductor that is killed, paused or cut off loses its claims within that
bound and another conductor takes the flows over.  It runs no further step
of them: the claim is checked before each step (:class:`ClaimLost`), and
the heartbeat stops the flows whose claim it could not extend.  On Redis
that check asks the board only once the claim may have run out: until
:data:`SURE_SHARE` of the expiry has passed since the board last took or
extended it, no other conductor can hold it (:class:`ClaimLeases`).

Poison: each takeover of a flow and each failed run counts in its row
(``takeovers``); past :data:`~swflows.engine.runner.MAX_TAKEOVERS` the
flow is set aside as BROKEN and its job trashed, never claimed again.
Jobs held by a conductor that is gone (not among the live conductors, or
a process of this host that died) are given back to the board at once.
"""

from __future__ import annotations

import collections
import logging
import os
import socket
import threading
import time
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Protocol

from swflows import failpoints
from swflows.engine import faults, jobboard, liveness
from swflows.engine import runner as engine_runner
from swflows.engine.driving import Claim
from swflows.persistence import flow_registry as flow_rows
from swflows.persistence import logbook

if TYPE_CHECKING:
    from swflows.services import Services

LOG = logging.getLogger(__name__)

#: how often the board is listed for jobs to claim, in seconds
POLL_SECONDS: Final = 0.5
#: how often a conductor with room asks a Redis board whether a job was
#: posted since its last listing (one GET), in seconds: a new job is
#: claimed within this rather than at the next listing
PROBE_SECONDS: Final = 0.05
#: how long a closing conductor may take, in all: its threads, the
#: runner's, leaving the election and the board share it (each backend
#: call left unanswered gets at least a second)
JOIN_SECONDS: Final = 10.0
#: the share of a Redis claim's expiry during which, counted from the call
#: that took or extended it, the claim is known to be this conductor's
#: without asking the board (the rest is margin for the clocks' rates)
SURE_SHARE: Final = 0.8


class ClaimLost(BaseException):
    """Raised before a step of a flow whose job's claim this conductor lost.

    A :class:`BaseException`, so TaskFlow records no failure and does not
    revert: the flow is left as it was stored, for its new owner.
    """

    def __init__(self, flow_id: str) -> None:
        super().__init__(f"flow {flow_id}: claim lost, stopped before its next step")
        self.flow_id = flow_id


class ClaimLeases:
    """How long each Redis claim of a conductor is surely its own.

    The board sets a claim's expiry when it takes the claim or extends it,
    after the call was sent: a claim taken or extended by a call sent at
    ``t`` (``time.monotonic``) cannot expire, nor be claimed by another,
    before ``t + expiry``.  Until ``t + share * expiry`` the check before a
    step needs no call.  An extension counts only while the claim was
    still sure when it was sent: the board extends whoever's claim it
    finds, and once ours may have run out, that may be another's.
    """

    def __init__(
        self, seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        #: 0: never sure without asking (a ZooKeeper board)
        self.seconds = seconds
        #: the clock ``sent`` times are read on
        self.clock = clock
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()

    def taken(self, job: Any, sent: float) -> None:
        """The board gave ``job``'s claim to a call sent at ``sent``."""
        if self.seconds:
            with self._lock:
                self._until[job.uuid] = sent + self.seconds

    def extended(self, job: Any, sent: float) -> None:
        """The board extended ``job``'s claim by a call sent at ``sent``."""
        with self._lock:
            if sent < self._until.get(job.uuid, 0.0):
                self._until[job.uuid] = sent + self.seconds

    def sure(self, job: Any) -> bool:
        """Whether ``job``'s claim is surely still this conductor's."""
        with self._lock:
            return self.clock() < self._until.get(job.uuid, 0.0)

    def drop(self, job: Any) -> None:
        with self._lock:
            self._until.pop(job.uuid, None)


class Resting:
    """How a conductor waits between two passes of claiming: until woken (a
    drive ended, a job was given back, a ZooKeeper board saw a job posted),
    until a job was posted to a Redis board since the last listing (probed
    every :data:`PROBE_SECONDS` while the conductor has room), or for
    :data:`POLL_SECONDS`."""

    def __init__(
        self,
        board: jobboard.Board,
        stop: threading.Event,
        wake: threading.Event,
        full: Callable[[], bool],
    ) -> None:
        self.board = board
        self._stop = stop
        self._wake = wake
        self._full = full
        #: how many jobs the board had seen posted before the last listing
        #: (:meth:`Board.posted`; None: the board tells, or none listed yet)
        self.listed_posted: int | None = None

    def listing(self) -> None:
        """A listing of the board follows: what it covers is read first,
        so a job posted in between is seen as new, never missed."""
        self.listed_posted = self.board.posted()

    def rest(self) -> None:
        until = time.monotonic() + POLL_SECONDS
        while not self._stop.is_set():
            left = until - time.monotonic()
            probing = self.listed_posted is not None and not self._full()
            if left <= 0 or self._wake.wait(
                min(left, PROBE_SECONDS) if probing else left
            ):
                break
            if probing and self._posted_since_listing():
                break  # with room, the listing is spent: the pass lists anew
        self._wake.clear()

    def _posted_since_listing(self) -> bool:
        try:
            return self.board.posted() != self.listed_posted
        except Exception:  # the next pass meets it, and counts it
            return False


class Rounds:
    """A conductor's flows launched in rounds rather than engines (new
    deploys, as its runner launches its own): they hold no worker, so
    there is room for :attr:`size` of them beside the workers' flows."""

    def __init__(self, conductor: Conductor, size: int) -> None:
        self._conductor = conductor
        self.size = size
        self._lock = threading.Lock()
        self._flows: set[str] = set()

    def full(self, held: int, workers: int) -> bool:
        """Whether a conductor holding ``held`` flows has room for no other:
        its ``workers`` all have one, or the rounds all they may hold."""
        with self._lock:
            rounds = len(self._flows)
        return held - rounds >= workers or rounds >= self.size > 0

    def lend(self, flow_id: str) -> Claim | None:
        """The claim of ``flow_id``'s job, as a round checks and ends it;
        None when the rounds have no room for it."""
        conductor = self._conductor
        check = conductor.fence_for(flow_id)
        drive = types.SimpleNamespace(lost=False)

        def fence() -> None:
            try:
                check(drive)
            except ClaimLost:
                raise logbook.FlowFenced(flow_id, conductor.name, None) from None

        def done(parked: bool | None) -> None:
            with self._lock:
                self._flows.discard(flow_id)
            if parked is not None:  # else an engine's drive settles it
                conductor.drive_done(flow_id, settled=parked)

        with self._lock:
            if len(self._flows) >= self.size:
                return None
            self._flows.add(flow_id)
        return Claim(fence=fence, done=done)

    def unlend(self, flow_id: str, claim: Claim | None) -> None:
        """A claim lent that no round took on: its flow holds a worker."""
        if claim is not None and not claim.adopted:
            with self._lock:
                self._flows.discard(flow_id)


class Listing:
    """The rest of the board's last listing a conductor claims from, oldest
    first, and the servers of the jobs another conductor holds.

    A server of which another conductor holds a job (as listed, or as a
    claim that failed since) is left to that conductor for this listing:
    one server's new deployments launched by one conductor contend on
    nothing (its row and its metadata are written by one process, its
    publishes shared by a round), where two taking turns on them would
    wait on each other.  The next listing tries them all again."""

    def __init__(self, board: jobboard.Board, who: str) -> None:
        self._board = board
        self._who = who
        self._jobs: collections.deque[Any] = collections.deque()
        #: when it was taken (``time.monotonic``)
        self.at = 0.0
        self._elsewhere: set[str] = set()

    def stale(self) -> bool:
        """Used up, or older than :data:`POLL_SECONDS`."""
        return not self._jobs or time.monotonic() - self.at >= POLL_SECONDS

    def take(self) -> None:
        jobs, self._elsewhere = self._board.claimable(self._who)
        self._jobs = collections.deque(jobs)
        self.at = time.monotonic()

    def next(self) -> Any:
        """The next job to try; None once none is left."""
        while self._jobs:
            job = self._jobs.popleft()
            if self._board.server_of(job) not in self._elsewhere:
                return job
        return None

    def taken_elsewhere(self, job: Any) -> None:
        """Another conductor claimed ``job``: its server's are left to it."""
        server = self._board.server_of(job)
        if server:
            self._elsewhere.add(server)


class Host(Protocol):
    """What a conductor needs of the instance it serves (a
    :class:`swflows.Swflows`): its options and services, and to adopt the
    conductor's runner as its own."""

    @property
    def conf(self) -> Any: ...

    @property
    def services(self) -> Services: ...

    def adopt_runner(self, runner: engine_runner.Runner) -> None: ...


class Conductor(jobboard.Jobs):
    """Claims jobs and drives their flows for one :class:`swflows.Swflows`.

    ``start()`` begins claiming, renewing claims and (as every runner) the
    signal watcher; ``close()`` gives the flows it holds back to the board.
    The instance's runner is the conductor's, so its ``wait``, ``cancel``
    and the group driver work as in any process.
    """

    def __init__(
        self,
        sw: Host,
        *,
        board: jobboard.Board | None = None,
        workers: int | None = None,
    ) -> None:
        conf = sw.conf
        if board is None:
            if not conf.jobboard.enabled:
                raise ValueError("a conductor needs [jobboard] enabled = true")
            # a conductor starts through a blip of its board's connections
            board = jobboard.Board.from_conf(conf).connect(
                patience=float(conf.jobboard.claim_expiry)
            )
        self.sw = sw
        self.board = board
        self.runner: engine_runner.Runner = engine_runner.Runner(
            sw.services, workers=workers, jobs=self
        )
        # the row's lease follows the claim
        self.runner.lease_seconds = board.claim_expiry
        self.name = self.runner.owner
        self.capacity = int(workers or conf.runner.workers)
        self._lock = threading.Lock()
        self._held: dict[str, Any] = {}
        self.rounds = Rounds(self, int(conf.runner.launch_batch))
        self._lost: set[str] = set()
        self.leases = ClaimLeases(
            board.claim_expiry * SURE_SHARE if board.kind == "redis" else 0.0
        )
        self._stop = threading.Event()
        #: the heartbeat outlives the claiming: it keeps the claims of the
        #: flows being stopped until they are given back
        self._stop_heartbeat = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        #: when the threads waited for by close stop being waited for
        self._join_by = 0.0
        self._last_reap = 0.0
        #: jobs the board says this conductor holds and it does not drive,
        #: as the last reap saw them (given back if the next sees them too)
        self._strays: set[str] = set()
        self.listing = Listing(board, self.name)
        self.resting = Resting(board, self._stop, self._wake, self._full)
        self._last_announce = 0.0
        self.started_at = time.time()
        #: jobs settled, by how (consumed, abandoned, trashed)
        self.settled: dict[str, int] = {}

    # -- lifecycle --------------------------------------------------------
    def start(self) -> Conductor:
        self._announce()
        self.board.on_posted(self.wake)
        self.sw.adopt_runner(self.runner)
        for target, name in (
            (self._claim_forever, "swflows-conductor"),
            (self._heartbeat_forever, "swflows-claims"),
        ):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        LOG.info("conductor %s started (%s board)", self.name, self.board.kind)
        return self

    def close(self) -> None:
        """Stop claiming; the flows driven here are given back to the board.

        All of it within :data:`JOIN_SECONDS`: the conductor's threads, the
        runner's, leaving the election and the board (a thread blocked in a
        call to a board out of reach never returns, and each bounded wait
        for it would add up)."""
        self._stop.set()
        self._wake.set()
        self._join_by = time.monotonic() + JOIN_SECONDS
        if self._threads:
            self._threads[0].join(timeout=JOIN_SECONDS)
        # suspends the drives (their jobs are given back), then close_board
        self.runner.close(by=self._join_by)

    def close_board(self) -> None:
        self._stop_heartbeat.set()
        if not self._join_by:  # the runner closed without the conductor
            self._join_by = time.monotonic() + JOIN_SECONDS
        for thread in self._threads:
            thread.join(timeout=max(0.1, self._join_by - time.monotonic()))
        self._threads.clear()

        def leave() -> None:
            self.board.retire(self.name)
            self.board.close()

        left = self._join_by - time.monotonic()
        liveness.within(
            max(1.0, min(self.board.claim_expiry, left)),
            f"conductor {self.name}: leaving the board",
            leave,
        )

    def wake(self) -> None:
        self._wake.set()

    @property
    def held(self) -> list[str]:
        """The flows whose job this conductor holds."""
        with self._lock:
            return sorted(self._held)

    # -- claiming ---------------------------------------------------------
    def _claim_forever(self) -> None:
        loop = self.runner.liveness.loop("conductor", POLL_SECONDS)
        with loop.running_in(self._stop.is_set):
            while not self._stop.is_set():
                if not loop.run(self._claim_once):
                    self.runner.failures["claim jobs"] += 1
                self.resting.rest()

    def _claim_once(self) -> None:
        failpoints.hit("conductor.claim")
        self.claim_some()
        clock = time.monotonic()
        if clock - self._last_reap >= self.board.claim_expiry:
            self._last_reap = clock
            self.reap_owners()
        if clock - self._last_announce >= self.board.claim_expiry / 3:
            # the heartbeat announces too: either shows the other's health
            self._announce()

    def claim_some(self) -> list[str]:
        """Claim unclaimed jobs while there is room; the flows started.

        Jobs are tried oldest first, from the board's last listing while it
        is younger than :data:`POLL_SECONDS`: a drive that ends wakes the
        claiming for the next job, and listing the board again for each
        would cost more than the job (a job given back, older than those
        listed, is claimed from the next listing, which that makes at once);
        a server's jobs another conductor took are left to it (:class:`Listing`).
        """
        started: list[str] = []
        listed = False
        while not (self._stop.is_set() or self._full()):
            if not listed and self.listing.stale():
                self.resting.listing()
                self.listing.take()
                listed = True
            job = self.listing.next()
            if job is None:
                break
            sent = self.leases.clock()
            if not self.board.claim(job, self.name):
                with self._lock:  # its claim's expiry ran out as it was listed
                    mine = self._held.get(self.board.flow_of(job) or "")
                if mine is None or mine.uuid != job.uuid:
                    self.listing.taken_elsewhere(job)
                continue
            flow_id = self._take(job, sent)
            if flow_id is not None:
                started.append(flow_id)
        return started

    def _list_again(self) -> None:
        """Have the next claim list the board anew (a job was given back)."""
        self.listing.at = 0.0
        self._wake.set()

    def _full(self) -> bool:
        return self.rounds.full(len(self._held), self.capacity)

    def _take(self, job: Any, sent: float) -> str | None:
        self.leases.taken(job, sent)
        try:
            return self._start(job)
        except Exception:
            # not held here: give it back rather than keep a claim nobody
            # extends (on ZooKeeper it would last as long as this process)
            with self._lock:
                held = job in self._held.values()
            if not held:
                self._settle(job, "abandon")
            raise

    def _start(self, job: Any) -> str | None:
        """Drive the flow of a job just claimed; its id, or None if the job
        was settled at once (stale, duplicate, poison)."""
        flow_id = self.board.flow_of(job)
        if flow_id is None:
            LOG.error("job %s names no flow: trashed", job.uuid)
            self._settle(job, "trash")
            return None
        driven = self.runner.drives_now(flow_id)
        if driven is None and flow_rows.claim_unowned(
            self.registry,
            flow_id,
            self.name,
            lease_until=time.time() + self.board.claim_expiry,
            below=engine_runner.MAX_TAKEOVERS,
        ):
            # a job as posted (its row held by nobody): one write takes it
            return self._drive_claimed(job, flow_id, "")
        row = self.registry.get(flow_id)
        if (
            row is None
            or row.state != flow_rows.RUNNING
            or (
                row.owner not in (None, self.name)
                and not row.lease_expired(time.time())
                # asked only then: the live conductors cost the board 4 calls
                and self.board.is_live(row.owner or "", self.board.conductors())
            )
        ):
            # ended, parked or set aside meanwhile (a stale job), or a live
            # conductor drives the flow already (a duplicate job)
            self._settle(job, "consume")
            return None
        if driven is not None:
            # its claim was lost (a ZooKeeper session that expired drops
            # every claim at once) and taken again here before the drive
            # noticed: never a second drive of it in this process
            return self._claimed_again(job, flow_id, driven)
        if row.takeovers >= engine_runner.MAX_TAKEOVERS:
            note = (
                f"taken over {row.takeovers} times without finishing: the "
                "conductors that drive it keep dying or failing on it"
            )
            self.registry.break_flow(flow_id, note)
            LOG.error("flow %s (%s) set aside: %s", flow_id, row.kind, note)
            self._settle(job, "trash")
            return None
        if not self.registry.claim(
            flow_id,
            self.name,
            lease_until=time.time() + self.board.claim_expiry,
            now=time.time(),
            from_states=(flow_rows.RUNNING,),
            dead_owner=row.owner,  # the board's claim is the one that counts
        ):
            self._settle(job, "abandon")
            return None
        return self._drive_claimed(job, flow_id, f" ({row.kind})")

    def _drive_claimed(self, job: Any, flow_id: str, kind: str) -> str | None:
        """Drive a just claimed job's flow: in a round if it may be, else in
        an engine of its own (:class:`Rounds`)."""
        self._hold(flow_id, job)
        claim = self.rounds.lend(flow_id)
        try:
            submitted = self.runner._load_and_submit(flow_id, claim)
        except Exception as exc:
            LOG.error(
                "flow %s: could not be resumed: %s", flow_id, faults.describe(exc)
            )
            self.registry.release(flow_id, self.name, failed=not faults.is_outage(exc))
            self.drive_done(flow_id)
            return None
        finally:
            self.rounds.unlend(flow_id, claim)
        if not submitted:
            self.drive_done(flow_id)
            return None
        LOG.info("flow %s%s: claimed by %s", flow_id, kind, self.name)
        return flow_id

    def _claimed_again(self, job: Any, flow_id: str, goes_on: bool) -> str | None:
        """A job claimed for a flow this conductor still drives: the drive
        that goes on keeps it under the new claim; one that is stopping
        leaves the flow to whoever claims it next (its row is let go, so
        nothing more it writes reaches the logbook)."""
        if goes_on and self.registry.claim(
            flow_id,
            self.name,
            lease_until=time.time() + self.board.claim_expiry,
            now=time.time(),
            from_states=(flow_rows.RUNNING,),
        ):
            self._hold(flow_id, job)
            LOG.info("flow %s: claimed again by %s, driven on", flow_id, self.name)
            return flow_id
        self.registry.release(flow_id, self.name)
        self._settle(job, "abandon")
        LOG.info("flow %s: still stopping here: its job given back", flow_id)
        return None

    def _hold(self, flow_id: str, job: Any) -> None:
        with self._lock:
            self._held[flow_id] = job
            self._lost.discard(flow_id)

    def _settle(self, job: Any, how: str) -> bool:
        # the board's consume, abandon or trash: the claim ends either way
        self.leases.drop(job)
        done = bool(getattr(self.board, how)(job, self.name))
        if done:
            self.settled[how] = self.settled.get(how, 0) + 1
        return done

    # -- the runner's side ------------------------------------------------
    def drive_done(self, flow_id: str, *, settled: bool = False) -> None:
        """Settle the job of a flow the runner stopped driving, and wake
        the claiming: there is room for another.  ``settled``: the drive
        recorded that the flow ended or parked, so its job is consumed
        without reading the row again."""
        with self._lock:
            job = self._held.pop(flow_id, None)
            lost = flow_id in self._lost
            self._lost.discard(flow_id)
        self._wake.set()
        if job is None:
            return
        if lost:
            self.leases.drop(job)
            return
        if settled:
            self._settle(job, "consume")
            return
        try:
            row = self.registry.get(flow_id)
        except Exception as exc:  # the job's claim runs out: taken over
            LOG.warning(
                "flow %s: job left to expire: %s", flow_id, faults.describe(exc)
            )
            return
        if row is None or row.state == flow_rows.PARKED:
            self._settle(job, "consume")  # ended, or waits holding no claim
        elif row.state == flow_rows.BROKEN:
            self._settle(job, "trash")
        elif row.owner in (None, self.name):
            self.registry.release(flow_id, self.name)
            self._settle(job, "abandon")
            self._list_again()
        else:  # another drives it (it took the row): this claim is stale
            self._settle(job, "abandon")

    def fence_for(self, flow_id: str) -> Any:
        def fence(drive: Any) -> None:
            with self._lock:
                job = self._held.get(flow_id)
                lost = flow_id in self._lost
            try:
                held = (
                    not lost
                    and job is not None
                    and (self.leases.sure(job) or self.board.owner(job) == self.name)
                )
            except Exception as exc:  # unknown is not ours: stop
                LOG.warning("flow %s: claim unknown: %s", flow_id, faults.describe(exc))
                held = False
            if not held:
                with self._lock:
                    self._lost.add(flow_id)
                drive.lost = True
                LOG.warning("flow %s: claim lost; no further step here", flow_id)
                raise ClaimLost(flow_id)

        return fence

    # -- claims' upkeep ---------------------------------------------------
    def _heartbeat_forever(self) -> None:
        loop = self.runner.liveness.loop("claims", self.board.claim_expiry / 3)
        with loop.running_in(self._stop_heartbeat.is_set):
            while not self._stop_heartbeat.wait(loop.every):
                if not loop.run(self.heartbeat):
                    self.runner.failures["extend claims"] += 1

    def heartbeat(self) -> None:
        """Announce this conductor and extend its claims; stop the flows
        whose claim is gone.  One claim that cannot be extended (its board
        call failed) does not keep the others from being extended."""
        failpoints.hit("conductor.heartbeat")
        self._announce()
        with self._lock:
            held = dict(self._held)
        error: BaseException | None = None
        for flow_id, job in held.items():
            try:
                sent = self.leases.clock()
                if self.board.extend(job, self.name):
                    self.leases.extended(job, sent)
                    continue
                with self._lock:
                    if self._held.get(flow_id) is not job:
                        # its drive ended meanwhile and its job was settled
                        # (consumed once parked): nothing was lost
                        continue
                    self._lost.add(flow_id)
                LOG.warning("flow %s: claim lost to another conductor", flow_id)
                self.runner.lose(flow_id)
            except liveness.FATAL:
                raise
            except BaseException as exc:
                error = error or exc
        if error is not None:
            raise error

    def _announce(self) -> None:
        self._last_announce = time.monotonic()
        self.board.announce(
            self.name,
            {
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "since": self.started_at,
                "at": round(time.time(), 3),
                "loops": self.runner.liveness.report(),
            },
        )

    def reap_owners(self) -> list[str]:
        """The flows given back by :func:`reap_owners`."""
        return reap_owners(self)


def reap_owners(conductor: Conductor) -> list[str]:
    """Give back the jobs claimed by conductors that are gone (a claim
    made without expiry, or by a process of this host that died), and
    the jobs claimed by this one that it drives no more (a claim whose
    answer was lost with the connection, or a job left to expire: on
    ZooKeeper neither expires while this process lives), once two
    reaps in a row saw them so; and re-post flows that lost their job.
    The flows given back."""
    live = conductor.board.conductors()
    with conductor._lock:
        driven = {job.uuid for job in conductor._held.values()}
    freed = []
    strays: set[str] = set()
    for job, owner in conductor.board.owned():
        if owner == conductor.name and job.uuid not in driven:
            if job.uuid not in conductor._strays:
                strays.add(job.uuid)  # a drive may be settling it now
            elif conductor.board.abandon(job, conductor.name):
                LOG.warning(
                    "job %s: claimed here and driven by no one: given back",
                    job.uuid,
                )
                freed.append(conductor.board.flow_of(job) or str(job.uuid))
            continue
        if (
            owner is None
            or owner == conductor.name
            or conductor.board.is_live(owner, live)
        ):
            continue
        if conductor.board.abandon(job, owner):
            LOG.warning("job %s: its conductor %s is gone: given back", job.uuid, owner)
            freed.append(conductor.board.flow_of(job) or str(job.uuid))
    conductor._strays = strays
    conductor.reap()
    if freed:
        conductor._list_again()
    return freed


def status(
    board: jobboard.Board,
    registry: flow_rows.FlowRegistry,
    conf: Any = None,
    store: Any = None,
) -> dict[str, Any]:
    """What an operator sees: live conductors, the flows each holds and
    its background loops that stopped or are stale (``stale``, see
    :mod:`swflows.engine.liveness`), the jobs waiting on the board, and the
    active signal watcher."""
    live = board.conductors()
    holding: dict[str, list[str]] = {name: [] for name in live}
    waiting: list[str] = []
    orphaned: dict[str, str] = {}
    for _job, flow_id, owner in jobboard.iter_flow_jobs(board):
        if owner is None:
            waiting.append(flow_id or "?")
        elif owner in holding:
            holding[owner].append(flow_id or "?")
        else:
            orphaned[flow_id or "?"] = owner
    now = time.time()
    return {
        "conductors": {
            name: {
                **info,
                "flows": sorted(holding[name]),
                "stale": liveness.stale_in(info.get("loops"), now),
            }
            for name, info in live.items()
        },
        "waiting": waiting,
        "held_by_gone": orphaned,
        "watcher": (
            active_watcher(conf, store)
            if conf is not None and store is not None
            else "unknown"
        ),
        "parked": len(registry.parked()),
    }


def active_watcher(conf: Any, store: Any) -> str:
    """The runner whose signal watcher is active, as the watcher election
    (:mod:`swflows.engine.election`) knows it: ``none`` while nobody leads,
    and "every runner" without ``[coordination] backend_url``."""
    from swflows.engine import election, watcher

    url = conf.coordination.backend_url
    if not url and conf.jobboard.enabled:
        url = jobboard.election_url(conf.jobboard.backend_url)
    if not url:
        return "every runner (no [coordination] backend_url)"
    try:
        return election.leader_of(url, watcher.watcher_role(store)) or "none"
    except election.ElectionError as exc:
        return f"unknown ({exc})"


__all__ = ["ClaimLost", "Conductor", "Host", "active_watcher", "reap_owners", "status"]
