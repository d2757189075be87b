"""PostgreSQL stops for 30 s while deployments wait and run: none is lost.

A private PostgreSQL cluster (initdb and pg_ctl in a temporary folder, on a
free port) is stopped with ``pg_ctl stop -m fast`` while some deployments
wait for their signal and others are being launched, and started again
30 s later.  The servers (test agents on the dev cloud's Swift) keep
answering meanwhile: their signals land in Swift while the database is
down.  Afterwards every deployment completes and no flow is left behind.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from swflows import conf as sw_conf
from swflows import failpoints, metadata, model, states
from swflows.api import Swflows
from tests.functional import flowkit
from tests.functional.db_fixtures import SECRET_KEY
from tests.functional.fakeserver import FakeServer, ok_responder
from tests.functional.test_flows import script_config

pytestmark = pytest.mark.xdist_group("db-outage")

OUTAGE_SECONDS = 30


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not found:
        pytest.fail("PostgreSQL's server (pg_ctl) is not installed", pytrace=False)
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Cluster:
    """A PostgreSQL cluster of the test's own, run as user postgres."""

    def __init__(self, folder: Path) -> None:
        self.bin = _pg_bin()
        self.folder = folder
        self.data = folder / "data"
        self.port = _free_port()
        self.url = f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        command = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def init(self) -> None:
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.folder, owner.pw_uid, owner.pw_gid)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres")

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c max_connections=200"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", options,
            "-l", str(self.folder / "log"), "-w", "start",
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    folder = Path(tempfile.mkdtemp(prefix="swflows-pg-"))
    made = Cluster(folder)
    try:
        made.init()
        made.start()
        yield made
    finally:
        with contextlib.suppress(Exception):
            made.stop("immediate")
        shutil.rmtree(folder, ignore_errors=True)


