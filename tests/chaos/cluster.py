"""The soak's processes: conductors and watcher standbys, each with a log
of its own, signalled, restarted in their slot and looked through at the
end for threads that died."""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from swflows.api import Swflows
from swflows.engine import conductor
from tests.functional import netfault
from tests.functional.netfault import FaultProxy
from tests.functional.test_jobboard import ROOT, Setup, owner_pid

#: a thread that died of an exception (Python's threading.excepthook); the
#: processes' log lines may run into it
THREAD_DIED = re.compile(r"Exception in thread (\S+?):")


def died_of(text: str) -> str:
    """The exception line that ends a traceback starting ``text``, among
    the other lines written meanwhile."""
    for line in text.splitlines()[1:]:
        if not line or line[0].isspace() or line.startswith(("Traceback", "swflows: ")):
            continue
        return THREAD_DIED.split(line)[0] or line
    return "?"


class Proc:
    """One slot of the cluster (``conductor-0``, ``standby-1``): the
    process running in it now, and every log it wrote."""

    def __init__(self, cluster: Cluster, role: str, index: int) -> None:
        self.cluster = cluster
        self.role = role
        self.name = f"{role}-{index}"
        self.logs: list[Path] = []
        self.popen: subprocess.Popen[str] | None = None
        self.pids: list[int] = []

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def start(self) -> None:
        log = self.cluster.folder / f"{self.name}.{len(self.logs)}.log"
        self.logs.append(log)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        if self.role == "conductor":
            argv = ["-m", "swflows.cli", "--config-file", str(self.cluster.conf)]
            argv.append("conductor")
        else:
            argv = ["-m", "tests.functional.watcher_child", str(self.cluster.spec)]
        with log.open("w") as out:
            self.popen = subprocess.Popen(
                [sys.executable, *argv],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
            )
        self.pids.append(self.popen.pid)
        self.cluster.setup.procs.append(self.popen)

    def wait_started(self, timeout: float = 300) -> None:
        """Until the conductor says it runs (a standby: its first state)."""
        mark = b"conductor " if self.role == "conductor" else b"state "
        deadline = time.monotonic() + timeout
        while mark not in self.logs[-1].read_bytes():
            assert self.popen is not None
            if self.popen.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.name} did not start: {self.logs[-1].read_text()[-3000:]}"
                )
            time.sleep(0.1)

    def signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def kill(self) -> None:
        assert self.popen is not None
        self.popen.send_signal(signal.SIGCONT)
        self.popen.kill()
        self.popen.wait(30)

    def deaths(self) -> list[tuple[Path, str, str]]:
        """(log, thread, exception) of each thread that died."""
        found = []
        for log in self.logs:
            text = log.read_text(errors="replace")
            for match in THREAD_DIED.finditer(text):
                found.append((log, match.group(1), died_of(text[match.end() :])))
        return found


class Cluster:
    """``conductors`` conductor processes and ``standbys`` runners whose
    watchers only stand in the election, on ``setup``'s configuration."""

    def __init__(
        self,
        setup: Setup,
        folder: Path,
        conductors: int,
        standbys: int,
        *,
        proxied: bool = True,
    ) -> None:
        self.setup = setup
        self.folder = folder
        #: the relays in front of the store and the board (``store``,
        #: ``board``): the cluster's processes reach both through them
        self.proxies: dict[str, FaultProxy] = {}
        self.conf = setup.conf_path
        if proxied:
            self.conf = folder / "cluster.conf"
            self.conf.touch(mode=0o600)
            self.conf.write_text(self._through_proxies(setup.conf_path.read_text()))
        self.spec = folder / "standby.json"
        self.spec.write_text(json.dumps({"conf": str(self.conf), "overrides": {}}))
        self.conductors = [Proc(self, "conductor", i) for i in range(conductors)]
        self.standbys = [Proc(self, "standby", i) for i in range(standbys)]

    def _through_proxies(self, text: str) -> str:
        """``text`` (a configuration file) with the store's and the board's
        URLs pointing at relays of their own."""
        lines, section = [], ""
        for line in text.splitlines():
            if line.startswith("["):
                section = line.strip("[] ")
            key, sep, value = line.partition(" = ")
            name = {
                ("database", "connection"): "store",
                ("jobboard", "backend_url"): "board",
            }.get((section, key.strip()))
            if sep and name:
                url, self.proxies[name] = netfault.through(value, name)
                line = f"{key}{sep}{url}"
            lines.append(line)
        missing = {"store", "board"} - set(self.proxies)
        assert not missing, f"no URL of the {missing} in {self.setup.conf_path}"
        return "\n".join(lines) + "\n"

    def close(self) -> None:
        for proxy in self.proxies.values():
            proxy.close()

    @property
    def procs(self) -> list[Proc]:
        return self.conductors + self.standbys

    def start(self) -> None:
        for proc in self.procs:
            proc.start()
        for proc in self.procs:
            proc.wait_started()

    def leader(self, sw: Swflows) -> Proc | None:
        """The process whose signal watcher is elected now, if one of ours."""
        found = conductor.active_watcher(sw.conf, sw.store)
        pid = owner_pid(found) if found.count(":") >= 2 else None
        return next((p for p in self.procs if p.popen and p.pid == pid), None)

    def busiest(self, sw: Swflows) -> Proc | None:
        """The conductor holding the most flows now (None: none holds one)."""
        held = collections.Counter(
            owner_pid(r.owner) for r in sw.list_flows() if r.owner
        )
        for pid, _ in held.most_common():
            found = next((p for p in self.conductors if p.popen and p.pid == pid), None)
            if found is not None:
                return found
        return None

    def alive(self) -> bool:
        return all(p.popen is not None and p.popen.poll() is None for p in self.procs)
