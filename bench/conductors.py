"""Conductors on a jobboard: jobs drained per second, and claim takeover.

Conductors are real ``swflows conductor`` processes; the store is a
PostgreSQL database of the bench's own, the board a Redis namespace or
ZooKeeper path of its own, both removed at the end.

1. **Drain**: 1, then 2 conductors are started and paused (SIGSTOP),
   ``jobs`` flows of three trivial steps are posted, and the conductors go
   on together (SIGCONT); the rate is the jobs over the time until the
   board holds none.  A step costs nothing, so what is measured is a
   conductor's own work per job (claim, take the flow's row over, load and
   save its logbook, check its claim before each step, consume the job):
   CPU bound, each conductor one Python process, so on 2 cores 2
   conductors can at best double the rate, less on a machine that runs
   other work.  The baseline, in the same run: TaskFlow's own conductor
   (:mod:`bench.stock`, :data:`STOCK_KIND`) draining as many jobs of the
   same flow, posted the same way to a board of its own on the same Redis,
   with TaskFlow's stock SQLAlchemy persistence on the same database.
2. **Takeover**: two conductors, one flow whose middle step lasts longer
   than the measurement; the conductor holding its claim is SIGKILLed and
   the time until the other one holds it is taken, on Redis (the claim's
   expiry runs out) and on ZooKeeper (the dead conductor's session ends),
   both with ``claim_expiry`` :data:`CLAIM_EXPIRY` s.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from cryptography import fernet
from taskflow import engines, task
from taskflow.patterns import linear_flow
from taskflow.persistence import models

from bench import cloud as bcloud
from bench import overhead, stock
from swflows.api import Swflows
from swflows.engine import jobboard
from swflows.flows import compose
from swflows.tasks.base import ArgumentsOnce

REPO = pathlib.Path(__file__).resolve().parents[1]
REDIS_URL = os.environ.get("SWFLOWS_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
#: the claim expiry (and ZooKeeper session timeout) of the takeover part
CLAIM_EXPIRY = 3
#: TaskFlow's conductor the drain is compared with (``blocking`` or
#: ``nonblocking``, :data:`bench.stock.KINDS`)
STOCK_KIND = os.environ.get("SWFLOWS_BENCH_STOCK_CONDUCTOR", "blocking")
#: how often a drain looks whether the board is empty, in seconds
DRAIN_POLL = 0.02
Log = Callable[[str], None]


class Step(ArgumentsOnce, task.Task):  # type: ignore[misc]
    """A step that sleeps ``seconds`` (0: does nothing); its arguments are
    mapped once per class (:class:`swflows.tasks.base.ArgumentsOnce`), as a
    custom flow's tasks may be, for TaskFlow's conductor as for swflows'."""

    def __init__(self, name: str, seconds: float) -> None:
        super().__init__(
            name=f"bench.{name}", requires=[compose.FLOW_ID_KEY], provides=name
        )
        self.seconds = seconds

    def execute(self, flow_id: str) -> str:
        if self.seconds:
            time.sleep(self.seconds)
        return flow_id


def steps(seconds: float = 0.0) -> Any:
    """Three steps; the middle one sleeps ``seconds``."""
    return linear_flow.Flow("bench-steps").add(
        Step("first", 0.0), Step("middle", seconds), Step("last", 0.0)
    )


