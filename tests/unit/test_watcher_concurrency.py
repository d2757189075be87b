"""The signals one watcher cycle finds are handled at once, on the runner's
workers and the watcher's own thread, and cycles start ``poll_interval``
apart however long they take."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swflows import conf as sw_conf
from swflows.clients.cloud import Clients
from swflows.engine import runner as runner_mod
from swflows.persistence import Store
from swflows.services import Services
from swflows.transports.base import SignalRead
from tests.unit.test_watcher_isolation import parked


def make_runner(tmp_path: Path, workers: int) -> Iterator[runner_mod.Runner]:
    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as store:
        services = Services(
            store=store,
            conf=sw_conf.get_conf(config_files=[]),
            clients=Clients(),
            secret=b"k" * 32,
        )
        made = runner_mod.Runner(services, workers=workers)
        try:
            yield made
        finally:
            made.close()


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[runner_mod.Runner]:
    yield from make_runner(tmp_path, 4)


@pytest.fixture
def lone(tmp_path: Path) -> Iterator[runner_mod.Runner]:
    yield from make_runner(tmp_path, 1)


def landing(
    runner: runner_mod.Runner,
    monkeypatch: pytest.MonkeyPatch,
    count: int,
    check: Any,
) -> tuple[list[str], list[str]]:
    """``count`` parked flows whose signal landed, checked by ``check``;
    their deployment ids, and the flows resumed (none really is)."""
    ids = [parked(runner) for _ in range(count)]
    watcher = runner.watcher

    def observe(rows: Any) -> list[tuple[Any, SignalRead]]:
        return [(row, SignalRead(b"{}", "v1")) for row in rows]

    resumed: list[str] = []
    lock = threading.Lock()

    def resume(flow_id: str, waiting: Any = None) -> bool:
        with lock:
            resumed.append(flow_id)
        return True

    monkeypatch.setattr(watcher.reader, "observe", observe)
    monkeypatch.setattr(watcher, "_check", check)
    monkeypatch.setattr(runner, "resume_parked", resume)
    return ids, resumed


def test_the_signals_of_one_cycle_are_handled_at_once(
    runner: runner_mod.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # four checks meet at the barrier only if they run side by side
    barrier = threading.Barrier(4, timeout=10)

    def check(row: Any, read: Any, now: float) -> bool:
        barrier.wait()
        return True

    ids, resumed = landing(runner, monkeypatch, 4, check)
    started = time.monotonic()
    done = runner.watcher.cycle()
    assert time.monotonic() - started < 5
    assert runner.watcher.failures == {}
    assert runner.watcher.busy
    assert sorted(done) == sorted(f"flow-{d}" for d in ids) == sorted(resumed)


def test_busy_workers_do_not_hold_a_cycle_up(
    lone: runner_mod.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    assert lone.offload(lambda: release.wait(30))  # the only worker is busy
    checked: list[str] = []

    def check(row: Any, read: Any, now: float) -> bool:
        checked.append(row.id)
        return True

    try:
        _, resumed = landing(lone, monkeypatch, 3, check)
        started = time.monotonic()
        assert len(lone.watcher.cycle()) == 3
        assert time.monotonic() - started < 5
        assert len(checked) == 3 and len(resumed) == 3
    finally:
        release.set()


def test_a_failure_handling_one_signal_spares_the_others(
    runner: runner_mod.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad: list[str] = []

    def check(row: Any, read: Any, now: float) -> bool:
        if row.id == bad[0]:
            raise ValueError("not this one")
        return True

    ids, _ = landing(runner, monkeypatch, 5, check)
    bad.append(f"flow-{ids[2]}")
    done = runner.watcher.cycle()
    assert sorted(done) == sorted(f"flow-{d}" for d in ids if d != ids[2])
    assert runner.watcher.failures == {"check": 1}


def test_a_fresh_look_reads_and_resumes_only_the_flows_just_parked(
    runner: runner_mod.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A look asked for by parks reads those flows only, and leaves the
    housekeeping (takeovers, sweeps, servers gone) to full looks."""
    checked: list[str] = []

    def check(row: Any, read: Any, now: float) -> bool:
        checked.append(row.id)
        return True

    ids, resumed = landing(runner, monkeypatch, 4, check)
    watcher = runner.watcher
    chores: list[str] = []
    monkeypatch.setattr(watcher, "_housekeeping", lambda: chores.append("house"))
    monkeypatch.setattr(watcher, "_servers_gone", lambda rows: chores.append("nova"))
    fresh = frozenset({f"flow-{ids[1]}", f"flow-{ids[3]}"})
    done = watcher.cycle(fresh)
    assert sorted(done) == sorted(checked) == sorted(resumed) == sorted(fresh)
    assert (watcher.cycles, watcher.fresh_looks, chores) == (0, 1, [])
    assert sorted(watcher.cycle()) == sorted(f"flow-{d}" for d in ids)
    assert (watcher.cycles, chores) == (1, ["nova", "house"])


def test_cycles_start_poll_interval_apart(runner: runner_mod.Runner) -> None:
    conf = runner.services.conf
    conf.set_override("poll_interval", 1.0, "watcher")
    conf.set_override("poll_jitter", 0.0, "watcher")
    try:
        watcher = runner.watcher
        assert watcher._delay(0, 0.0) == pytest.approx(1.0)
        assert watcher._delay(0, 0.3) == pytest.approx(0.7)
        # a cycle longer than the interval still leaves a rest
        assert watcher._delay(0, 5.0) == pytest.approx(0.25)
        assert watcher._delay(2, 0.0) == pytest.approx(2.25)  # backing off
        watcher.busy = True  # the last cycle found a signal: the next is sooner
        assert watcher._delay(0, 0.1) == pytest.approx(0.4)
        assert watcher._delay(1, 0.0) == pytest.approx(1.5)
    finally:
        conf.clear_override("poll_interval", "watcher")
        conf.clear_override("poll_jitter", "watcher")
