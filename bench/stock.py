"""TaskFlow's own conductor, the baseline of the conductors' drain.

A stock ``blocking`` or ``nonblocking`` conductor
(``taskflow.conductors.backends.fetch``) on a Redis board, with TaskFlow's
stock SQLAlchemy persistence, as TaskFlow's documentation sets them up:
no claim expiry, no fencing, its logbooks kept.  :mod:`bench.conductors`
starts it as a process of its own, as it does ``swflows conductor``::

    python -m bench.stock DATABASE_URL BOARD_URL KIND

``BOARD_URL`` is a swflows ``[jobboard] backend_url`` (``redis://...?
namespace=N``).  It prints ``conductor NAME`` once it is connected, and
stops on SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any

from taskflow.conductors import backends as conductor_backends
from taskflow.jobs import backends as job_backends
from taskflow.persistence import backends as persistence_backends

from swflows import stopping
from swflows.engine import jobboard

#: the stock conductors the bench can start
KINDS = ("blocking", "nonblocking")


def persistence(database: str) -> Any:
    """TaskFlow's stock SQLAlchemy backend on ``database`` (a URL)."""
    return persistence_backends.fetch({"connection": database})


def upgrade(database: str) -> None:
    """Create the stock backend's tables (its own migrations), once."""
    backend = persistence(database)
    try:
        with contextlib.closing(backend.get_connection()) as conn:
            conn.upgrade()
    finally:
        backend.close()


def board(url: str, backend: Any, name: str = "stock") -> Any:
    """TaskFlow's Redis board at ``url``, connected, on ``backend``."""
    found = job_backends.fetch(name, jobboard.board_conf(url), persistence=backend)
    found.connect()
    return found


def main(argv: list[str]) -> int:
    database, url, kind = argv
    if kind not in KINDS:
        raise SystemExit(f"{kind!r} is not one of {', '.join(KINDS)}")
    backend = persistence(database)
    jobs = board(url, backend)
    name = f"stock-{kind}-{os.getpid()}"
    conductor = conductor_backends.fetch(kind, name, jobs, persistence=backend)
    # the conductor's stop sets an event: never from the handler itself
    stop = threading.Event()
    stopping.stop_on_signals(stop, (signal.SIGTERM,))
    threading.Thread(
        target=lambda: stop.wait() and conductor.stop(), daemon=True
    ).start()
    print(f"conductor {name}", flush=True)
    try:
        conductor.run()
    finally:
        jobs.close()
        backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
