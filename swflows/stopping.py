"""Stopping a long-running process on SIGTERM and the like.

A Python signal handler runs in the main thread between two bytecodes,
wherever that thread happens to be, including inside
:meth:`threading.Event.wait` while it holds the event's own lock.  A handler
that sets the event there waits for a lock its own thread holds, and the
process never stops.  So the handler here only writes the signal's number to
a pipe (no lock on the way), and a thread of its own reads the pipe and sets
the event.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterable
from types import FrameType

__all__ = ["stop_on_signals"]


def stop_on_signals(
    stop: threading.Event,
    signums: Iterable[int] = (signal.SIGTERM, signal.SIGINT),
    *,
    log: logging.Logger | None = None,
) -> None:
    """Set ``stop`` when one of ``signums`` arrives (main thread only).

    With ``log``, each signal is logged at INFO ("signal 15: stopping"),
    from the relaying thread, never from inside the handler.
    """
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)

    def relay() -> None:
        while True:
            try:
                data = os.read(read_fd, 64)
            except InterruptedError:  # pragma: no cover - retried by Python
                continue
            if not data:
                return
            for signum in data:
                if log is not None:
                    log.info("signal %d: stopping", signum)
                stop.set()

    def handler(signum: int, _frame: FrameType | None) -> None:
        try:
            os.write(write_fd, bytes([signum & 0xFF]))
        except BlockingIOError:
            pass  # the pipe is full: the relay has been told many times over

    threading.Thread(target=relay, name="stop-on-signal", daemon=True).start()
    for signum in signums:
        signal.signal(signum, handler)
