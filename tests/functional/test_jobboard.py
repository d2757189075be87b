"""Conductors on a Redis jobboard, the store and logbook on PostgreSQL:
real conductor processes, killed (SIGKILL) and paused (SIGSTOP) mid-flow,
parked flows that hold no job, poison jobs set aside."""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import requests

from swflows import conf as sw_conf
from swflows import exceptions, flows, model, states
from swflows.api import Swflows
from swflows.engine import batching, conductor, jobboard
from swflows.persistence import flow_registry as flow_rows
from swflows.persistence.groups import GroupStore
from swflows.persistence.logbook import INJECTOR
from swflows.tasks.signal import AwaitSignal
from tests.functional import flowkit, jobkit
from tests.functional.db_fixtures import *  # noqa: F403 (fixtures)
from tests.functional.db_fixtures import SECRET_KEY
from tests.functional.flowkit import leftovers
from tests.functional.test_flows import script_config
from tests.functional.test_runner import FINAL, parked, put_signal, until

ROOT = Path(__file__).resolve().parents[2]
#: short, so takeovers are seen quickly
CLAIM_EXPIRY = 3
REDIS_URL = "redis://127.0.0.1:6379/0"
#: the boards the tests run on (``redis,zookeeper``); ZooKeeper is the dev
#: cloud's (its cloud.json ``zookeeper``), or ``$SWFLOWS_TEST_ZK_HOSTS``
BOARDS = os.environ.get("SWFLOWS_TEST_JOBBOARDS", "redis,zookeeper").split(",")


def board_url(
    kind: str, cloud: dict[str, Any], namespace: str, claim_expiry: int = CLAIM_EXPIRY
) -> str:
    if kind == "redis":
        return f"{REDIS_URL}?namespace={namespace}"
    found = cloud.get("zookeeper")
    hosts = (
        f"{found['host']}:{found['port']}"
        if found
        else os.environ.get("SWFLOWS_TEST_ZK_HOSTS")
    )
    if not hosts:
        pytest.fail(
            "ZooKeeper is required for the zookeeper jobboard tests: the dev "
            "cloud's cloud.json names none and $SWFLOWS_TEST_ZK_HOSTS is unset",
            pytrace=False,
        )
    # a short session: a dead conductor's claims go within the claim expiry
    return f"zookeeper://{hosts}/{namespace}?timeout={claim_expiry}"


def child_env() -> dict[str, str]:
    """The environment of the ``swflows`` processes the tests start."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


class Setup:
    """One test's configuration: its own tables, its own board namespace."""

    def __init__(
        self,
        kind: str,
        cloud: dict[str, Any],
        database: str,
        folder: Path,
        claim_expiry: int = CLAIM_EXPIRY,
    ) -> None:
        self.kind = kind
        self.namespace = f"swflows-test-{uuid.uuid4().hex[:10]}"
        self.folder = folder
        self.conf_path = folder / "swflows.conf"
        self.conf_path.touch(mode=0o600)
        text = flowkit.conf_text(cloud)
        self.conf_path.write_text(
            text
            + f"[database]\nconnection = {database}\n"
            + f"table_prefix = jb{uuid.uuid4().hex[:8]}_\n"
            + f"secret_key = {SECRET_KEY.decode()}\n"
            + "[jobboard]\nenabled = true\n"
            + f"backend_url = {board_url(kind, cloud, self.namespace, claim_expiry)}\n"
            + f"claim_expiry = {claim_expiry}\n"
        )
        self.procs: list[subprocess.Popen[str]] = []

    def conf(self) -> Any:
        return sw_conf.get_conf(config_files=[str(self.conf_path)])

    def board(self) -> jobboard.Board:
        return jobboard.Board.from_conf(self.conf()).connect()

    def argv(self, *args: str) -> list[str]:
        """The command line of ``swflows`` on this configuration."""
        return [
            sys.executable,
            "-m",
            "swflows.cli",
            "--config-file",
            str(self.conf_path),
            *args,
        ]

    def conductor(self) -> subprocess.Popen[str]:
        """Start a conductor process; returned once it runs."""
        proc = subprocess.Popen(
            self.argv("conductor"),
            cwd=ROOT,
            env=child_env(),
            stdout=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("conductor "), line
        return proc

    def cli(self, *args: str) -> str:
        return subprocess.run(
            self.argv(*args),
            cwd=ROOT,
            env=child_env(),
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGCONT)
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.kind != "redis":
            board = self.board()
            try:
                board._kazoo().delete(f"/{self.namespace}", recursive=True)
            finally:
                board.close()
            return
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=f"{self.namespace}*", count=1000))
        if keys:
            client.delete(*keys)


