"""The watcher's loop: a cycle every poll interval, and after failed cycles
(the database out of reach) a backoff growing by ``backoff_multiplier`` up to
``max_poll_interval``, jittered, back to the poll interval once one works."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import tenacity

from swflows import conf as sw_conf
from swflows.clients.cloud import Clients
from swflows.engine import pacing as pacing_mod
from swflows.engine import runner as runner_mod
from swflows.engine import watcher as watcher_mod
from swflows.persistence import Store
from swflows.services import Services


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[runner_mod.Runner]:
    conf = sw_conf.get_conf(config_files=[])
    conf.set_override("poll_interval", 2.0, "watcher")
    conf.set_override("backoff_multiplier", 1.5, "watcher")
    conf.set_override("max_poll_interval", 10.0, "watcher")
    conf.set_override("poll_jitter", 0.1, "watcher")
    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as store:
        services = Services(store=store, conf=conf, clients=Clients(), secret=b"k" * 32)
        made = runner_mod.Runner(services, workers=1)  # not started: no threads
        try:
            yield made
        finally:
            made.close()


def run(
    runner: runner_mod.Runner,
    monkeypatch: pytest.MonkeyPatch,
    outcomes: list[bool],
) -> list[float]:
    """Run the loop over cycles that fail (False) or work (True) in turn;
    the waits between them."""
    watcher = runner.watcher
    waits: list[float] = []
    left = list(outcomes)

    def cycle(only: frozenset[str] | None = None) -> list[str]:
        if not left[0]:
            left.pop(0)
            raise ConnectionError("the database is out of reach")
        left.pop(0)
        return []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        if not left:
            runner._stopping.set()

    monkeypatch.setattr(watcher, "cycle", cycle)
    monkeypatch.setattr(watcher, "_sleep", sleep)
    # a cycle's own time is taken off the rest after it: here cycles take
    # none, whatever the machine's load (a loaded one made a 2 s rest 1.7)
    monkeypatch.setattr(watcher_mod, "time", _FrozenClock())
    watcher.run_forever()
    return waits


class _FrozenClock:
    """The watcher module's ``time``, its monotonic clock stopped."""

    @staticmethod
    def monotonic() -> float:
        return 1000.0

    @staticmethod
    def time() -> float:
        return time.time()


def near(value: float, expected: float, jitter: float = 0.1) -> bool:
    return expected * (1 - jitter) - 1e-9 <= value <= expected * (1 + jitter) + 1e-9


def test_failed_cycles_back_off_then_the_interval_comes_back(
    runner: runner_mod.Runner,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, "swflows.engine.watcher")
    outcomes = [True] + [False] * 6 + [True, True]
    waits = run(runner, monkeypatch, outcomes)
    expected = [2.0, 3.0, 4.5, 6.75, 10.0, 10.0, 10.0, 2.0, 2.0]
    assert len(waits) == len(expected)
    assert all(near(w, e) for w, e in zip(waits, expected, strict=True)), waits
    assert runner.watcher.failures["cycle"] == 6
    failed = [r for r in caplog.records if "cycle failed" in r.getMessage()]
    assert [r.levelno for r in failed] == [logging.ERROR] + [logging.DEBUG] * 5
    assert "(1 in a row" in failed[0].getMessage()
    assert "ConnectionError" in failed[0].getMessage()
    back = [r for r in caplog.records if "run again" in r.getMessage()]
    assert [r.getMessage() for r in back] == [
        "signal watcher: cycles run again, after 6 failed"
    ]


