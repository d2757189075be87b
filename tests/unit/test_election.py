"""The election's settings and the watcher's use of it, without a server
(the elections themselves: tests/functional/test_election.py)."""

from __future__ import annotations

import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest

from swflows import conf as sw_conf
from swflows.clients.cloud import Clients
from swflows.engine import runner as runner_mod
from swflows.engine.election import Election, ElectionError, describe_url
from swflows.persistence import Store
from swflows.services import Services


def test_bad_settings_are_refused_by_name() -> None:
    with pytest.raises(ElectionError, match="scheme must be one of redis, zookeeper"):
        Election("etcd3+http://u:hunter2@127.0.0.1:2379", "r")
    with pytest.raises(ElectionError, match="at least 2"):
        Election("redis://127.0.0.1:6379", "r", timeout=1)
    with pytest.raises(ElectionError, match="role"):
        Election("redis://127.0.0.1:6379", "")
    with pytest.raises(ElectionError) as err:
        Election("memcached://u:hunter2@127.0.0.1:1", "r")
    assert "hunter2" not in str(err.value)


def test_url_described_without_its_password() -> None:
    assert (
        describe_url("redis://user:hunter2@10.0.0.1:6379?db=3&password=x")
        == "redis://10.0.0.1:6379"
    )


def test_bound_and_tick_follow_the_timeout() -> None:
    redis = Election("redis://127.0.0.1:6379", "r", timeout=10)
    assert (redis.tick, redis.handover_bound) == (1.0, 11.0)
    zookeeper = Election("zookeeper://127.0.0.1:2181", "r", timeout=3)
    assert zookeeper.tick == pytest.approx(0.6)
    assert zookeeper.handover_bound == pytest.approx(5.6)  # + ZooKeeper's tick
    assert not redis.is_leader  # not started: not leader


def test_no_backend_no_election(runner: runner_mod.Runner) -> None:
    assert runner.election is None
    assert runner.watcher.active


class Lease:
    """An election's lease, without a backend."""

    def __init__(self) -> None:
        self.until = 0.0

    @property
    def is_leader(self) -> bool:
        return time.monotonic() < self.until


def test_a_watcher_not_elected_runs_no_cycle(runner: runner_mod.Runner) -> None:
    lease = Lease()
    runner.election = lease  # type: ignore[assignment]
    try:
        assert not runner.watcher.active
        cycles = runner.watcher.cycles
        runner.conf.set_override("poll_interval", 0.1, "watcher")
        runner.watcher.stand_by()
        assert runner.watcher.cycles == cycles
        lease.until = time.monotonic() + 60
        assert runner.watcher.active
    finally:
        runner.election = None


def test_each_database_elects_apart(tmp_path: Path) -> None:
    roles = set()
    for name, prefix in (("a", "swflows_"), ("a", "other_"), ("b", "swflows_")):
        with Store(f"sqlite:///{tmp_path / name}.sqlite", table_prefix=prefix) as st:
            conf = sw_conf.get_conf(config_files=[])
            conf.set_override("backend_url", "redis://127.0.0.1:6379", "coordination")
            services = Services(st, conf, Clients(), secret=b"k" * 32)
            made = runner_mod.Runner(services, workers=1)
            assert made.election is not None
            assert made.election.member_id == made.owner
            roles.add(made.election.role)
            made.close()
    assert len(roles) == 3


class Unanswered:
    """A coordinator (and its lock) whose backend never answers: every
    call blocks until the test lets it go."""

    def __init__(self) -> None:
        self.answer = threading.Event()
        self.calls: list[str] = []
        self.is_started = True

    def _block(self, name: str) -> None:
        self.calls.append(name)
        self.answer.wait()

    def release(self) -> None:
        self._block("release")

    def update_capabilities(self, group: bytes, caps: dict[str, object]) -> Any:
        self._block("update_capabilities")
        return types.SimpleNamespace(get=lambda: None)

    def stop(self) -> None:
        self._block("stop")
        self.is_started = False


def test_leaving_waits_for_an_unanswering_backend_at_most_its_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A ZooKeeper out of reach held a conductor's SIGTERM forever in
    tooz's leave_group: stop returns after the election's timeout."""
    election = Election("zookeeper://127.0.0.1:1", "r", timeout=2)
    backend = Unanswered()
    election._coordinator, election._lock, election._joined = backend, backend, True
    started = time.monotonic()
    stopping = threading.Thread(target=election.stop, daemon=True)
    stopping.start()
    stopping.join(6)
    took = time.monotonic() - started
    hung = stopping.is_alive()
    backend.answer.set()
    assert not hung, "stop waited for the backend without a bound"
    assert 1.9 <= took < 4, took  # the timeout, threads and leave in all
    assert "no answer within 2 s" in caplog.text
    assert election._coordinator is None and election._lock is None
    # the leave went on in the background once the backend answered
    deadline = time.monotonic() + 5
    while "stop" not in backend.calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert backend.calls == ["release", "update_capabilities", "stop"]


def test_leaving_an_answering_backend_waits_for_it() -> None:
    election = Election("zookeeper://127.0.0.1:1", "r", timeout=2)
    backend = Unanswered()
    backend.answer.set()
    election._coordinator, election._lock, election._joined = backend, backend, True
    started = time.monotonic()
    election.stop()
    assert time.monotonic() - started < 1
    assert backend.calls == ["release", "update_capabilities", "stop"]
    assert not backend.is_started


class _Result:
    def __init__(self, value: Any = None) -> None:
        self.value = value

    def get(self) -> Any:
        return self.value


class _Lock:
    def __init__(self) -> None:
        self.held = False

    def acquire(self, blocking: bool = True) -> bool:
        self.held = True
        return True

    def heartbeat(self) -> bool:
        return self.held

    def is_still_owner(self) -> bool:
        return self.held

    def release(self) -> None:
        self.held = False


class _Backend:
    """The part of a tooz coordinator an election's tick uses, whose group
    can drop a member as an expired session does."""

    is_started = True

    def __init__(self) -> None:
        self.members: dict[bytes, dict[str, Any]] = {}
        self.lock = _Lock()

    def join_group_create(self, group: bytes, capabilities: Any) -> _Result:
        from tooz import coordination

        if b"m" in self.members:
            raise coordination.MemberAlreadyExist(group, b"m")
        self.members[b"m"] = dict(capabilities)
        return _Result()

    def heartbeat(self) -> float:
        return 1.0

    def get_lock(self, name: bytes) -> _Lock:
        return self.lock

    def get_member_capabilities(self, group: bytes, member: bytes) -> _Result:
        from tooz import coordination

        if member not in self.members:
            raise coordination.MemberNotJoined(group, member)
        return _Result(self.members[member])

    def update_capabilities(self, group: bytes, caps: Any) -> _Result:
        self.get_member_capabilities(group, b"m")
        self.members[b"m"] = dict(caps)
        return _Result()


def test_a_member_the_backend_dropped_joins_again_saying_it_leads() -> None:
    election = Election("zookeeper://127.0.0.1:9", "r", member_id="m", timeout=10)
    backend = _Backend()
    election._coordinator = backend
    election._step()
    assert election.is_leader
    since = backend.members[b"m"]["leader_since"]
    backend.members.clear()  # the session expired: its nodes went with it
    election._step()
    assert backend.members == {b"m": {"leader_since": since}}
    assert election.is_leader