#: the stores under the conductors: each board runs once, on the databases
#: in turn (redis on PostgreSQL, zookeeper on MariaDB), and a database no
#: board took runs with the first board; every board and every database is
#: tried without the cross of the two (the store's own tests cross them)
DATABASES = [
    "postgresql",
    *filter(
        None, os.environ.get("SWFLOWS_TEST_JOBBOARD_DATABASES", "mariadb").split(",")
    ),
]
RUNS = [(board, DATABASES[i % len(DATABASES)]) for i, board in enumerate(BOARDS)] + [
    (BOARDS[0], database) for database in DATABASES[len(BOARDS) :]
]
DATABASE_FIXTURES = {"postgresql": "pg_url", "mariadb": "mysql_url"}


@pytest.fixture(params=RUNS, ids=lambda run: "-".join(run))
def setup(
    request: pytest.FixtureRequest,
    devcloud: dict[str, Any],
    tmp_path: Path,
) -> Iterator[Setup]:
    board, database = request.param
    url = request.getfixturevalue(DATABASE_FIXTURES[database])
    made = Setup(board, devcloud, url, tmp_path)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def sw(setup: Setup) -> Iterator[Swflows]:
    """The posting side: an instance that posts jobs and drives none."""
    made = Swflows.from_conf(setup.conf())
    try:
        yield made
    finally:
        made.close()
        made.store.close()


def owner_pid(owner: str | None) -> int | None:
    return int(owner.split(":")[1]) if owner else None


def starts(path: Path, step: str) -> collections.Counter[str]:
    return collections.Counter(
        r["flow"]
        for r in jobkit.records(path)
        if r["step"] == step and r["phase"] == "start"
    )


def test_a_killed_conductors_flows_are_taken_over_and_end_once(
    setup: Setup, sw: Swflows
) -> None:
    record = setup.folder / "steps.log"
    conductors = [setup.conductor(), setup.conductor()]
    ids = [sw.run_flow(jobkit.steps, record=str(record), seconds=4.0) for _ in range(4)]
    until(lambda: set(starts(record, "b")) == set(ids), 30, "every flow at step b")
    rows = {row.id: row for row in sw.list_flows()}
    held = collections.Counter(row.owner for row in rows.values())
    # the operator's view agrees with the flows table
    board = setup.board()
    try:
        found = conductor.status(
            board, flow_rows.FlowRegistry(sw.store), sw.conf, sw.store
        )
    finally:
        board.close()
    # one watcher, elected on the board's server among the conductors and
    # this posting process
    assert found["watcher"] in {*found["conductors"], sw.runner.owner}
    assert {name: set(c["flows"]) for name, c in found["conductors"].items()} == {
        name: {i for i, r in rows.items() if r.owner == name}
        for name in found["conductors"]
    }
    assert set(held) <= set(found["conductors"])
    victim_name, _ = held.most_common(1)[0]
    victim = next(p for p in conductors if p.pid == owner_pid(victim_name))
    taken = [i for i, r in rows.items() if r.owner == victim_name]
    victim.kill()
    killed = time.monotonic()

    def taken_over() -> bool:
        now = {row.id: row.owner for row in sw.list_flows()}
        return all(now.get(i) not in (None, victim_name) or i not in now for i in taken)

    until(taken_over, CLAIM_EXPIRY + 10, "the survivor to take the flows over")
    takeover = time.monotonic() - killed
    print(f"takeover after SIGKILL: {takeover:.2f} s (claim expiry {CLAIM_EXPIRY} s)")
    assert takeover <= CLAIM_EXPIRY + 2
    for flow_id in ids:
        assert sw.wait_flow(flow_id, timeout=60)["state"] == "SUCCESS"
    for step in ("a", "c"):
        assert starts(record, step) == {i: 1 for i in ids}, step
    b_runs = starts(record, "b")
    for flow_id in ids:  # the step that was running is run again, once
        assert b_runs[flow_id] == (2 if flow_id in taken else 1)
    assert sw.list_flows() == []
    board = setup.board()
    try:
        # a job whose claim ran out under load as its flow ended is settled
        # by the next conductor to claim it: gone within a claim's expiry
        until(lambda: board.jobs() == [], CLAIM_EXPIRY + 10, "every job to go")
        assert victim_name not in board.conductors()
    finally:
        board.close()