class Board:
    """One configuration file: the bench's database, a board of its own."""

    def __init__(
        self,
        cloud: dict[str, Any],
        folder: pathlib.Path,
        database: str,
        kind: str,
        claim_expiry: float,
        watcher: str = "",
    ) -> None:
        """``watcher``: more lines of the ``[watcher]`` section."""
        self.kind = kind
        self.namespace = f"swflows-bench-{uuid.uuid4().hex[:10]}"
        if kind == "redis":
            url = f"{REDIS_URL}?namespace={self.namespace}"
        else:
            zk = cloud["zookeeper"]
            url = (
                f"zookeeper://{zk['host']}:{zk['port']}/{self.namespace}"
                f"?timeout={claim_expiry:g}"
            )
        self.conf_path = folder / f"{kind}-{self.namespace}.conf"
        bcloud.write_private(
            self.conf_path,
            bcloud.conf_text(
                cloud, database=database, container=f"{self.namespace}-signals"
            )
            + f"[database]\ntable_prefix = b{uuid.uuid4().hex[:8]}_\n"
            + f"secret_key = {fernet.Fernet.generate_key().decode()}\n"
            + f"[jobboard]\nenabled = true\nbackend_url = {url}\n"
            + f"claim_expiry = {claim_expiry:g}\n"
            + "[watcher]\nsweep_interval = 86400\n"
            + watcher,
        )
        self.procs: list[subprocess.Popen[str]] = []

    def spawn(self) -> subprocess.Popen[str]:
        """A conductor process (not waited for)."""
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "swflows.cli",
                "--config-file",
                str(self.conf_path),
                "conductor",
            ],
            cwd=REPO,
            env=bcloud.process_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.procs.append(proc)
        return proc

    @staticmethod
    def ready(proc: subprocess.Popen[str]) -> None:
        """Return once the conductor said it runs."""
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("conductor "):
            raise RuntimeError(f"the conductor did not start: {line!r}")

    def stop_all(self, *, kill: bool = False) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = []

    def close(self) -> None:
        self.stop_all()
        with contextlib.closing(
            jobboard.Board.from_conf(self.sw_conf()).connect()
        ) as board:
            if self.kind == "redis":
                client = board._redis()
                keys = list(client.scan_iter(match=f"{self.namespace}*", count=1000))
                if keys:
                    client.delete(*keys)
            else:
                board._kazoo().delete(f"/{self.namespace}", recursive=True)

    def sw_conf(self) -> Any:
        from swflows import conf as sw_conf

        return sw_conf.get_conf(config_files=[str(self.conf_path)])

    @contextlib.contextmanager
    def poster(self) -> Iterator[Swflows]:
        """An instance that posts jobs and drives none."""
        made = Swflows.from_conf(self.sw_conf())
        try:
            yield made
        finally:
            made.close()
            swift = made.services.clients.object_store
            with contextlib.suppress(Exception):
                swift.delete_container(made.conf.signal_container, force=True)
            made.store.close()


def listed(board: Any) -> int:
    """How many jobs TaskFlow's Redis ``board`` lists (one HLEN)."""
    return int(board._client.hlen(board.listings_key))


def until_empty(board: Any, timeout: float) -> None:
    """Return once the Redis ``board`` lists no job."""
    deadline = time.monotonic() + timeout
    while listed(board):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the jobs did not drain within {timeout:.0f} s")
        time.sleep(DRAIN_POLL)


def timed_drain(
    procs: list[subprocess.Popen[str]],
    spawned: float,
    tf_board: Any,
    jobs: int,
    post: Callable[[], object],
    timeout: float,
) -> dict[str, Any]:
    """Once ``procs`` (spawned at ``spawned``) are ready, pause them
    (SIGSTOP), ``post`` ``jobs`` flows on ``tf_board``, let them go on
    (SIGCONT) together: the rate they drain the board at."""
    for proc in procs:
        Board.ready(proc)
    start_s = time.monotonic() - spawned
    for proc in procs:
        proc.send_signal(signal.SIGSTOP)
    posted = time.monotonic()
    for _ in range(jobs):
        post()
    post_s = time.monotonic() - posted
    assert listed(tf_board) == jobs
    go = time.monotonic()
    for proc in procs:
        proc.send_signal(signal.SIGCONT)
    until_empty(tf_board, timeout)
    drain_s = time.monotonic() - go
    return {
        "conductors": len(procs),
        "jobs": jobs,
        "start_s": start_s,
        "post_s": post_s,
        "drain_s": drain_s,
        "per_s": jobs / drain_s,
    }


def drain(board: Board, conductors: int, jobs: int) -> dict[str, Any]:
    """:func:`timed_drain` with ``conductors`` of swflows' own."""
    with board.poster() as sw:
        spawned = time.monotonic()
        procs = [board.spawn() for _ in range(conductors)]
        tf_board = sw.runner.jobs.board._board if sw.runner.jobs else None
        assert tf_board is not None
        found = timed_drain(
            procs, spawned, tf_board, jobs, lambda: sw.run_flow(steps), 60 + jobs
        )
        board.stop_all()
        if sw.list_flows():
            raise RuntimeError("the board drained, yet flows are left")
    return found


