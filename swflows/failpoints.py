"""Failpoints: named places where a test makes a call fail or stall.

Code that writes outside its own process (the database, the cloud, a
channel) calls :func:`hit` with a stable name just before the write::

    failpoints.hit("metadata.publish")

Nothing happens unless a test armed that name.  In the test's own
process, :func:`armed` (or :func:`arm` / :func:`disarm`) sets what a hit
does: any callable, usually one of :func:`fail`, :func:`fail_times` or
:func:`stall`.  A process a test starts (a conductor, an agent) reads
``$SWFLOWS_FAILPOINTS`` once, at its first hit::

    SWFLOWS_FAILPOINTS="metadata.publish=fail:2;deployment.revert=stall:20"

Each entry is ``name=fail[:N]`` (raise :class:`FailpointError` the first
N hits, every hit without N) or ``name=stall:SECONDS`` (sleep, as a frozen
process would).  An unknown action is an error naming the entry.

Failpoints cost a dictionary lookup when nothing is armed; they are for
tests, and production code never arms one.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator

#: the environment variable a started process reads its failpoints from
ENV = "SWFLOWS_FAILPOINTS"

Action = Callable[[str], None]

_lock = threading.Lock()
_armed: dict[str, Action] = {}
_hits: dict[str, int] = {}
_env_read = False


class FailpointError(Exception):
    """Raised by a failpoint armed to fail."""

    def __init__(self, name: str) -> None:
        super().__init__(f"failpoint {name} fired")
        self.name = name


def hit(name: str) -> None:
    """Run what a test armed at ``name``; nothing when none is armed."""
    if not _env_read:
        _read_env()
    action = _armed.get(name)
    with _lock:
        _hits[name] = _hits.get(name, 0) + 1
    if action is not None:
        action(name)


def hits(name: str) -> int:
    """How many times ``name`` was reached in this process."""
    with _lock:
        return _hits.get(name, 0)


def arm(name: str, action: Action) -> None:
    _armed[name] = action


def disarm(name: str) -> None:
    _armed.pop(name, None)


@contextlib.contextmanager
def armed(name: str, action: Action) -> Iterator[None]:
    """``action`` runs at every hit of ``name`` inside the block."""
    arm(name, action)
    try:
        yield
    finally:
        disarm(name)


def fail(exc: BaseException | Callable[[], BaseException] | None = None) -> Action:
    """Raise at every hit: ``exc`` (an instance, or a callable making one),
    or :class:`FailpointError`."""
    return fail_times(-1, exc)


def fail_times(
    count: int, exc: BaseException | Callable[[], BaseException] | None = None
) -> Action:
    """Raise at the first ``count`` hits (every hit if negative), then
    let the call through."""
    left = [count]

    def action(name: str) -> None:
        with _lock:
            if left[0] == 0:
                return
            left[0] -= 1
        if exc is None:
            raise FailpointError(name)
        raise exc() if callable(exc) else exc

    return action


def stall(seconds: float | None = None, until: threading.Event | None = None) -> Action:
    """Block at every hit, for ``seconds`` or until ``until`` is set (as a
    process frozen by SIGSTOP would)."""

    def action(name: str) -> None:
        if until is not None:
            until.wait(seconds)
        elif seconds is not None:
            time.sleep(seconds)

    return action


def parse(spec: str) -> dict[str, Action]:
    """Read ``name=fail[:N];name=stall:SECONDS`` (see the module)."""
    found: dict[str, Action] = {}
    for entry in filter(None, (part.strip() for part in spec.split(";"))):
        name, sep, what = entry.partition("=")
        kind, _, arg = what.partition(":")
        try:
            if not sep or not name:
                raise ValueError("no name=")
            if kind == "fail":
                found[name] = fail_times(int(arg) if arg else -1)
            elif kind == "stall":
                found[name] = stall(float(arg))
            else:
                raise ValueError(f"unknown action {kind!r}")
        except ValueError as exc:
            raise ValueError(f"{ENV}: bad entry {entry!r}: {exc}") from None
    return found


def _read_env() -> None:
    global _env_read
    with _lock:
        if _env_read:
            return
        _env_read = True
    spec = os.environ.get(ENV, "")
    if spec:
        _armed.update(parse(spec))


__all__ = [
    "ENV",
    "FailpointError",
    "arm",
    "armed",
    "disarm",
    "fail",
    "fail_times",
    "hit",
    "hits",
    "parse",
    "stall",
]