def test_a_paused_conductor_runs_no_step_after_its_claim_is_taken(
    setup: Setup, sw: Swflows
) -> None:
    record = setup.folder / "steps.log"
    procs = {p.pid: p for p in (setup.conductor(), setup.conductor())}
    flow_id = sw.run_flow(jobkit.steps, record=str(record), seconds=3.0)
    until(lambda: starts(record, "b"), 30, "step b")
    first = procs.pop(owner_pid(sw.list_flows()[0].owner) or 0)
    (second,) = procs.values()
    os.kill(first.pid, signal.SIGSTOP)
    paused = time.monotonic()
    until(
        lambda: any(owner_pid(row.owner) == second.pid for row in sw.list_flows()[:1]),
        CLAIM_EXPIRY + 10,
        "the second conductor to take the flow over",
    )
    takeover = time.monotonic() - paused
    print(f"takeover after SIGSTOP: {takeover:.2f} s (claim expiry {CLAIM_EXPIRY} s)")
    assert takeover <= CLAIM_EXPIRY + 2
    os.kill(first.pid, signal.SIGCONT)
    assert sw.wait_flow(flow_id, timeout=60)["state"] == "SUCCESS"
    time.sleep(1)  # what the first one would do once continued, it has done
    runs = jobkit.records(record)
    after_b = [r for r in runs if r["step"] == "c"]
    assert [r["pid"] for r in after_b] == [second.pid, second.pid]  # start, end
    assert first.poll() is None  # it lives on, and acts no more on the flow


def test_a_parked_flow_holds_no_job_and_a_new_one_is_posted_for_its_signal(
    setup: Setup, sw: Swflows
) -> None:
    setup.conductor()
    config = script_config(sw)
    dep = sw.deploy(str(uuid.uuid4()), config.id, timeout=60, wait=False)
    row = until(lambda: parked(sw, dep.id), 30, "the flow to park")
    assert row.owner is None
    board = setup.board()
    try:
        until(lambda: board.jobs() == [], 10, "the job to be consumed")
        listed = json.loads(setup.cli("conductor", "list", "-f", "json"))
        assert [c["flows"] for c in listed] == [""]
        put_signal(sw, dep.id, FINAL)
        done = sw.wait(dep.id, timeout=30)
        assert done.status == states.COMPLETE
        assert done.output_values["result"] == "r"
        # a flow's row goes as it ends, its job as the conductor settles it
        # right after: a wait may return in between
        until(lambda: board.jobs() == [], 10, "the signal's job to be consumed")
        sw.undeploy(dep.id)
        assert sw.list_flows() == []
        until(lambda: board.jobs() == [], 10, "the undeploy's job to be consumed")
        assert leftovers(sw, dep.id) == {}
    finally:
        board.close()


def test_a_job_failing_on_every_conductor_is_set_aside(
    setup: Setup, sw: Swflows
) -> None:
    record = setup.folder / "steps.log"
    setup.conductor()
    setup.conductor()
    flow_id = sw.run_flow(jobkit.poison, record=str(record))
    with pytest.raises(exceptions.FlowError, match="taken over 5 times"):
        sw.wait_flow(flow_id, timeout=60)
    (row,) = sw.list_flows()
    assert row.state == flow_rows.BROKEN
    assert starts(record, "fatal")[flow_id] == 5
    board = setup.board()
    try:
        assert board.jobs() == []  # trashed: never claimed again
    finally:
        board.close()


