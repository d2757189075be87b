"""One look at the store for every caller waiting for a flow that another
process drives to write its deployment's row.

A ``deploy(wait=False)`` whose flow a conductor drives returns once that
flow wrote the deployment's row.  Each such caller used to look for its row
on its own, ever less often; with many callers at once, a row written
just after a look waited for the next one, up to half a second later.
Here one thread of the instance looks for all of them in one statement
every :data:`LOOK_SECONDS` while any caller waits, and wakes each caller
whose row it saw at the generation it waits for.  The caller then reads
its row as before: the shared look only says when.  The thread ends once
nobody waits.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from typing import Final, Protocol

LOG = logging.getLogger(__name__)

#: seconds between two shared looks while callers wait
LOOK_SECONDS: Final = 0.05


class _Generations(Protocol):
    def generations(self, deployment_ids: list[str]) -> dict[str, int]: ...


class StartedLooks:
    """The shared look of one instance (see the module)."""

    def __init__(self, store: _Generations, seconds: float = LOOK_SECONDS) -> None:
        self._store = store
        self._seconds = seconds
        self._lock = threading.Lock()
        #: deployment id -> the waiters' (generation, event)
        self._waiting: dict[str, list[tuple[int, threading.Event]]] = {}
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def waiting(self, deployment_id: str, generation: int) -> Iterator[threading.Event]:
        """An event set each time a look saw ``deployment_id``'s row at
        ``generation`` or later, while the block runs."""
        entry = (generation, threading.Event())
        with self._lock:
            self._waiting.setdefault(deployment_id, []).append(entry)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="swflows-started-looks", daemon=True
                )
                self._thread.start()
        try:
            yield entry[1]
        finally:
            with self._lock:
                entries = self._waiting.get(deployment_id, [])
                if entry in entries:
                    entries.remove(entry)
                if not entries:
                    self._waiting.pop(deployment_id, None)

    def _run(self) -> None:
        while True:
            with self._lock:
                ids = list(self._waiting)
                if not ids:
                    self._thread = None
                    return
            try:
                seen = self._store.generations(ids)
            except Exception as exc:  # the callers' own looks go on meanwhile
                LOG.debug("looking for started deployments failed: %s", exc)
                seen = {}
            with self._lock:
                for deployment_id, generation in seen.items():
                    for wanted, event in self._waiting.get(deployment_id, []):
                        if generation >= wanted:
                            event.set()
            time.sleep(self._seconds)


__all__ = ["LOOK_SECONDS", "StartedLooks"]
