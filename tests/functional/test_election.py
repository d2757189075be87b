"""One leader among processes, on the dev cloud's Redis and ZooKeeper
(:mod:`swflows.engine.election`): standbys wait, a killed leader's lock
passes on within the stated bound, and a leader cut from the backend stops
leading before any other process leads."""

from __future__ import annotations

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

from swflows.engine.election import Election, leader_of
from tests.functional import netfault

REPO = Path(__file__).resolve().parents[2]
BACKENDS = ("redis", "zookeeper")
TIMEOUT = 3  # the leader's lease, in seconds
#: what a loaded 2-core machine may add to the bound (scheduling, start-up)
SLACK = 1.5


@pytest.fixture(params=BACKENDS)
def backend_url(request: pytest.FixtureRequest, devcloud: dict[str, Any]) -> str:
    server = devcloud[request.param]
    return f"{request.param}://{server['host']}:{server['port']}"


def role() -> str:
    return f"test-{uuid.uuid4().hex[:10]}"


def until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class Candidate:
    """``election_child`` in a process of its own; its lines, parsed."""

    def __init__(self, folder: Path, url: str, role: str, member: str) -> None:
        self.member = member
        self.log = folder / f"{member}.log"
        with open(self.log, "w") as out:
            child = ["-m", "tests.functional.election_child"]
            self.proc = subprocess.Popen(
                [sys.executable, *child, url, role, member, str(TIMEOUT)],
                cwd=REPO,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def times(self, what: str) -> list[float]:
        found = []
        for line in self.log.read_text().splitlines():
            word, _, stamp = line.partition(" ")
            if word == what:
                found.append(float(stamp))
        return found

    def first(self, what: str, timeout: float = 30) -> float:
        return float(
            until(
                lambda: next(iter(self.times(what)), None),
                timeout,
                f"{self.member} {what}: {self.log.read_text()[-2000:]}",
            )
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def candidates(tmp_path: Path) -> Iterator[Callable[..., Candidate]]:
    made: list[Candidate] = []

    def make(url: str, role: str, member: str) -> Candidate:
        made.append(Candidate(tmp_path, url, role, member))
        return made[-1]

    yield make
    for candidate in made:
        candidate.stop()


def test_one_leader_the_others_stand_by(backend_url: str) -> None:
    name = role()
    elections = [
        Election(backend_url, name, member_id=f"m{i}", timeout=TIMEOUT)
        for i in range(3)
    ]
    try:
        for election in elections:
            election.start()
        until(lambda: any(e.is_leader for e in elections), 10, "a leader")
        time.sleep(2 * elections[0].tick)  # every one has tried the lock
        leaders = [e for e in elections if e.is_leader]
        assert len(leaders) == 1
        leader = leaders[0]
        assert {e.leader_id() for e in elections} == {leader.member_id}
        assert elections[0].members() == ["m0", "m1", "m2"]
        # standing down hands over at the next tick, not after the lease
        started = time.monotonic()
        leader.stop()
        others = [e for e in elections if e is not leader]
        until(lambda: any(e.is_leader for e in others), 5, "a new leader")
        assert time.monotonic() - started < others[0].tick + SLACK
        assert sum(e.is_leader for e in others) == 1
        new = next(e for e in others if e.is_leader)
        until(lambda: others[0].leader_id() == new.member_id, 5, "the new leader id")
        assert others[0].members() == sorted(e.member_id for e in others)
    finally:
        for election in elections:
            election.stop()


def test_killed_leader_hands_over_within_the_bound(
    backend_url: str, candidates: Callable[..., Candidate]
) -> None:
    name = role()
    first = candidates(backend_url, name, "first")
    first.first("elected")
    second = candidates(backend_url, name, "second")
    second.first("started")
    time.sleep(1.0)
    assert second.times("leader") == [] and second.times("elected") == []
    bound = Election(backend_url, name, timeout=TIMEOUT)
    os.kill(first.proc.pid, signal.SIGKILL)
    killed = time.time()
    elected = second.first("elected", timeout=bound.handover_bound + 10)
    took = elected - killed
    print(f"\n{backend_url.split(':')[0]}: a standby led {took:.2f} s after the kill")
    # the lock lapses no sooner than a lease after its last renewal
    assert took >= TIMEOUT - bound.tick - 0.1
    assert took <= bound.handover_bound + SLACK


def test_leader_cut_from_the_backend_stops_before_a_standby_leads(
    backend_url: str, candidates: Callable[..., Candidate]
) -> None:
    scheme = backend_url.rpartition(":")[0]
    proxied, relay = netfault.through(backend_url, "backend")
    name = role()
    first = candidates(proxied, name, "first")
    first.first("elected")
    second = candidates(backend_url, name, "second")
    second.first("started")
    time.sleep(0.5)
    relay.close()  # every connection cut, no new one taken: a partition
    cut = time.time()
    revoked = first.first("revoked", timeout=TIMEOUT + 10)
    elected = second.first("elected", timeout=TIMEOUT + 15)
    print(
        f"\n{scheme.split(':')[0]}: cut leader stopped {revoked - cut:.2f} s after "
        f"the cut, a standby led {elected - cut:.2f} s after it"
    )
    assert max(first.times("leader")) < elected  # never two leaders
    assert revoked < elected
    assert revoked - cut <= TIMEOUT + SLACK


def test_an_onlooker_sees_the_leader_without_joining(backend_url: str) -> None:
    """The operator's view (``swflows conductor list``) asks who leads
    without campaigning: nobody before the first candidate, the leader
    after, and the onlooker never becomes a member."""
    name = role()
    assert leader_of(backend_url, name) is None
    election = Election(backend_url, name, member_id="watcher-a", timeout=TIMEOUT)
    election.start()
    try:
        assert election.wait_elected(timeout=TIMEOUT * 3)
        assert leader_of(backend_url, name) == "watcher-a"
        assert election.members() == ["watcher-a"]
    finally:
        election.stop()


def test_a_candidate_dropped_by_the_backend_joins_again(backend_url: str) -> None:
    """Cut off past its session (ZooKeeper deletes its member node with the
    session; Redis lets its membership lapse), a candidate that leads again
    once the backend is back is a member again and named as the leader:
    before, it led unseen, and the operator's view said nobody led."""
    proxied, relay = netfault.through(backend_url, "backend")
    name = role()
    election = Election(proxied, name, member_id="cut-off", timeout=TIMEOUT)
    election.start()
    try:
        assert election.wait_elected(timeout=TIMEOUT * 3)
        until(lambda: leader_of(backend_url, name) == "cut-off", 5, "the leader named")
        with relay.blackhole():
            # past the session on both backends (ZooKeeper's is at least 4 s)
            until(lambda: not election.is_leader, TIMEOUT + 5, "the lease to lapse")
            time.sleep(3 * TIMEOUT + 2)
        relay.reset()  # the connections held in the blackhole
        until(lambda: election.is_leader, 30, "the candidate to lead again")
        until(
            lambda: leader_of(backend_url, name) == "cut-off",
            10,
            f"the leader named again (named: {leader_of(backend_url, name)!r})",
        )
        assert election.members() == ["cut-off"]
    finally:
        election.stop()
        relay.close()
