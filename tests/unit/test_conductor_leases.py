"""A conductor on Redis knows its claim is its own, without asking the
board, for most of the claim's expiry after the board took or extended it;
past that (a paused conductor, a heartbeat that failed) each step asks."""

from __future__ import annotations

import threading
import types
from collections.abc import Iterator
from typing import Any

import pytest
from taskflow import states as tf_states

from swflows.api import Swflows
from swflows.clients.cloud import Clients
from swflows.engine import conductor
from swflows.fixture import LocalSwflows
from tests.unit.test_runner_fencing import (
    GATES,
    RAN,
    STARTED,
    MemoryBoard,
    gated,
    until,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def job(name: str = "j") -> Any:
    return types.SimpleNamespace(uuid=name)


def test_a_claim_is_sure_for_its_share_of_the_expiry_from_the_call() -> None:
    clock = Clock()
    leases = conductor.ClaimLeases(24.0, clock)
    first = job()
    assert not leases.sure(first)  # never taken: ask
    leases.taken(first, sent=clock.now)
    clock.now += 23.9
    assert leases.sure(first)
    clock.now += 0.2
    assert not leases.sure(first)


def test_an_extension_counts_only_while_the_claim_was_still_sure() -> None:
    clock = Clock()
    leases = conductor.ClaimLeases(24.0, clock)
    first = job()
    leases.taken(first, sent=clock.now)
    clock.now += 10
    leases.extended(first, sent=clock.now)  # sent while sure: renewed
    clock.now += 20
    assert leases.sure(first)
    clock.now += 10  # paused past it: whose claim was extended is unknown
    leases.extended(first, sent=clock.now)
    assert not leases.sure(first)
    clock.now += 1
    assert not leases.sure(first)


def test_a_settled_claim_and_one_of_a_zookeeper_board_are_never_sure() -> None:
    clock = Clock()
    leases = conductor.ClaimLeases(24.0, clock)
    first = job()
    leases.taken(first, sent=clock.now)
    leases.drop(first)
    assert not leases.sure(first)
    never = conductor.ClaimLeases(0.0, clock)
    never.taken(first, sent=clock.now)
    assert not never.sure(first)


class CountingRedisBoard(MemoryBoard):
    """The memory board, taken for a Redis one; counts the owner lookups."""

    kind = "redis"

    def __init__(self) -> None:
        super().__init__(claim_expiry=30.0)
        self.lookups = 0

    def owner(self, job: Any) -> str | None:
        self.lookups += 1
        return super().owner(job)


#: the instances :func:`drive` made, closed after each test (their group
#: driver runs beside the conductor's runner until then)
MADE: list[Swflows] = []


@pytest.fixture
def local() -> Iterator[LocalSwflows]:
    with LocalSwflows() as made:
        try:
            yield made
        finally:
            while MADE:
                MADE.pop().close()


def drive(local: LocalSwflows, clock: Clock, gate: str, *, paused: bool) -> Any:
    """Drive the gated flow under a conductor; with ``paused``, the clock
    jumps past the claim's sure time while its middle step runs, and the
    board gives the claim to another meanwhile."""
    STARTED[gate], GATES[gate] = threading.Event(), threading.Event()
    sw = Swflows(local.store, Clients(), local.conf, start=False)
    MADE.append(sw)
    board = CountingRedisBoard()
    driver = conductor.Conductor(sw, board=board, workers=2)  # type: ignore[arg-type]
    driver.leases.clock = clock
    sw.adopt_runner(driver.runner)
    try:
        board.announce(driver.name, {})
        flow_id = sw.run_flow(gated, gate=gate)
        assert driver.claim_some() == [flow_id]
        assert STARTED[gate].wait(30)
        if paused:
            clock.now += board.claim_expiry  # a conductor thawed past it
            board.drop_claims(driver.name)
            (posted,) = board.jobs()
            assert board.claim(posted, "other-conductor")
        GATES[gate].set()
        until(lambda: driver.runner.drives_now(flow_id) is None, 30)
        return board, [step for g, step in RAN if g == gate], flow_id, sw
    finally:
        GATES[gate].set()
        driver.close()


def test_a_conductor_asks_the_board_nothing_before_steps_while_its_claim_is_sure(
    local: LocalSwflows,
) -> None:
    board, ran, flow_id, sw = drive(local, Clock(), "sure", paused=False)
    assert ran == ["fence.before", "fence.held", "fence.after"]
    assert sw.wait_flow(flow_id, timeout=30)["state"] == tf_states.SUCCESS
    assert board.lookups == 0


def test_a_conductor_thawed_past_its_claim_asks_and_runs_no_further_step(
    local: LocalSwflows,
) -> None:
    board, ran, _, _ = drive(local, Clock(), "thawed", paused=True)
    # the step that ran through the pause ends; the next one never starts
    assert ran == ["fence.before", "fence.held"]
    assert board.lookups >= 1