def test_a_stopped_conductor_gives_its_flows_back(setup: Setup, sw: Swflows) -> None:
    record = setup.folder / "steps.log"
    procs = {p.pid: p for p in (setup.conductor(), setup.conductor())}
    flow_id = sw.run_flow(jobkit.steps, record=str(record), seconds=2.0)
    until(lambda: starts(record, "b"), 30, "step b")
    holder = procs.pop(owner_pid(sw.list_flows()[0].owner) or 0)
    holder.terminate()  # SIGTERM: a clean stop
    assert holder.wait(timeout=30) == 0
    assert sw.wait_flow(flow_id, timeout=60)["state"] == "SUCCESS"
    (other,) = procs.values()
    assert [r["pid"] for r in jobkit.records(record) if r["step"] == "c"] == [
        other.pid,
        other.pid,
    ]
    assert starts(record, "a")[flow_id] == 1


def test_a_groups_members_run_under_conductors(setup: Setup, sw: Swflows) -> None:
    setup.conductor()
    config = script_config(sw)
    servers = {"m0": str(uuid.uuid4()), "m1": str(uuid.uuid4())}
    sw.create_group("grouped", config.id, servers, timeout=120, wait=False)

    def members_parked() -> list[flow_rows.FlowRow]:
        rows = [r for r in sw.list_flows() if r.state == flow_rows.PARKED]
        return rows if len(rows) == 2 else []

    rows = until(members_parked, 60, "both members' flows to park")
    assert {r.server_id for r in rows} == set(servers.values())
    assert sw.runner.driving == 0  # this process posts; the conductor drives
    for row in rows:
        put_signal(sw, row.deployment_id, FINAL)
    group = sw.wait_group("grouped", timeout=60)
    assert group["status"] == states.COMPLETE, json.dumps(group["members"])
    board = setup.board()
    try:
        assert board.jobs() == []
    finally:
        board.close()


@pytest.fixture
def reader(setup: Setup) -> Iterator[Swflows]:
    """An instance that reads and writes rows only: no runner, no group
    driver (``start=False``, and nothing here starts them)."""
    made = Swflows.from_conf(setup.conf(), start=False)
    try:
        yield made
    finally:
        made.close()
        made.store.close()


def test_a_groups_rollout_goes_on_under_a_conductor_once_its_creator_closed(
    setup: Setup, reader: Swflows
) -> None:
    """The process that created the group ends at once (a command line
    without --wait): a conductor's group driver takes the operation over
    and releases the members one wave after the other."""
    driver = setup.conductor()
    creator = Swflows.from_conf(setup.conf())
    try:
        config = script_config(creator)
        servers = {f"m{i}": str(uuid.uuid4()) for i in range(3)}
        group_id = creator.create_group(
            "waves",
            config.id,
            servers,
            policy={"max_concurrency": 1},
            timeout=120,
            wait=False,
        )["id"]
    finally:
        creator.close()
        creator.store.close()
    # this process reads rows and signals, as an agent: it runs no runner
    # and no group driver of its own
    sw = reader
    registry = flow_rows.FlowRegistry(sw.store)
    groups = GroupStore(sw.store)
    drivers = set()

    def parked_members() -> list[flow_rows.FlowRow]:
        return [r for r in registry.find() if r.state == flow_rows.PARKED]

    signalled = set()
    for _ in servers:
        rows = until(parked_members, 60, "a member's flow to park")
        assert len(rows) == 1  # one member at a time
        dep = sw.store.get_deployment(rows[0].deployment_id)
        assert dep.config_id is not None
        url = next(
            i.value
            for i in sw.store.get_config(dep.config_id).inputs
            if i.name == "deploy_signal_id"
        )
        requests.put(url, data=json.dumps(FINAL), timeout=10).raise_for_status()
        signalled.add(rows[0].server_id)
        drivers.add(owner_pid(groups.get(group_id).owner))
        until(
            lambda: not registry.find(deployment_id=rows[0].deployment_id),  # noqa: B023
            30,
            "the member's flow to end",
        )
    assert signalled == set(servers.values())
    assert sw._runner is None
    assert drivers == {driver.pid}
    until(
        lambda: groups.get(group_id).status != states.IN_PROGRESS,
        60,
        "the conductor to end the group's operation",
    )
    group = sw.show_group("waves")
    assert group["status"] == states.COMPLETE, json.dumps(group["members"])


