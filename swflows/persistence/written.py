"""In-process wake-ups for a reader waiting until a row is written.

A caller that waits for a flow of its own process to write a row sleeps on
an event set by that write instead of reading the row again every few
milliseconds; a row written by another process is still found by reading.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class Written:
    """Events, by key, set when a row of that key has been committed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, list[threading.Event]] = {}

    @contextlib.contextmanager
    def awaiting(self, key: str) -> Iterator[threading.Event]:
        """An event set by every :meth:`wrote` of ``key`` while inside."""
        event = threading.Event()
        with self._lock:
            self._waiting.setdefault(key, []).append(event)
        try:
            yield event
        finally:
            with self._lock:
                events = self._waiting[key]
                events.remove(event)
                if not events:
                    del self._waiting[key]

    def wrote(self, key: str) -> None:
        with self._lock:
            events = list(self._waiting.get(key, ()))
        for event in events:
            event.set()


__all__ = ["Written"]
