"""Leader election across processes and hosts: one holder of a role at a
time (the signal watcher, for one), the others standing by.

Built on tooz, OpenStack's coordination library, over Redis or ZooKeeper
(``redis://host:port?db=N``, ``zookeeper://host:port``).  The leader holds a
tooz lock named after the role; every candidate is a member of the role's
tooz group, the leader's capabilities saying since when it leads, which is
how :meth:`Election.leader_id` and :meth:`Election.members` answer from
any process.

tooz's own group leader election (``watch_elected_as_leader``) is a lock
underneath too, but on Redis it can neither tell that the leadership was
lost nor stand down, so the election holds the lock itself and keeps a
lease of its own:

- Every :attr:`Election.tick` seconds the leader renews the lock (on Redis,
  a new expiry of ``timeout`` seconds; on ZooKeeper, a read that keeps the
  session of its ephemeral lock node alive) and reads it back as its own.
  A renewal sent at ``t`` that succeeds makes the process leader until
  ``t + timeout - margin`` on its own monotonic clock: the lock cannot pass
  to another process before ``t + timeout`` (Redis expires it then at the
  earliest; ZooKeeper ends the session ``timeout`` seconds after it last
  heard of it).
- :attr:`Election.is_leader` is that deadline, read when asked: a process
  paused, partitioned or cut from the backend stops being leader when its
  lease runs out, whether or not its election thread got to run, and
  before any other process can be elected.  ``on_revoked`` is called at
  that deadline by a thread that only watches the clock, even while the
  campaign waits on a backend out of reach.
- Standbys try the lock every tick.  The leader's process killed, its lock
  passes on within :attr:`Election.handover_bound` (``timeout + tick``, plus
  ZooKeeper's ``tickTime``, the granularity of its session expiry): the
  lock lapses ``timeout`` seconds after its last renewal at the latest, and
  a standby tries it a tick later.

A backend out of reach is tried again every tick (the leader meanwhile
keeps its lease until it runs out); nothing is raised to the caller after
:meth:`Election.start`, which only checks the URL.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any, Final

from swflows import exceptions, extras, failpoints
from swflows.engine import liveness as loops

LOG = logging.getLogger(__name__)

#: seconds a leader's lease lasts without renewal (tooz's lock timeout on
#: Redis, the session timeout on ZooKeeper); whole seconds: tooz takes ints
DEFAULT_TIMEOUT: Final = 10
#: the schemes an election runs on
SCHEMES: Final = ("redis", "zookeeper")
#: the part of ``timeout`` a lease is shortened by, so that a process stops
#: being leader before the backend can hand the lock on (clock rates, the
#: time a renewal took to reach the server)
MARGIN: Final = 0.1
#: why a leader that stood down no longer leads
STOPPED: Final = "stopped"
#: the capability naming since when (wall clock) a member leads
LEADER_SINCE: Final = "leader_since"


class ElectionError(exceptions.SwflowsError):
    """The election's backend URL or settings are wrong."""


def describe_url(url: str) -> str:
    """``url`` without its user and password, for messages and logs."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def default_member_id() -> str:
    """This process: ``host:pid:random``, unique across restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _leader_among(coordinator: Any, role: str) -> str | None:
    """The member of ``role``'s group elected last among those that say
    they lead, or None."""
    best: tuple[float, str] | None = None
    group = role.encode()
    for member in coordinator.get_members(group).get():
        try:
            caps = coordinator.get_member_capabilities(group, member).get()
        except Exception as exc:  # it left meanwhile
            LOG.debug("election %s: member %r: %s", role, member, exc)
            continue
        since = (caps or {}).get(LEADER_SINCE) if isinstance(caps, dict) else None
        if since and (best is None or since > best[0]):
            best = (float(since), member.decode())
    return best[1] if best else None


def leader_of(backend_url: str, role: str) -> str | None:
    """Who leads ``role``'s election on ``backend_url``, asked by an
    onlooker that neither joins nor campaigns (the operator's view)."""
    from tooz import coordination

    onlooker = f"onlooker-{default_member_id()}".encode()
    try:
        coordinator = coordination.get_coordinator(backend_url, onlooker, None)
        coordinator.start()
    except Exception as exc:
        raise ElectionError(
            f"coordination backend {describe_url(backend_url)!r}: {exc}"
        ) from None
    try:
        return _leader_among(coordinator, role)
    except coordination.GroupNotCreated:
        return None
    finally:
        with contextlib.suppress(Exception):
            coordinator.stop()


