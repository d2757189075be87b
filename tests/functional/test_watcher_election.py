"""One signal watcher among runner processes sharing a PostgreSQL database,
elected on the dev cloud's Redis or ZooKeeper (``[coordination]``): the
standby does not watch, a paused leader is replaced and does not watch once
it wakes, a killed leader is replaced within the election's bound, and the
signals posted meanwhile complete their deployments."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from swflows import conf as sw_conf
from swflows import states
from swflows.api import Swflows
from swflows.engine.election import Election
from tests.functional import db_fixtures, flowkit
from tests.functional.db_fixtures import *  # noqa: F403 (fixtures)
from tests.functional.flowkit import leftovers
from tests.functional.test_flows import script_config
from tests.functional.test_runner import FINAL, parked, put_signal, until

REPO = Path(__file__).resolve().parents[2]
LEADER_TIMEOUT = 3
SLACK = 2.0  # a loaded 2-core machine: scheduling, a cycle, the signal's flow


class RunnerProcess:
    """``watcher_child``: a runner in a process of its own."""

    def __init__(self, folder: Path, name: str, spec: Path) -> None:
        self.name = name
        self.log = folder / f"{name}.log"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.functional.watcher_child", str(spec)],
                cwd=REPO,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def states(self) -> list[tuple[float, bool, int]]:
        """(time, elected, cycles run) of each state line."""
        found = []
        for line in self.log.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[0] == "state":
                found.append((float(parts[1]), parts[2] == "1", int(parts[3])))
        return found

    def first(
        self, check: Callable[[tuple[float, bool, int]], bool], what: str
    ) -> tuple[float, bool, int]:
        def found() -> tuple[float, bool, int] | None:
            return next((s for s in self.states() if check(s)), None)

        return until(  # type: ignore[no-any-return]
            found, 60, f"{self.name}: {what}: {self.log.read_text()[-3000:]}"
        )

    def signal(self, signum: int) -> None:
        os.kill(self.proc.pid, signum)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture(params=("redis", "zookeeper"))
def backend_url(request: pytest.FixtureRequest, devcloud: dict[str, Any]) -> str:
    server = devcloud[request.param]
    return f"{request.param}://{server['host']}:{server['port']}"


@pytest.fixture
def setup(
    devcloud: dict[str, Any], tmp_path: Path, pg_url: str
) -> Iterator[dict[str, Any]]:
    path = flowkit.write_conf(devcloud, tmp_path / "swflows.conf", database=pg_url)
    database = {
        "table_prefix": f"t{uuid.uuid4().hex[:10]}_",
        "secret_key": db_fixtures.SECRET_KEY.decode(),
    }
    conf = sw_conf.get_conf(config_files=[str(path)])
    for name, value in database.items():
        conf.set_override(name, value, "database")
    made = Swflows.from_conf(conf, start=False)
    try:
        yield {"conf": path, "database": database, "sw": made}
    finally:
        made.close()
        made.store.close()


def test_one_watcher_across_processes(
    setup: dict[str, Any], backend_url: str, tmp_path: Path
) -> None:
    sw: Swflows = setup["sw"]
    config = script_config(sw)
    deps = [
        sw.deploy(str(uuid.uuid4()), config.id, timeout=180, wait=False)
        for _ in range(3)
    ]
    until(lambda: all(parked(sw, d.id) for d in deps), 60, "every flow to park")
    sw.close()  # its watcher, which watches alone, is gone: the flows wait
    spec = tmp_path / "spec.json"
    overrides = {
        **{f"database__{k}": v for k, v in setup["database"].items()},
        "coordination__backend_url": backend_url,
        "coordination__leader_timeout": LEADER_TIMEOUT,
    }
    spec.write_text(json.dumps({"conf": str(setup["conf"]), "overrides": overrides}))
    bound = Election(backend_url, "any", timeout=LEADER_TIMEOUT).handover_bound
    reader = Swflows.from_conf(sw.conf, start=False)

    def done(index: int) -> float:
        def complete() -> bool:
            return reader.show(deps[index].id).status == states.COMPLETE

        until(complete, 60, f"deployment {index} to complete")
        return time.time()

    first = RunnerProcess(tmp_path, "first", spec)
    second: RunnerProcess | None = None
    try:
        first.first(lambda s: s[1], "elected")
        second = RunnerProcess(tmp_path, "second", spec)
        standby = second.first(lambda s: True, "started")
        # the standby does not watch: the leader completes a signal alone
        put_signal(reader, deps[0].id, FINAL)
        done(0)
        time.sleep(0.5)
        assert [s for s in second.states() if s[1] or s[2]] == [], standby

        # paused past its lease: the standby watches, and completes the
        # signal posted meanwhile; the woken leader watches no more
        first.signal(signal.SIGSTOP)
        paused = time.time()
        put_signal(reader, deps[1].id, FINAL)
        took = second.first(lambda s: s[1], "elected")[0] - paused
        completed = done(1) - paused
        first.signal(signal.SIGCONT)
        woke = time.time()
        after = first.first(lambda s: s[0] > woke, "a state after waking")
        assert not after[1]
        time.sleep(1.0)
        assert {s[2] for s in first.states() if s[0] >= after[0]} == {after[2]}
        print(
            f"\n{backend_url.split(':')[0]}: paused leader replaced in {took:.2f} s,"
            f" the signal posted meanwhile completed in {completed:.2f} s"
        )
        assert took <= bound + SLACK

        # killed: the first takes the watch back within the bound
        second.signal(signal.SIGKILL)
        killed = time.time()
        put_signal(reader, deps[2].id, FINAL)
        took = first.first(lambda s: s[1] and s[0] > killed, "re-elected")[0] - killed
        completed = done(2) - killed
        print(
            f"{backend_url.split(':')[0]}: killed leader replaced in {took:.2f} s,"
            f" the signal posted meanwhile completed in {completed:.2f} s"
            f" (bound {bound:.1f} s)"
        )
        assert took <= bound + SLACK
    finally:
        for process in (first, second):
            if process is not None:
                process.stop()
        reader.close()
    cleaner = Swflows.from_conf(sw.conf)
    try:
        for dep in deps:
            cleaner.undeploy(dep.id)
        assert leftovers(cleaner, *(d.id for d in deps)) == {}
    finally:
        cleaner.close()