def stock_drain(
    database: str, conductors: int, jobs: int, kind: str = STOCK_KIND
) -> dict[str, Any]:
    """As :func:`drain`, with TaskFlow's own conductor (:mod:`bench.stock`)
    and persistence: the same flow, posted as TaskFlow's conductor expects
    it (a logbook holding the flow's factory, the job naming it)."""
    namespace = f"swflows-bench-stock-{uuid.uuid4().hex[:10]}"
    url = f"{REDIS_URL}?namespace={namespace}"
    backend = stock.persistence(database)
    tf_board = stock.board(url, backend, name="bench-poster")
    procs: list[subprocess.Popen[str]] = []
    try:
        spawned = time.monotonic()
        for _ in range(conductors):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "bench.stock", database, url, kind],
                    cwd=REPO,
                    env=bcloud.process_env(),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
            )

        def post() -> None:
            book = models.LogBook("bench-stock")
            detail = models.FlowDetail("bench-steps", uuid=str(uuid.uuid4()))
            book.add(detail)
            engines.save_factory_details(detail, steps, [], {})
            with contextlib.closing(backend.get_connection()) as conn:
                conn.save_logbook(book)
            tf_board.post(
                "bench-stock",
                book=book,
                details={
                    "flow_uuid": detail.uuid,
                    "store": {compose.FLOW_ID_KEY: detail.uuid},
                },
            )

        found = timed_drain(procs, spawned, tf_board, jobs, post, 60 + 2 * jobs)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        client = tf_board._client
        keys = list(client.scan_iter(match=f"{namespace}*", count=1000))
        if keys:
            client.delete(*keys)
        tf_board.close()
        backend.close()
    return {"conductor": f"taskflow {kind}", **found}


def owner_pid(owner: str | None) -> int | None:
    return int(owner.split(":")[1]) if owner else None


def takeover(board: Board) -> float:
    """SIGKILL the conductor holding a claim; seconds until another holds it."""
    with board.poster() as sw:
        procs = {p.pid: p for p in (board.spawn(), board.spawn())}
        for proc in procs.values():
            Board.ready(proc)
        # the middle step outlasts the measurement
        flow_id = sw.run_flow(steps, seconds=4 * CLAIM_EXPIRY + 30)

        def owner() -> str | None:
            rows = [r for r in sw.list_flows() if r.id == flow_id]
            return rows[0].owner if rows else None

        holder = bcloud.until(owner, 60, "a conductor to claim the flow")
        procs[owner_pid(holder) or 0].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        bcloud.until(
            lambda: owner() not in (None, holder),
            CLAIM_EXPIRY + 60,
            "the other conductor to claim the flow",
        )
        took = time.monotonic() - killed
        # the survivor would finish the step first: its board is thrown away
        board.stop_all(kill=True)
    return took


def run(
    cloud: dict[str, Any],
    folder: pathlib.Path,
    *,
    jobs: int = 200,
    rounds: int = 3,
    log: Log = print,
) -> dict[str, Any]:
    """Both measurements on a database of their own."""
    results: dict[str, Any] = {
        "drain": {},
        "stock": {},
        "takeover": {},
        "load_before": bcloud.load_average(),
    }
    with overhead.pg_database() as database:
        stock.upgrade(database)
        for conductors in (1, 2):
            log(f"7. drain {jobs} jobs, {conductors} swflows conductor(s), Redis")
            board = Board(cloud, folder, database, "redis", claim_expiry=30)
            try:
                ours = drain(board, conductors, jobs)
            finally:
                board.close()
            log(f"   and {conductors} TaskFlow {STOCK_KIND} conductor(s)")
            theirs = stock_drain(database, conductors, jobs)
            ours["vs_stock"] = ours["per_s"] / theirs["per_s"]
            results["drain"][str(conductors)] = ours
            results["stock"][str(conductors)] = theirs
            log(
                f"   {ours['per_s']:.1f} against {theirs['per_s']:.1f} jobs/s "
                f"({ours['vs_stock']:.2f}x)"
            )
        one, two = results["drain"]["1"], results["drain"]["2"]
        results["drain"]["ratio"] = two["per_s"] / one["per_s"] if one["per_s"] else 0
        for kind in ("redis", "zookeeper"):
            log(f"8. claim takeover after SIGKILL, {kind}, {rounds} round(s)")
            found = []
            for _ in range(rounds):  # each on a board and tables of its own
                board = Board(cloud, folder, database, kind, claim_expiry=CLAIM_EXPIRY)
                try:
                    found.append(takeover(board))
                finally:
                    board.close()
            results["takeover"][kind] = {
                "rounds": rounds,
                "claim_expiry_s": CLAIM_EXPIRY,
                "median_s": statistics.median(found),
                "max_s": max(found),
                "runs_s": found,
            }
    results["load_after"] = bcloud.load_average()
    return results