def test_the_waits_are_jittered(
    runner: runner_mod.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits = run(runner, monkeypatch, [False] * 30)
    assert len(waits) == 30
    assert len(set(waits)) > 1
    assert all(near(w, 10.0) for w in waits[-10:])


def test_a_failure_as_the_runner_stops_ends_the_loop(
    runner: runner_mod.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def cycle(only: frozenset[str] | None = None) -> list[str]:
        calls.append(1)
        runner._stopping.set()
        raise ConnectionError("gone")

    monkeypatch.setattr(runner.watcher, "cycle", cycle)
    runner.watcher.run_forever()
    assert calls == [1]
    assert runner.watcher.failures["cycle"] == 1


def test_no_cycle_once_woken_to_stop(
    runner: runner_mod.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def cycle(only: frozenset[str] | None = None) -> list[str]:
        calls.append(1)
        raise ConnectionError("gone")

    def sleep(seconds: float) -> None:
        runner._stopping.set()  # the runner closes during the backoff

    monkeypatch.setattr(runner.watcher, "cycle", cycle)
    monkeypatch.setattr(runner.watcher, "_sleep", sleep)
    runner.watcher.run_forever()
    assert calls == [1]


def test_the_backoff_is_a_tenacity_wait(runner: runner_mod.Runner) -> None:
    wait = runner.watcher._backoff()
    assert isinstance(wait, tenacity.wait.wait_base)
    assert "jitter=0.1" in repr(wait)
    state = tenacity.RetryCallState(tenacity.Retrying(), None, (), {})
    state.attempt_number = 10_000  # a long outage: capped, no overflow
    assert near(wait(state), 10.0)


def _slept(
    runner: runner_mod.Runner, seconds: float, *asks: tuple[float, str]
) -> float:
    """How long the watcher's rest of ``seconds`` lasted, with looks asked
    for (``"now"`` or ``"soon"``) at the given offsets from another thread."""
    import threading

    watcher = runner.watcher

    def ask() -> None:
        begun = time.monotonic()
        for at, how in asks:
            time.sleep(max(0.0, begun + at - time.monotonic()))
            (watcher.wake if how == "now" else watcher.wake_soon)()

    asker = threading.Thread(target=ask)
    started = time.monotonic()
    asker.start()
    watcher._sleep(seconds)
    lasted = time.monotonic() - started
    asker.join()
    return lasted


def test_a_parked_flow_asks_for_a_look_soon_and_a_burst_shares_it(
    runner: runner_mod.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A park asks for a look at once if the last one ended
    PARKED_LOOK_WITHIN ago, else by then, however cheap the last look was:
    the parks of a burst share it; a push still ends the rest at once."""
    watcher = runner.watcher
    # a quarter of the 2 s poll interval bounds it: 0.5 s, far from 0 and 5
    monkeypatch.setattr(pacing_mod, "PARKED_LOOK_WITHIN", 3.0)
    within = 0.5
    # the last look ended 1 s ago: a park's look is at once
    watcher.pacing.looked(time.monotonic() - 1.0)
    assert _slept(runner, 5.0, (0.0, "soon")) < within
    # no ask: the whole rest
    assert _slept(runner, 0.3) >= 0.3
    # the last look has just ended: parks wait for their bound
    watcher.pacing.looked(time.monotonic())
    # parks at 0, 0.1 and 0.2 s: one look, by the first park's bound
    lasted = _slept(runner, 5.0, (0.0, "soon"), (0.1, "soon"), (0.2, "soon"))
    assert within - 0.01 <= lasted < within + 1.5
    # again, however cheap that look was: a burst shares one too
    watcher.pacing.looked(time.monotonic())
    lasted = _slept(runner, 5.0, (0.0, "soon"), (0.1, "soon"))
    assert within - 0.01 <= lasted < within + 1.5
    # a push during the wait for a park's look: at once
    lasted = _slept(runner, 5.0, (0.0, "soon"), (0.01, "now"))
    assert lasted < within
    # a park asked for during a cycle: the next rest is cut to its bound
    runner.watcher.wake_soon()
    assert _slept(runner, 5.0) < within + 1.5


def test_parks_ask_for_a_look_at_themselves_until_a_full_one_is_due(
    runner: runner_mod.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between two polls, parks ask for a look at the flows parked since
    the last look, resting after it until the poll is due; a push, the
    poll come round, or too many parks ask for a look at every flow."""
    watcher = runner.watcher
    looks: list[frozenset[str] | None] = []
    rests: list[float] = []

    def cycle(only: frozenset[str] | None = None) -> list[str]:
        looks.append(only)
        return []

    monkeypatch.setattr(watcher, "cycle", cycle)
    monkeypatch.setattr(watcher, "_sleep", rests.append)
    watcher._iteration()
    assert looks == [None]
    assert 1.7 <= rests[-1] <= 2.2  # the poll interval, jittered
    watcher.wake_soon("f1")
    watcher.wake_soon("f2")
    watcher._iteration()
    assert looks[-1] == frozenset({"f1", "f2"})
    assert 0 < rests[-1] <= rests[0]  # until the poll is due, not a new one
    watcher._iteration()  # nothing parked meanwhile
    assert looks[-1] is None
    watcher.wake_soon("f3")
    watcher.wake()  # a push
    watcher._iteration()
    assert looks[-1] is None
    watcher.wake_soon("f4")
    watcher.pacing.full_due = time.monotonic() - 0.1  # the poll is due
    watcher._iteration()
    assert looks[-1] is None
    for i in range(pacing_mod.FRESH_LOOK_MOST + 1):
        watcher.wake_soon(f"g{i}")
    watcher._iteration()
    assert looks[-1] is None
    # a watcher standing by reads nothing: what parked is not kept for it
    watcher.wake_soon("f5")
    monkeypatch.setattr(type(watcher), "active", property(lambda self: False))
    monkeypatch.setattr(watcher, "stand_by", lambda: None)
    watcher._iteration()
    monkeypatch.undo()
    assert watcher.pacing.next_look() is None
