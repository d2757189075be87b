"""Background loops that survive any one iteration's error, and show that
they are alive.

Every thread that loops in the background (a conductor's claiming and
claims' upkeep, a runner's leases and signal watcher, the watcher's
election and sweeper, the group driver) runs each iteration through
:meth:`Loop.run`.  Whatever one iteration raises is contained there,
:exc:`BaseException` subclasses included (a
:class:`~swflows.persistence.logbook.FlowFenced` met while stopping a flow
another process took over, a :class:`~swflows.engine.conductor.ClaimLost`),
except :exc:`KeyboardInterrupt` and :exc:`SystemExit`, which end the
process anyway.  A failure is logged once when a run of failures starts,
and once when the loop recovers; the iterations failing in between are
logged at DEBUG only.

Each loop records when its last iteration succeeded.  A loop is *stale*
when that is more than :data:`STALE_PERIODS` of its periods ago (and at
least :data:`STALE_MIN_SECONDS`), or when its thread ended while its owner
was not stopping.  A conductor announces its loops (:meth:`Liveness.report`)
and ``swflows conductor list`` names the stale ones (:func:`stale_in`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from swflows.engine import faults

LOG = logging.getLogger(__name__)

#: a loop whose last good iteration is older than this many periods is stale
STALE_PERIODS: Final = 3.0
#: ... and older than this many seconds (short periods jitter on a busy host)
STALE_MIN_SECONDS: Final = 10.0
#: what no loop contains: the process is being ended
FATAL: Final = (KeyboardInterrupt, SystemExit)


class Loop:
    """One background loop's health: its last good iteration, the failures
    in a row since, and whether its thread runs."""

    def __init__(self, name: str, every: float) -> None:
        self.name = name
        #: seconds expected between two iterations
        self.every = float(every)
        self.last_ok = time.time()
        self.failures = 0
        self.last_error = ""
        #: its thread is in its loop (False before it started, and after)
        self.running = False
        #: its thread ended while its owner was not stopping
        self.died = False
        #: not expected to iterate now (a standby watcher's sweeper)
        self.idle = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"Loop({self.name!r}, every={self.every:g}, failures={self.failures}, "
            f"running={self.running})"
        )

    def run(self, body: Callable[[], object]) -> bool:
        """One iteration: ``body()``; whether it succeeded.  Anything it
        raises but :data:`FATAL` is contained and logged once per run of
        failures."""
        try:
            body()
        except FATAL:
            raise
        except BaseException as exc:
            self.failed(exc)
            return False
        self.ok()
        return True

    def ok(self) -> None:
        """Record a good iteration (logged once after failures)."""
        with self._lock:
            failures, self.failures = self.failures, 0
            self.last_ok = time.time()
            self.last_error = ""
        if failures:
            LOG.info(
                "%s: running again after %d failed iterations", self.name, failures
            )

    def failed(self, exc: BaseException) -> None:
        """Record a failed iteration; only the first of a run is logged
        above DEBUG (with its traceback when it is not an outage)."""
        detail = faults.describe(exc)
        with self._lock:
            self.failures += 1
            first = self.failures == 1
            self.last_error = detail
        if first:
            LOG.warning(
                "%s: an iteration failed (contained; the loop goes on, and "
                "logs again once it recovers): %s",
                self.name,
                detail,
                exc_info=not faults.is_outage(exc),
            )
        else:
            LOG.debug(
                "%s: failed again (%d in a row): %s", self.name, self.failures, detail
            )

    def set_idle(self, idle: bool) -> None:
        """Say whether the loop is expected to iterate now; one that is
        again starts its staleness afresh."""
        with self._lock:
            if self.idle and not idle:
                self.last_ok = time.time()
            self.idle = idle

    @contextlib.contextmanager
    def running_in(self, stopping: Callable[[], bool]) -> Iterator[None]:
        """Mark the loop's thread as running for the block; a thread that
        leaves it while ``stopping()`` is false has died."""
        self.running, self.died = True, False
        try:
            yield
        finally:
            self.running = False
            if not stopping():
                self.died = True
                LOG.error("%s: its thread ended while its owner runs", self.name)

    def stale(self, now: float | None = None) -> bool:
        """Whether the loop stopped, or its last good iteration is too old."""
        return stale_entry(self.snapshot(), time.time() if now is None else now)

    def snapshot(self) -> dict[str, Any]:
        """What is announced of the loop (JSON)."""
        with self._lock:
            return {
                "ok": round(self.last_ok, 3),
                "every": self.every,
                "failures": self.failures,
                "error": self.last_error,
                "died": self.died,
                "idle": self.idle,
            }


class Liveness:
    """The loops of one runner (and of the conductor, the election and the
    group driver beside it), by name."""

    def __init__(self) -> None:
        self._loops: dict[str, Loop] = {}
        self._lock = threading.Lock()

    def loop(self, name: str, every: float) -> Loop:
        """The loop called ``name``, made at first ask (``every``: its
        period, updated on a later ask)."""
        with self._lock:
            found = self._loops.get(name)
            if found is None:
                found = self._loops[name] = Loop(name, every)
            else:
                found.every = float(every)
            return found

    def __getitem__(self, name: str) -> Loop:
        with self._lock:
            return self._loops[name]

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._loops

    def report(self) -> dict[str, dict[str, Any]]:
        """Every loop's :meth:`Loop.snapshot`, by name."""
        with self._lock:
            loops = list(self._loops.values())
        return {loop.name: loop.snapshot() for loop in loops}

    def stale(self, now: float | None = None) -> list[str]:
        """The names of the loops that are stale now."""
        return stale_in(self.report(), now)


def stale_entry(entry: Mapping[str, Any], now: float) -> bool:
    """Whether an announced loop (:meth:`Loop.snapshot`) is stale at ``now``."""
    if entry.get("died"):
        return True
    if entry.get("idle"):
        return False
    try:
        every = float(entry.get("every") or 0.0)
        last = float(entry.get("ok") or 0.0)
    except (TypeError, ValueError):
        return True
    return now - last > max(STALE_PERIODS * every, STALE_MIN_SECONDS)


def stale_in(
    report: Mapping[str, Mapping[str, Any]] | None, now: float | None = None
) -> list[str]:
    """The stale loops' names in an announced report, sorted."""
    when = time.time() if now is None else now
    return sorted(
        name for name, entry in (report or {}).items() if stale_entry(entry, when)
    )


def within(seconds: float, what: str, call: Callable[[], object]) -> bool:
    """Run ``call`` (a stop's last word to a backend: leave a group, retire
    from a board, disconnect), waiting for it at most ``seconds``.

    Clients of ZooKeeper and Redis wait without a bound for a backend out
    of reach; a process told to stop must stop all the same. Whether the
    call ended in time; it goes on in a daemon thread if not (the process
    ends without it: what it would have removed lapses with the session
    or the claim). What it raised is logged at DEBUG, never raised.
    """
    done = threading.Event()

    def run() -> None:
        try:
            call()
        except Exception as exc:
            LOG.debug("%s: %s", what, faults.describe(exc))
        finally:
            done.set()

    threading.Thread(target=run, name=f"swflows-stop-{what}", daemon=True).start()
    if done.wait(seconds):
        return True
    # a share of a deadline (1.99999 s) is told as the bound it was (2 s)
    LOG.warning(
        "%s: no answer within %g s; stopping without it", what, round(seconds, 1)
    )
    return False


__all__ = [
    "FATAL",
    "STALE_MIN_SECONDS",
    "STALE_PERIODS",
    "Liveness",
    "Loop",
    "stale_entry",
    "stale_in",
    "within",
]
