"""The agent's state on persistent disk: markers, pending signals, a lock.

For each derived-config id the agent keeps at most two small files:

* ``pending/<id>.json``, the final signal of a hook that finished, kept
  until the signal is delivered (Heat's ``<id>.notify.json``);
* ``deployed/<id>.json``, the marker, written only once the hook finished
  **and** its signal was delivered.

So an agent killed while a hook runs finds neither and runs the hook
again; killed after the hook but before the signal landed, it sends the
saved signal without running the hook again.  (Heat's agent writes its
marker before the hook runs, so a crash mid-hook leaves it never run and
never signalled.)  Files are written to a temporary name, synced, then
renamed, so a crash never leaves half a marker.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import hashlib
import json
import logging
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from swflows import exceptions

LOG = logging.getLogger(__name__)

DEPLOYED: Final = "deployed"
PENDING: Final = "pending"
SCRIPTS: Final = "scripts"
OUTPUTS: Final = "outputs"
WORK: Final = "work"
LOCK: Final = "agent.lock"

_SAFE_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def file_name(ident: str) -> str:
    """A file name for an id: the id itself when safe, else a digest of it."""
    if _SAFE_NAME.match(ident) and ".." not in ident:
        return ident
    return "x-" + hashlib.sha256(ident.encode("utf-8", "surrogatepass")).hexdigest()


class AgentLocked(exceptions.SwflowsError):
    """Another agent already runs on this state directory."""


class StateDir:
    """One agent's state directory (created 0700)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"StateDir({str(self.root)!r})"

    def prepare(self) -> None:
        for sub in ("", DEPLOYED, PENDING, SCRIPTS, OUTPUTS, WORK):
            path = self.root / sub
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the directory's lock; AgentLocked if another agent has it.

        An flock dies with its process, so a killed agent never leaves it.
        """
        fd = os.open(self.root / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EWOULDBLOCK, errno.EACCES):
                    raise AgentLocked(
                        f"another swflows-agent runs on {self.root}"
                    ) from None
                raise
            yield
        finally:
            os.close(fd)

    # -- markers ------------------------------------------------------
    def marker_path(self, ident: str) -> Path:
        return self.root / DEPLOYED / f"{file_name(ident)}.json"

    def is_deployed(self, ident: str) -> bool:
        return self.marker_path(ident).exists()

    def mark_deployed(self, ident: str, record: Mapping[str, Any]) -> None:
        body = {"id": ident, "deployed_at": _now(), **record}
        write_atomic(self.marker_path(ident), json.dumps(body, sort_keys=True))

    def deployed(self) -> list[str]:
        """The ids of every marker (for operators and tests)."""
        found = []
        for path in sorted((self.root / DEPLOYED).glob("*.json")):
            try:
                found.append(str(json.loads(path.read_text())["id"]))
            except (OSError, ValueError, KeyError, TypeError):
                LOG.warning("unreadable marker %s", path)
        return found

    # -- pending signals ----------------------------------------------
    def pending_path(self, ident: str) -> Path:
        return self.root / PENDING / f"{file_name(ident)}.json"

    def pending(self, ident: str) -> dict[str, Any] | None:
        """The saved final signal of ``ident``, or None.

        An unreadable file (it cannot be half written, but a disk can
        fail) is dropped: the hook then runs again.
        """
        path = self.pending_path(ident)
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        try:
            body = json.loads(text)
            if isinstance(body, dict) and isinstance(body.get("payload"), dict):
                return dict(body["payload"])
        except ValueError:
            pass
        LOG.warning("dropping unreadable pending signal %s", path)
        path.unlink(missing_ok=True)
        return None

    def save_pending(self, ident: str, payload: Mapping[str, Any]) -> None:
        write_atomic(
            self.pending_path(ident),
            json.dumps({"id": ident, "payload": dict(payload)}),
        )

    def clear_pending(self, ident: str) -> None:
        self.pending_path(ident).unlink(missing_ok=True)

    def sweep(self) -> int:
        """Remove pending signals whose deployment is marked; return how many."""
        removed = 0
        for path in (self.root / PENDING).glob("*.json"):
            if (self.root / DEPLOYED / path.name).exists():
                path.unlink(missing_ok=True)
                removed += 1
        for path in (self.root / PENDING).glob(".*.tmp"):
            path.unlink(missing_ok=True)
        for path in (self.root / DEPLOYED).glob(".*.tmp"):
            path.unlink(missing_ok=True)
        return removed

    # -- working files of hooks ---------------------------------------
    def script_path(self, ident: str) -> Path:
        return self.root / SCRIPTS / file_name(ident)

    def outputs_path(self, ident: str) -> Path:
        return self.root / OUTPUTS / file_name(ident)

    def work_path(self, ident: str, suffix: str) -> Path:
        return self.root / WORK / f"{file_name(ident)}.{suffix}"


def write_atomic(path: Path, text: str, mode: int = 0o600) -> None:
    """Write ``text`` to ``path`` so that a crash leaves the old file or the new."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _sync_dir(path.parent)


def _sync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
