"""Server processes: free ports, start, pid records, readiness, stop.

A server is only ever signalled through its record (pid plus the process
start time read from /proc, so a recycled pid is never hit), never by name.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from . import layout


class DevcloudError(Exception):
    """A failure reported to the user as a message, without a traceback."""


# ------------------------------------------------------------ PostgreSQL


def run_sql(python: Path, url: str, statements: list[str]) -> str | None:
    """Run statements (autocommit) at ``url`` with a virtualenv's Python
    (SQLAlchemy and psycopg2 are there, not here); what PostgreSQL said, if
    it refused."""
    code = (
        "import sys, sqlalchemy as sa\n"
        "e = sa.create_engine(sys.argv[1], isolation_level='AUTOCOMMIT')\n"
        "with e.connect() as c:\n"
        "    for s in sys.argv[2:]:\n"
        "        c.exec_driver_sql(s)\n"
    )
    res = subprocess.run(
        [str(python), "-c", code, url, *statements], capture_output=True, text=True
    )
    return res.stderr[-1500:] if res.returncode != 0 else None


# ------------------------------------------------------------------- ports


def free_udp_port() -> int:
    """A UDP port that the kernel reports free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports that the kernel reports free right now."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


# --------------------------------------------------------------- /proc


def _stat_fields(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # fields after "(comm)": state is field 3, ppid 4, starttime 22
    return stat[stat.rindex(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """Start time of a live (not zombie) process, or None."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def children_of(pid: int) -> list[int]:
    kids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None and int(fields[1]) == pid:
                kids.append(int(entry.name))
    return kids


def rss_kib(pid: int) -> int:
    """Resident memory of a process and its children, in KiB."""
    total = 0
    for p in [pid, *children_of(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


# ---------------------------------------------------------------- records


@dataclass
class Record:
    name: str
    pid: int
    ticks: int
    port: int
    log: str

    def alive(self) -> bool:
        return start_ticks(self.pid) == self.ticks


def load_records() -> dict[str, Record]:
    try:
        raw = json.loads(layout.RECORDS.read_text())
    except (OSError, ValueError):
        return {}
    # Ignore fields a newer or older devcloud may have written: down must work.
    known = {f.name for f in fields(Record)}
    return {
        name: Record(**{k: v for k, v in rec.items() if k in known})
        for name, rec in raw.items()
    }


def save_records(records: dict[str, Record]) -> None:
    layout.RECORDS.parent.mkdir(parents=True, exist_ok=True)
    tmp = layout.RECORDS.with_suffix(".tmp")
    tmp.write_text(json.dumps({n: asdict(r) for n, r in records.items()}, indent=1))
    tmp.replace(layout.RECORDS)


def server_env(**extra: str) -> dict[str, str]:
    """The caller's environment without anything that would leak into the
    servers (another virtualenv, OS_* cloud settings)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OS_", "PYTHON", "VIRTUAL_ENV"))
    }
    env["PATH"] = f"{layout.VENV / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


@dataclass
class Started:
    """A server this run started, with its Popen handle for liveness."""

    record: Record
    proc: subprocess.Popen = field(repr=False)


def access_log(name: str) -> list[str]:
    """gunicorn options logging each request of server ``name`` (method,
    path, status, milliseconds) to ``LOGS/name-access.log``: what a test
    run asked of it, and how long each took."""
    log = layout.LOGS / f"{name}-access.log"
    return [
        "--access-logfile",
        str(log),
        "--access-logformat",
        "%(m)s %(U)s %(s)s %(M)s",
    ]


def spawn(
    name: str,
    argv: list[str],
    *,
    port: int,
    records: dict[str, Record],
    env: dict[str, str] | None = None,
) -> Started:
    """Start one server in its own session, logging to ``LOGS/name.log``.

    A busy port is an error: eventlet servers set SO_REUSEPORT and would
    silently share the port with whatever holds it.
    """
    if port_in_use(port):
        raise DevcloudError(f"{name}: port {port} is already in use")
    log = layout.LOGS / f"{name}.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv,
            cwd=layout.STATE,
            env=env or server_env(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    record = Record(name, proc.pid, start_ticks(proc.pid) or 0, port, str(log))
    records[name] = record
    save_records(records)
    return Started(record, proc)


class Step:
    """A one-shot command run in the background, logging to LOGS/name.log."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str]):
        self.name = name
        self.log = layout.LOGS / f"{name}.log"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                argv,
                cwd=layout.STATE,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def finish(self, timeout: float = 300) -> None:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise DevcloudError(
                f"{self.name} timed out after {timeout:.0f} s"
            ) from None
        if code != 0:
            raise DevcloudError(
                f"{self.name} failed (exit {code}); log {self.log}:\n{tail(self.log)}"
            )

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def tail(path: Path | str, lines: int = 30) -> str:
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {path})"
    return "\n".join("    | " + line for line in text[-lines:])


# -------------------------------------------------------------- readiness


@dataclass
class Check:
    """A readiness probe for a server made of one or more processes."""

    name: str
    started: list[Started]
    probe: Callable[[], bool]
    error: str = ""


def wait_ready(
    checks: list[Check], timeout: float, ready_at: dict[str, float] | None = None
) -> None:
    """Poll every probe until all pass; ``ready_at`` gets when each did
    (``time.monotonic()``).

    Fails fast, with the tail of its log, when a process of a check exits.
    """
    t0 = time.monotonic()
    pending = list(checks)
    while pending:
        for check in list(pending):
            for s in check.started:
                if s.proc.poll() is not None:
                    raise DevcloudError(
                        f"{s.record.name} exited with code {s.proc.returncode} during "
                        f"start-up; log {s.record.log}:\n{tail(s.record.log)}"
                    )
            try:
                ok = check.probe()
            except Exception as err:  # connection refused, 5xx, ...
                ok, check.error = False, repr(err)
            if ok:
                pending.remove(check)
                if ready_at is not None:
                    ready_at[check.name] = time.monotonic()
        if pending and time.monotonic() - t0 > timeout:
            logs = "\n".join(
                f"log {s.record.log}:\n{tail(s.record.log)}"
                for c in pending
                for s in c.started
            )
            names = ", ".join(c.name for c in pending)
            errors = "; ".join(c.error for c in pending) or "none"
            raise DevcloudError(
                f"not ready after {timeout:.0f} s: {names} (last error: {errors})\n"
                + logs
            )
        if pending:
            time.sleep(0.1)


# ------------------------------------------------------------------- stop


def stop(records: dict[str, Record], timeout: float = 20.0) -> list[str]:
    """SIGTERM every live recorded server at once, wait, then SIGKILL what is
    left (the recorded processes and the children they had). Returns the
    names that needed SIGKILL."""
    live = [r for r in records.values() if r.alive()]
    targets: dict[int, tuple[str, int]] = {}
    for rec in live:
        targets[rec.pid] = (rec.name, rec.ticks)
        for kid in children_of(rec.pid):
            ticks = start_ticks(kid)
            if ticks is not None:
                targets[kid] = (rec.name, ticks)
    for rec in live:
        try:
            os.kill(rec.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    def remaining() -> dict[int, str]:
        return {
            pid: name
            for pid, (name, ticks) in targets.items()
            if start_ticks(pid) == ticks
        }

    deadline = time.monotonic() + timeout
    while remaining() and time.monotonic() < deadline:
        time.sleep(0.05)
    killed = remaining()
    for pid in killed:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return sorted(set(killed.values()))