class CachingServer(FakeServer):
    """A test agent that, as a real one, needs swflows' database only once:
    it keeps its metadata URL, so it goes on through the outage."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.metadata_url: str | None = None

    def read_metadata(self) -> dict[str, Any]:
        if self.metadata_url is None:
            server = metadata.find_server(self.sw.services, self.server_id)
            if server is None or server.channel is None:
                return {}  # not published yet
            collect = server.channel["os-collect-config"]
            self.metadata_url = collect["request"]["metadata_url"]
        resp = requests.get(self.metadata_url, timeout=10)
        resp.raise_for_status()
        return dict(resp.json())


def test_a_database_outage_loses_no_flow(
    devcloud: dict[str, Any],
    tmp_path: Path,
    cluster: Cluster,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="swflows")
    path = flowkit.write_conf(devcloud, tmp_path / "swflows.conf", database=cluster.url)
    conf = sw_conf.get_conf(config_files=[str(path)])
    conf.set_override("secret_key", SECRET_KEY.decode(), "database")
    conf.set_override("lease_seconds", 6.0, "runner")
    sw = Swflows.from_conf(conf)
    try:
        config = script_config(sw)
        with contextlib.ExitStack() as stack:
            # these wait for their signal through the outage
            waiting: dict[str, CachingServer] = {}
            for _ in range(4):
                server_id = str(uuid.uuid4())
                dep = sw.deploy(server_id, config.id, timeout=600, wait=False)
                server = stack.enter_context(
                    CachingServer(sw, server_id, ok_responder, interval=0.2)
                )
                server.pause()
                waiting[dep.id] = server
            for server in waiting.values():
                # each learns its channel before the outage
                deadline = time.monotonic() + 30
                while server.metadata_url is None and time.monotonic() < deadline:
                    server.read_metadata()
                    time.sleep(0.1)
                assert server.metadata_url, "the server's metadata was not published"
            # these are being launched as the database stops: a deploy() that
            # returns ends, one that raises leaves nothing, ever
            servers = {str(uuid.uuid4()): model.new_id() for _ in range(4)}
            first_accepted = threading.Event()
            stopping = threading.Event()
            refused: dict[str, str] = {}

            def launch(items: dict[str, str], **kwargs: Any) -> None:
                for server_id, deployment_id in items.items():
                    try:
                        sw.deploy(
                            server_id,
                            config.id,
                            timeout=600,
                            wait=False,
                            deployment_id=deployment_id,
                            **kwargs,
                        )
                    except Exception as exc:
                        refused[deployment_id] = repr(exc)
                    first_accepted.set()
                    stopping.wait(30)

            # and these two are past their reads, their rows not written, as it
            # stops: the one bound to 10 s gives up and leaves nothing; the
            # other (60 s) waits for the database with its caller
            given_up, ridden = model.new_id(), model.new_id()
            caught = {str(uuid.uuid4()): given_up, str(uuid.uuid4()): ridden}
            held = threading.Event()
            batcher = sw.runner._batcher()
            assert batcher is not None

            def hold_first_record(name: str) -> None:
                if not held.is_set():
                    held.set()
                    stopping.wait(30)
                    time.sleep(1.0)  # the database is stopped by now

            launchers = [threading.Thread(target=launch, args=(servers,))]
            launchers[0].start()
            assert first_accepted.wait(30)
            with failpoints.armed("launch.record", hold_first_record):
                for server_id, deployment_id in caught.items():
                    bound = {"wait_timeout": 10} if deployment_id == given_up else {}
                    launchers.append(
                        threading.Thread(
                            target=launch,
                            args=({server_id: deployment_id},),
                            kwargs=bound,
                        )
                    )
                    launchers[-1].start()
                    assert held.wait(30)
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and not all(
                    map(batcher.launching, caught.values())
                ):
                    time.sleep(0.05)
                stopping.set()
                cluster.stop("fast")  # while the next ones are on their way
                stopped = time.monotonic()
                for server in waiting.values():
                    server.resume()  # its signal lands in Swift meanwhile
                time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - stopped)))
                cluster.start()
            for thread in launchers:
                thread.join(120)
                assert not thread.is_alive()
            print(f"deploy() refused: {refused}")
            assert (
                "not recorded after 10 s: the database was unreachable"
                in refused[given_up]
            ), refused
            assert ridden not in refused, refused[ridden]
            servers.update(caught)
            for server_id in servers:
                stack.enter_context(CachingServer(sw, server_id, ok_responder))

            def existing() -> list[str]:
                known = {d.id for d in sw.list_deployments()}
                return [d for d in [*waiting, *servers.values()] if d in known]

            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                every = existing()
                if not sw.list_flows() and all(
                    sw.show(d).status != states.IN_PROGRESS for d in every
                ):
                    break
                time.sleep(0.5)
            every = existing()
            report = {d: (sw.show(d).status, sw.show(d).status_reason) for d in every}
            print(f"deployments through the outage: {len(every)}")
            print(f"runner failures: {dict(getattr(sw.runner, 'failures', {}))}")
            print(
                f"watcher failures: {dict(getattr(sw.runner.watcher, 'failures', {}))}"
            )
            assert set(waiting) <= set(every)
            assert len(every) > len(waiting), "no deploy() was accepted"
            # each one launched either ended or left nothing
            assert set(every) == set(waiting) | (set(servers.values()) - set(refused))
            for deployment_id, (status, reason) in report.items():
                assert status == states.COMPLETE, (deployment_id, reason)
            assert sw.list_flows() == []
            # the outage was met, and told once, in one line without SQL
            watcher = sw.runner.watcher
            assert watcher.failures["cycle"] >= 1
            told = [
                r
                for r in caplog.records
                if r.levelno >= logging.ERROR and "watcher cycle failed" in r.message
            ]
            assert len(told) == 1, [r.message for r in told]
            assert "\n" not in told[0].message
            assert all("[parameters:" not in r.message for r in caplog.records)
            for deployment_id in every:
                sw.undeploy(deployment_id)
    finally:
        sw.close()
        sw.store.close()