def test_a_flow_whose_job_was_never_posted_is_posted_again(
    setup: Setup, sw: Swflows, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = setup.folder / "steps.log"
    jobs = sw.runner.jobs
    assert jobs is not None
    # the poster dies between writing the flow and posting its job
    monkeypatch.setattr(jobs, "post", lambda flow_id, **_: None)
    flow_id = sw.run_flow(jobkit.steps, record=str(record))
    monkeypatch.undo()
    posted = time.monotonic()
    setup.conductor()
    assert sw.wait_flow(flow_id, timeout=60)["state"] == "SUCCESS"
    # posted again once unclaimed for twice the claim expiry
    assert time.monotonic() - posted >= 2 * CLAIM_EXPIRY
    assert starts(record, "a") == {flow_id: 1}


def counted(board: Any) -> list[str]:
    """The commands the Redis board's client sends from now on."""
    client = board._board._client
    sent: list[str] = []
    send = client.execute_command

    def execute(*args: Any, **kwargs: Any) -> Any:
        sent.append(str(args[0]))
        return send(*args, **kwargs)

    client.execute_command = execute
    return sent


@pytest.mark.parametrize("kind", BOARDS)
def test_jobs_are_listed_oldest_first_so_none_starves(
    kind: str, devcloud: dict[str, Any], tmp_path: Path
) -> None:
    """Conductors claim in the order the board lists: oldest first, or an
    old job waits as long as new ones keep coming (TaskFlow's Redis board
    lists the newest first)."""
    made = Setup(kind, devcloud, "sqlite://", tmp_path)
    board = made.board()
    try:
        posted = [board.post(f"flow-{n}", f"job-{n}") for n in range(6)]
        listed = [str(job.uuid) for job in board.jobs()]
        assert listed == posted
        board.claim(board.jobs()[0], "someone")
        unclaimed = [str(job.uuid) for job in board.jobs(only_unclaimed=True)]
        assert unclaimed == posted[1:]
        assert [str(job.uuid) for job in board.listed()] == posted
        calls = counted(board) if kind == "redis" else []
        owned = [(str(job.uuid), owner) for job, owner in board.owned()]
        assert owned == [(posted[0], "someone")] + [(j, None) for j in posted[1:]]
        if kind == "redis":  # the listing and every claim, whatever the jobs
            assert calls == ["HGETALL", "MGET"], calls
    finally:
        board.close()
        made.close()  # removes the board's namespace


@pytest.mark.parametrize("kind", BOARDS)
def test_a_board_makes_a_post_known_without_a_listing(
    kind: str, devcloud: dict[str, Any], tmp_path: Path
) -> None:
    """What a resting conductor learns a new job by: a Redis board's count
    of posts moves with each post; a ZooKeeper board calls back."""
    made = Setup(kind, devcloud, "sqlite://", tmp_path)
    board = made.board()
    told = threading.Event()
    try:
        tells = board.on_posted(told.set)
        before = board.posted()
        board.post("flow-1", "job-1")
        if kind == "redis":
            assert not tells
            assert before is not None and board.posted() == before + 1
        else:
            assert tells and board.posted() is None
            assert told.wait(30), "the board never told of the post"
    finally:
        board.close()
        made.close()


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def unreached_setup(
    devcloud: dict[str, Any], pg_url: str, folder: Path, claim_expiry: int
) -> tuple[Setup, int]:
    """A configuration whose Redis board is at a port nobody listens on."""
    made = Setup("redis", devcloud, pg_url, folder, claim_expiry=claim_expiry)
    port = free_port()
    text = made.conf_path.read_text().replace(
        f"{REDIS_URL}?", f"redis://127.0.0.1:{port}/0?"
    )
    made.conf_path.write_text(text)
    return made, port


def test_a_conductor_started_before_its_board_starts_once_it_is_up(
    devcloud: dict[str, Any], pg_url: str, tmp_path: Path
) -> None:
    made, port = unreached_setup(devcloud, pg_url, tmp_path, claim_expiry=60)
    server = None
    try:
        conducting = subprocess.Popen(
            made.argv("conductor"),
            cwd=ROOT,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        made.procs.append(conducting)
        assert conducting.stderr is not None and conducting.stdout is not None
        first = conducting.stderr.readline()
        assert "unreachable" in first and "trying again" in first, first
        server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )
        line = conducting.stdout.readline()  # within the patience: 60 s
        assert line.startswith("conductor "), line
    finally:
        made.close()
        if server is not None:
            server.terminate()
            server.wait(timeout=30)


def test_a_conductor_whose_board_never_comes_exits_after_its_patience(
    devcloud: dict[str, Any], pg_url: str, tmp_path: Path
) -> None:
    made, port = unreached_setup(devcloud, pg_url, tmp_path, claim_expiry=6)
    try:
        ran = subprocess.run(
            made.argv("conductor"),
            cwd=ROOT,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ran.returncode != 0 and not ran.stdout
        lines = ran.stderr.strip().splitlines()
        assert any("trying again" in line for line in lines), ran.stderr
        (error,) = [line for line in lines if line.startswith("swflows: error:")]
        assert f"jobboard redis at 127.0.0.1:{port} unreachable" in error, lines
    finally:
        made.close()


def test_a_deploy_that_fails_before_its_row_tells_its_caller_why(
    setup: Setup, sw: Swflows, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conductor's deploy that reverts before writing its deployment
    keeps why in the store: the caller in the posting process, blocking or
    not, gets that error, not "deployment not found" (the error had died
    with the conductor's process).  What is kept goes after an hour."""
    monkeypatch.setenv("SWFLOWS_FAILPOINTS", "deployment.create=fail")
    setup.conductor()
    config = sw.create_config("app", "#!/bin/sh\necho hi\n", group="script")
    for wait in (True, False):
        deployment_id = str(uuid.uuid4())
        with pytest.raises(exceptions.FlowError, match=r"failpoint deployment\.create"):
            sw.deploy(
                str(uuid.uuid4()),
                config.id,
                deployment_id=deployment_id,
                wait=wait,
                wait_timeout=60,
            )
        with pytest.raises(exceptions.DeploymentNotFound):
            sw.show(deployment_id)
        assert sw.list_flows(deployment_id=deployment_id) == []
        assert leftovers(sw, deployment_id) == {}
    registry = sw.runner.registry
    assert flow_rows.forget_kept_failures(registry) == 0  # kept for now
    hour_on = model.utcnow() + datetime.timedelta(
        seconds=flow_rows.KEPT_FAILURE_SECONDS + 60
    )
    assert flow_rows.forget_kept_failures(registry, now=hour_on) == 2
    assert flow_rows.forget_kept_failures(registry, now=hour_on) == 0


def test_a_conductor_launches_posted_deploys_in_rounds(
    setup: Setup, sw: Swflows, monkeypatch: pytest.MonkeyPatch
) -> None:
    """New deploys posted together are launched by a conductor in rounds,
    as one runner launches its own: each flow parks with its logbook
    holding every step (those before its wait done), its servers' metadata
    published as the store holds it, its job consumed; each then completes
    on its signal."""
    adopted: list[str] = []
    adopt = batching.Batcher.adopt

    def counted(self: batching.Batcher, flow_id: str, *args: Any) -> bool:
        taken = adopt(self, flow_id, *args)
        if taken:
            adopted.append(flow_id)
        return taken

    monkeypatch.setattr(batching.Batcher, "adopt", counted)
    driver = Swflows.from_conf(setup.conf(), start=False)
    running = conductor.Conductor(driver).start()
    board = setup.board()
    try:
        config = script_config(sw)
        servers = [str(uuid.uuid4()) for _ in range(2)]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            deps = list(
                pool.map(
                    lambda i: sw.deploy(
                        servers[i % 2], config.id, timeout=120, wait=False
                    ),
                    range(8),
                )
            )
        until(lambda: all(parked(sw, d.id) for d in deps), 60, "the flows to park")
        rows = [parked(sw, d.id) for d in deps]
        assert sorted(adopted) == sorted(row.id for row in rows if row)
        until(lambda: board.jobs() == [], 10, "the jobs to be consumed")
        with contextlib.closing(sw.runner.backend.get_connection()) as conn:
            for row in rows:
                assert row is not None
                detail = conn.get_logbook(row.id).find(row.id)
                found = {atom.name: atom.state for atom in detail}
                assert found.pop(INJECTOR) == "SUCCESS"
                # its steps as its engine would have left them at its park:
                # done up to its wait, the wait and any after it to come
                plan = detail.meta["factory"]["kwargs"]
                names = [atom.name for atom in flows.FACTORIES["deploy"](**plan)]
                assert set(names) == set(found)
                wait = next(i for i, n in enumerate(names) if AwaitSignal.__name__ in n)
                assert [found[n] for n in names] == ["SUCCESS"] * wait + ["PENDING"] * (
                    len(names) - wait
                ), found
        for server in servers:
            snapshot = sw.store.server_metadata(server)
            assert len(snapshot.deployments) == 4
            assert snapshot.published == snapshot.version > 0
        for dep in deps:
            put_signal(sw, dep.id, FINAL)
        for dep in deps:
            assert sw.wait(dep.id, timeout=60).status == states.COMPLETE
        until(lambda: board.jobs() == [], 10, "the signals' jobs to be consumed")
    finally:
        board.close()
        running.close()
        driver.close()
        driver.store.close()


def test_a_conductor_killed_in_a_round_leaves_its_flows_to_the_next(
    setup: Setup, sw: Swflows, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conductor killed while its round publishes (the deployments' rows
    written, their logbooks holding their inputs alone) leaves the flows
    to the conductor that claims their jobs next: it runs them from their
    start, finds what the first made, and each deployment completes once,
    nothing left behind."""
    monkeypatch.setenv("SWFLOWS_FAILPOINTS", "metadata.publish=stall:300")
    first = setup.conductor()
    config = script_config(sw)
    server = str(uuid.uuid4())
    deps = [sw.deploy(server, config.id, timeout=300, wait=False) for _ in range(3)]
    rows = sw.list_flows()
    assert {owner_pid(row.owner) for row in rows} == {first.pid}
    assert all(row.state == flow_rows.RUNNING for row in rows)
    first.kill()
    first.wait()
    monkeypatch.delenv("SWFLOWS_FAILPOINTS")
    second = setup.conductor()
    until(
        lambda: all(parked(sw, d.id) for d in deps),
        CLAIM_EXPIRY + 60,
        "the second conductor to park the flows",
    )
    assert [sw.show(d.id).id for d in deps] == [d.id for d in deps]
    for dep in deps:
        put_signal(sw, dep.id, FINAL)
    for dep in deps:
        done = sw.wait(dep.id, timeout=60)
        assert done.status == states.COMPLETE
        assert done.output_values["result"] == "r"
    assert second.poll() is None
    board = setup.board()
    try:
        until(lambda: board.jobs() == [], 10, "the jobs to be consumed")
        for dep in deps:
            sw.undeploy(dep.id)
        until(lambda: board.jobs() == [], 10, "the undeploys' jobs to be consumed")
    finally:
        board.close()
    assert sw.list_flows() == []
    assert leftovers(sw, *(d.id for d in deps)) == {}