class Election:
    """One candidate for ``role`` on the tooz backend ``backend_url``.

    ``start()`` connects (in the background: a backend out of reach is
    tried again every tick) and campaigns; ``stop()`` stands down, so a
    standby is elected at its next tick.  ``on_elected`` and ``on_revoked``
    are called on the election's thread, each time the leadership is won or
    lost; they must be quick (an exception is logged, not raised).
    """

    def __init__(
        self,
        backend_url: str,
        role: str,
        *,
        member_id: str | None = None,
        timeout: int = DEFAULT_TIMEOUT,
        on_elected: Callable[[], object] | None = None,
        on_revoked: Callable[[], object] | None = None,
        liveness: loops.Liveness | None = None,
    ) -> None:
        scheme = urllib.parse.urlsplit(backend_url).scheme
        if scheme not in SCHEMES:
            raise ElectionError(
                f"coordination backend {describe_url(backend_url)!r}: the scheme "
                f"must be one of {', '.join(SCHEMES)}, not {scheme!r}"
            )
        if not role:
            raise ElectionError("an election needs a role name")
        if int(timeout) != timeout or timeout < 2:
            raise ElectionError(
                f"leader timeout {timeout!r}: a whole number of seconds, at least 2"
            )
        extras.require(scheme, f"a {scheme} election ([coordination] backend_url)")
        self.backend_url = backend_url
        self.scheme = scheme
        self.role = role
        self.member_id = member_id or default_member_id()
        self.timeout = int(timeout)
        #: seconds between two renewals (leader) or tries (standby)
        self.tick = max(0.2, min(1.0, self.timeout / 5))
        self._on_elected = on_elected
        self._on_revoked = on_revoked
        self._group = role.encode()
        self._lock_name = f"{role}-leader".encode()
        self._coordinator: Any = None
        self._joined = False
        self._lock: Any = None
        self._lease_until = 0.0  # monotonic; 0: not leader
        self._leading = False  # what the callbacks were last told
        self._since = 0.0
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._mutex = threading.Lock()
        self._elected = threading.Condition(self._mutex)
        self._last_error = ""
        #: the campaign's health (a loop of ``liveness``, or its own)
        self.loop = (liveness or loops.Liveness()).loop("election", self.tick)
        #: times won and lost (for tests and the operator view)
        self.elections = 0
        self.revocations = 0

    def __repr__(self) -> str:
        return (
            f"Election(role={self.role!r}, member={self.member_id!r}, "
            f"backend={describe_url(self.backend_url)!r})"
        )

    # -- the API -------------------------------------------------------------
    @property
    def handover_bound(self) -> float:
        """Seconds after the leader's process died by which a standby is
        elected: ``timeout + tick``, plus ZooKeeper's session granularity
        (its ``tickTime``, taken as 2 s, the default, at most)."""
        extra = 2.0 if self.scheme == "zookeeper" else 0.0
        return self.timeout + self.tick + extra

    @property
    def is_leader(self) -> bool:
        """Whether this process leads now: its last renewal is recent
        enough that no other process can have taken the lock."""
        return time.monotonic() < self._lease_until

    def start(self) -> None:
        """Connect and campaign, on a thread of the election's own."""
        if self._threads:
            return
        from tooz import coordination

        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.backend_url).query)
        options = {"timeout": str(self.timeout)}  # the session, on ZooKeeper
        if self.scheme == "redis":
            options["lock_timeout"] = options["membership_timeout"] = options["timeout"]
        options = {k: v for k, v in options.items() if k not in query}
        try:
            self._coordinator = coordination.get_coordinator(
                self.backend_url, self.member_id.encode(), None, **options
            )
        except Exception as exc:
            raise ElectionError(
                f"coordination backend {describe_url(self.backend_url)!r}: {exc}"
            ) from None
        self._stopping.clear()
        self._threads = [
            threading.Thread(target=target, name=f"{name}-{self.role}", daemon=True)
            for target, name in (
                (self._campaign, "swflows-election"),
                (self._watch_lease, "swflows-election-lease"),
            )
        ]
        for thread in self._threads:
            thread.start()

    def stop(self, seconds: float | None = None) -> None:
        """Stand down (a standby takes over at its next tick), leave the
        group and disconnect, within ``seconds`` (default: the election's
        timeout)."""
        self._stopping.set()
        self._lease_until = 0.0
        self._demote(STOPPED)
        # all of it within one bound: a call to a backend out of reach may
        # hold the campaign, and leaving waits for it too
        deadline = time.monotonic() + (self.timeout if seconds is None else seconds)
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        self._threads = []
        self._leave(max(1.0, deadline - time.monotonic()))
        self._coordinator = None
        self._joined = False

    def _leave(self, seconds: float) -> None:
        """Give the lock up, leave the group and disconnect, waiting for
        the backend at most ``seconds``: tooz and kazoo wait
        without a bound for these answers (a ZooKeeper out of reach would
        hold the process's shutdown forever). Left unanswered, the lock
        lapses and the membership ends with the session, as a killed
        process's do."""
        # taken here: a start after a leave left unanswered has its own
        coordinator, lock, self._lock = self._coordinator, self._lock, None
        joined = self._joined

        def attempt(what: str, call: Callable[[], object]) -> None:
            try:
                call()
            except Exception as exc:
                LOG.debug("election %s: %s: %s", self.role, what, exc)

        def leave() -> None:
            if lock is not None:
                attempt("releasing the lock", lock.release)
            if coordinator is not None and coordinator.is_started:
                if joined:  # no longer leading, in the group
                    attempt(
                        "capabilities",
                        lambda: coordinator.update_capabilities(self._group, {}).get(),
                    )
                attempt("stopping", coordinator.stop)  # leaves the group

        loops.within(
            seconds,
            f"election {self.role}: leaving {describe_url(self.backend_url)}",
            leave,
        )

    def wait_elected(self, timeout: float | None = None) -> bool:
        """Block until this process leads (True), or ``timeout`` passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._elected:
            while not self.is_leader:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._elected.wait(left if left is None else min(left, self.tick))
            return True

    def members(self) -> list[str]:
        """Every live candidate's id (the leader and the standbys)."""
        coordinator = self._connected()
        return sorted(m.decode() for m in coordinator.get_members(self._group).get())

    def leader_id(self) -> str | None:
        """The id of the member that leads now, as the backend knows it
        (the latest elected of those that say they lead), or None."""
        return _leader_among(self._connected(), self.role)

    # -- the thread ----------------------------------------------------------
    def _connected(self) -> Any:
        coordinator = self._coordinator
        if coordinator is None or not coordinator.is_started:
            raise ElectionError(f"{self!r} is not connected")
        return coordinator

    def _campaign(self) -> None:
        with self.loop.running_in(self._stopping.is_set):
            while not self._stopping.is_set():
                if self.loop.run(self._step):
                    self._last_error = ""
                else:
                    self._tried_again()
                self._stopping.wait(self.tick)

    def _tried_again(self) -> None:
        """Say once per new error that the backend is tried again."""
        detail = self.loop.last_error
        if detail and detail != self._last_error:
            LOG.warning(
                "election %s on %s: %s (tried again every %.1f s)",
                self.role,
                describe_url(self.backend_url),
                detail,
                self.tick,
            )
            self._last_error = detail

    def _watch_lease(self) -> None:
        """Tell of a lease that ran out when it does, even while the
        campaign waits on a backend out of reach."""
        delay = self.tick
        while not self._stopping.wait(delay):
            try:
                if self._leading and not self.is_leader:
                    self._demote("its lease ran out unrenewed")
            except loops.FATAL:
                raise
            except BaseException as exc:
                LOG.warning("election %s: telling of a lost lease: %s", self.role, exc)
            left = self._lease_until - time.monotonic()
            delay = min(self.tick, max(0.02, left)) if self._leading else self.tick

    def _step(self) -> None:
        failpoints.hit("election.step")
        coordinator = self._coordinator
        if coordinator is None:
            return
        if self._lock is not None and not self.is_leader:
            self._demote("its lease ran out unrenewed")
            self._drop_lock()
        if not coordinator.is_started:
            coordinator.start(start_heart=False)  # the ticks beat
            self._joined = False
        elif self._joined and not self._still_member(coordinator):
            self._joined = False
        if not self._joined:
            from tooz import coordination

            # a member of this id already there is this one, joined before
            # the backend or the connection went away
            with contextlib.suppress(coordination.MemberAlreadyExist):
                coordinator.join_group_create(self._group, capabilities=self._caps())
            self._joined = True
            LOG.info("election %s: %s is a candidate", self.role, self.member_id)
        sent = time.monotonic()
        coordinator.heartbeat()  # membership (Redis) or the session's life
        if self._lock is not None:
            # Redis: a new expiry; ZooKeeper: the lock node is read back
            renew = getattr(self._lock, "heartbeat", None)
            if (renew is None or renew()) and self._lock.is_still_owner():
                self._renewed(sent)
            elif not self.is_leader:
                self._demote("the lock is no longer held")
                self._drop_lock()
        else:
            lock = coordinator.get_lock(self._lock_name)
            if lock.acquire(blocking=False):
                self._lock = lock
                self._renewed(sent)

    def _renewed(self, sent: float) -> None:
        if self._stopping.is_set():
            return
        self._lease_until = sent + self.timeout * (1 - MARGIN)
        with self._elected:
            if self._leading:
                return
            self._leading = True
            self._since = time.time()
            self.elections += 1
            self._elected.notify_all()
        LOG.info("election %s: %s leads", self.role, self.member_id)
        self._tell_members(True)
        self._call(self._on_elected, "on_elected")

    def _demote(self, why: str) -> None:
        """No longer lead (the lease already says so): tell, once."""
        with self._mutex:
            if not self._leading:
                return
            self._leading = False
            self.revocations += 1
        LOG.log(
            logging.INFO if why == STOPPED else logging.WARNING,
            "election %s: %s no longer leads: %s",
            self.role,
            self.member_id,
            why,
        )
        self._call(self._on_revoked, "on_revoked")

    def _drop_lock(self) -> None:
        """Give the lock up (a standby gets it at its next try) and say so
        in the group; best effort: an unrenewed lock lapses by itself."""
        lock, self._lock = self._lock, None
        if lock is None:
            return
        try:
            lock.release()
        except Exception as exc:
            LOG.debug("election %s: releasing the lock: %s", self.role, exc)
        self._tell_members(False)

    def _caps(self) -> dict[str, float]:
        """What this member says of itself in the group."""
        return {LEADER_SINCE: self._since} if self._leading else {}

    def _still_member(self, coordinator: Any) -> bool:
        """Whether the group still holds this member.  A ZooKeeper session
        that expired while the backend was out of reach took the member's
        node with it (a Redis membership lapses the same way), although the
        client connected again: the member joins again at the next tick, so
        that the group and the operator's view see it (and see it lead)."""
        from tooz import coordination

        try:
            coordinator.get_member_capabilities(
                self._group, self.member_id.encode()
            ).get()
        except (coordination.MemberNotJoined, coordination.GroupNotCreated):
            LOG.warning(
                "election %s: %s was dropped from the group by %s; joining again",
                self.role,
                self.member_id,
                describe_url(self.backend_url),
            )
            return False
        return True

    def _tell_members(self, leading: bool) -> None:
        coordinator = self._coordinator
        if coordinator is None or not self._joined:
            return
        caps = {LEADER_SINCE: self._since} if leading else {}
        try:
            coordinator.update_capabilities(self._group, caps).get()
        except Exception as exc:
            LOG.debug("election %s: capabilities: %s", self.role, exc)

    def _call(self, callback: Callable[[], object] | None, name: str) -> None:
        if callback is None:
            return
        try:
            callback()
        except loops.FATAL:
            raise
        except BaseException:
            LOG.exception("election %s: %s failed", self.role, name)


__all__ = [
    "DEFAULT_TIMEOUT",
    "Election",
    "ElectionError",
    "default_member_id",
    "describe_url",
    "leader_of",
]
