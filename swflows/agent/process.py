"""Running a hook's process: output to files, a time limit, a clean stop.

stdout and stderr go to files, not pipes, so a hook that writes a lot (or
leaves a background child holding its output open) can neither fill the
agent's memory nor hang it; only their ends are read back.  The hook runs
in its own session, so a time limit, a cancel or an agent stopping stops
its whole process group: SIGTERM, then SIGKILL to what is left of the
group after a grace period.  On Linux the hook is also killed when the agent dies (a
parent-death signal), so an agent restarted after a crash never runs a
hook twice at the same time.

A script written just before it runs can be refused by the kernel ("Text
file busy") while another thread's freshly forked child still holds the
file open for writing, until that child's own exec; the start is tried
again for a while (:data:`BUSY_RETRY_FOR`) rather than failing the hook.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import functools
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import tenacity

from swflows import exceptions

LOG = logging.getLogger(__name__)

#: seconds between SIGTERM and SIGKILL when a hook must stop
KILL_GRACE: Final = 10.0
_POLL: Final = 0.05
#: seconds a program refused as busy ("Text file busy") is tried again for
BUSY_RETRY_FOR: Final = 5.0
_PR_SET_PDEATHSIG: Final = 1


class Interrupted(exceptions.SwflowsError):
    """The agent is stopping; the hook was killed and must run again later."""


class Cancelled(exceptions.SwflowsError):
    """The hook's item was withdrawn (cancelled) while it ran; it was stopped.

    ``how`` says how its process group ended; the item must not run again.
    """

    def __init__(self, message: str, how: str = "") -> None:
        super().__init__(message)
        self.how = how


@dataclasses.dataclass(frozen=True)
class Finished:
    """How a hook's process ended, with the ends of its output."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def status_code(self) -> int:
        """The exit status as a shell reports it (128 + N when killed by N)."""
        if self.returncode < 0:
            return 128 - self.returncode
        return self.returncode


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    out_base: Path,
    stdin: bytes | None = None,
    timeout: float | None = None,
    stop: threading.Event | None = None,
    keep: int = 1 << 20,
    cwd: Path | None = None,
    cancel: threading.Event | None = None,
    grace: float = KILL_GRACE,
) -> Finished:
    """Run ``argv`` to its end and return how it ended.

    Output goes to ``out_base.stdout`` and ``out_base.stderr`` (removed
    afterwards); at most the last ``keep`` bytes of each are returned.  Past
    ``timeout`` seconds the process group is stopped and ``timed_out`` set.
    When ``stop`` is set the process group is stopped and Interrupted
    raised; when ``cancel`` is set, Cancelled.  Stopping is SIGTERM, then
    SIGKILL once ``grace`` seconds passed with a process of the group left.
    OSError when the program cannot be started at all.
    """
    paths = {
        name: out_base.with_name(f"{out_base.name}.{name}")
        for name in ("stdin", "stdout", "stderr")
    }
    try:
        with contextlib.ExitStack() as stack:
            stdin_file: Any = subprocess.DEVNULL
            if stdin is not None:
                paths["stdin"].write_bytes(stdin)
                os.chmod(paths["stdin"], 0o600)
                stdin_file = stack.enter_context(paths["stdin"].open("rb"))
            out = stack.enter_context(_open_new(paths["stdout"]))
            err = stack.enter_context(_open_new(paths["stderr"]))
            proc = _start(
                functools.partial(
                    subprocess.Popen,
                    list(argv),
                    stdin=stdin_file,
                    stdout=out,
                    stderr=err,
                    env=dict(env),
                    cwd=cwd,
                    start_new_session=True,
                    close_fds=True,
                    preexec_fn=_die_with_parent(os.getpid()),
                )
            )
            timed_out = _wait(proc, timeout, stop, cancel, grace)
        return Finished(
            proc.returncode,
            _tail(paths["stdout"], keep),
            _tail(paths["stderr"], keep),
            timed_out,
        )
    finally:
        for path in paths.values():
            path.unlink(missing_ok=True)


def _wait(
    proc: subprocess.Popen[bytes],
    timeout: float | None,
    stop: threading.Event | None,
    cancel: threading.Event | None,
    grace: float,
) -> bool:
    deadline = None if not timeout else time.monotonic() + timeout
    while True:
        try:
            proc.wait(_POLL)
            return False
        except subprocess.TimeoutExpired:
            pass
        if stop is not None and stop.is_set():
            _kill_group(proc, grace)
            raise Interrupted("the agent is stopping; the hook was killed")
        if cancel is not None and cancel.is_set():
            how = _kill_group(proc, grace)
            raise Cancelled(f"the hook was stopped ({how})", how)
        if deadline is not None and time.monotonic() >= deadline:
            _kill_group(proc, grace)
            return True


def _kill_group(proc: subprocess.Popen[bytes], grace: float = KILL_GRACE) -> str:
    """SIGTERM the hook's process group, then SIGKILL what is left of it
    after ``grace`` seconds; says which it took."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while _group_alive(proc) and time.monotonic() < deadline:
        time.sleep(_POLL)
    if not _group_alive(proc):
        try:  # the leader may have died since it was last polled
            proc.wait(max(_POLL, deadline - time.monotonic()))
            return "SIGTERM"
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return f"SIGTERM, then SIGKILL after {grace:g} s"


def _group_alive(proc: subprocess.Popen[bytes]) -> bool:
    """Whether a live process of the hook's group is left.

    Zombies do not count: the leader is reaped here, but its orphaned
    children are reaped by init, whenever it gets to them.
    """
    proc.poll()
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc_fs = Path("/proc")
    if not (proc_fs / "self" / "stat").exists():
        return True
    for entry in proc_fs.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and fields[2] == str(proc.pid) and fields[0] != "Z":
            return True
    return False


def _start(popen: Any) -> subprocess.Popen[bytes]:
    """``popen()``, tried again while the program is busy (see the module's
    docstring) for at most :data:`BUSY_RETRY_FOR` seconds."""
    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(
            lambda exc: isinstance(exc, OSError) and exc.errno == errno.ETXTBSY
        ),
        stop=tenacity.stop_after_delay(BUSY_RETRY_FOR),
        wait=tenacity.wait_exponential(multiplier=_POLL / 5, max=_POLL),
        reraise=True,
    )
    started: subprocess.Popen[bytes] = retrying(popen)
    return started


def _open_new(path: Path) -> Any:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    return os.fdopen(fd, "wb")


def _tail(path: Path, keep: int) -> str:
    """The last ``keep`` bytes of a file, as text."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - keep)
            handle.seek(start)
            data = handle.read()
    except FileNotFoundError:
        return ""
    text = data.decode("utf-8", errors="replace")
    if start:
        # a cut through a multi-byte character leaves replacement characters
        text = text.lstrip("\ufffd")
    return text


@functools.cache
def _prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _die_with_parent(parent: int) -> Any:
    """A preexec function asking Linux to SIGKILL the hook when the agent dies."""
    prctl = _prctl()
    if prctl is None:
        return None

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the agent died before prctl took hold
            os._exit(137)

    return preexec
