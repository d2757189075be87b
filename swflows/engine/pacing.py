"""When the signal watcher looks next, and at which parked flows.

A *full look* reads every parked flow; one starts ``poll_interval`` after
the last one started (:meth:`Watcher._delay`), or at once when asked
(:meth:`Pacing.wake`: a signal pushed, a flow cancelled).

A flow that parks asks for a look soon (:meth:`Pacing.wake_soon`) when
its signal may be there already: its action ended before the park, or
the flow was resumed (:func:`swflows.engine.driving.still_waiting`).
Before the next full look is due, that look
is a *fresh look*: it reads only the flows parked since the last look, so
a burst of launches beside thousands of waiting flows costs each park a
share of one listing and the reading of a few rows, not of them all.  The
flows parking while a look is awaited share it; the next full look still
reads them all.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

#: the least rest between two cycles, as a fraction of the poll interval
MIN_REST = 0.25
#: at most this long (seconds) after a flow parks, a look: flows parking
#: within it (a burst of launches) share that look and its listing.  A park
#: asks for a look at once if the last look ended that long ago, else when
#: it will have: a burst costs a listing per PARKED_LOOK_WITHIN, however
#: cheap each look is
PARKED_LOOK_WITHIN = 0.1
#: a fresh look reads at most this many flows; more parked since the last
#: look, and it reads them all
FRESH_LOOK_MOST = 500


class Pacing:
    """The watcher's rests and what its next look is to read."""

    def __init__(self, conf: Any) -> None:
        self._conf = conf
        self._wake = threading.Event()
        self._lock = threading.Lock()
        #: a look asked for now, and the latest time one was asked for by;
        #: taken by :meth:`sleep`
        self._asked_now = False
        self._asked_by: float | None = None
        #: a full look asked for (:meth:`wake`)
        self._full_asked = False
        #: flows parked since the last look
        self._fresh: set[str] = set()
        #: when the last look ended (monotonic clock)
        self.ended = -math.inf
        #: when the next full look is due (monotonic clock)
        self.full_due = -math.inf

    def wake(self) -> None:
        """A full look now: a signal was pushed, a flow cancelled."""
        with self._lock:
            self._asked_now = True
            self._full_asked = True
        self._wake.set()

    def wake_soon(self, flow_id: str | None = None) -> None:
        """A look soon: ``flow_id`` parked, and its signal may be there.

        At once, unless the last look ended less than
        :data:`PARKED_LOOK_WITHIN` ago (a quarter of the poll interval, if
        less): then once it is that far behind.  Without ``flow_id``, a full
        look."""
        within = min(PARKED_LOOK_WITHIN, float(self._conf.poll_interval) * MIN_REST)
        now = time.monotonic()
        with self._lock:
            if flow_id is None:
                self._full_asked = True
            else:
                self._fresh.add(flow_id)
            due = self.ended + within
            if due <= now:
                self._asked_now = True
            elif self._asked_by is None:
                self._asked_by = due
        self._wake.set()

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``, or less if a look is asked for: at once
        (:meth:`wake`), or by when :meth:`wake_soon` asked."""
        deadline = time.monotonic() + seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._wake.wait(remaining):
                return
            self._wake.clear()
            with self._lock:
                now, self._asked_now = self._asked_now, False
                by, self._asked_by = self._asked_by, None
            if now or by is None:
                return
            deadline = min(deadline, by)

    def next_look(self) -> frozenset[str] | None:
        """The flows the look about to start is to read: ``None`` for every
        parked flow (a full look is due or was asked for, or no flow parked
        since the last look), else those parked since the last look."""
        with self._lock:
            fresh, self._fresh = self._fresh, set()
            full = (
                self._full_asked
                or not fresh
                or len(fresh) > FRESH_LOOK_MOST
                or time.monotonic() >= self.full_due
            )
            self._full_asked = False
        return None if full else frozenset(fresh)

    def forget_fresh(self) -> None:
        """A watcher standing by reads nothing: the flows parked meanwhile
        are the elected one's to look at."""
        with self._lock:
            self._fresh.clear()

    def looked(self, ended: float) -> None:
        """A look ended at ``ended`` (monotonic clock)."""
        with self._lock:
            self.ended = ended

    def rest_after_fresh(self, now: float) -> float:
        """The rest after a fresh look: until the next full look is due."""
        return max(0.0, self.full_due - now)


__all__ = ["FRESH_LOOK_MOST", "MIN_REST", "PARKED_LOOK_WITHIN", "Pacing"]
