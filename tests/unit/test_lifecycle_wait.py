"""Lifecycle checks given ``wait``: an action whose flows are all parked
is waited for through the Completions; ``settle`` waits for the park."""

from __future__ import annotations

import dataclasses
import time
import types
from typing import Any

import pytest

from swflows import exceptions, states
from swflows.embedding.lifecycle import Lifecycle
from swflows.persistence import flow_registry as flow_rows
from tests.unit.test_cli_flow import parked_row


def row(flow_id: str, state: str) -> flow_rows.FlowRow:
    return dataclasses.replace(parked_row({}, state), id=flow_id)


class Waiter:
    """A Completions whose look sees the flows end (``ends``) or not."""

    def __init__(self, sw: FakeSwflows, ends: bool) -> None:
        self.sw = sw
        self.ends = ends
        self.added: list[str] = []
        self.pending: list[Any] = []

    def add(self, deployment_id: str, callback: Any) -> None:
        self.added.append(deployment_id)
        self.pending.append(callback)
        if self.ends:
            self.sw.rows = []
            callback(None)

    def discard(self, deployment_id: str, callback: Any) -> None:
        self.pending.remove(callback)


class FakeSwflows:
    """What a Lifecycle asks of Swflows: the flows, the runner, the row."""

    def __init__(self, rows: list[flow_rows.FlowRow], ends: bool = True) -> None:
        self.rows = rows
        self.waiter = Waiter(self, ends)
        self.looks = 0

    def list_flows(self, deployment_id: str | None = None) -> list[flow_rows.FlowRow]:
        self.looks += 1
        return list(self.rows)

    def show(self, deployment_id: str) -> Any:
        return types.SimpleNamespace(status=states.COMPLETE)


def lifecycle(sw: FakeSwflows, waits: bool = True) -> Lifecycle:
    return Lifecycle(sw, sw.waiter if waits else None)  # type: ignore[arg-type]


def test_a_parked_action_is_waited_for_and_its_end_read_at_once() -> None:
    sw = FakeSwflows([row("f1", flow_rows.PARKED), row("f2", flow_rows.PARKED)])
    assert lifecycle(sw).check_create_complete("d1", wait=5.0) is True
    assert sw.waiter.added == ["d1"]
    assert sw.waiter.pending == []  # its callback is not left behind
    assert sw.looks == 2  # before the wait, and after it to see it gone


def test_a_parked_flow_that_goes_on_waiting_reads_as_not_complete() -> None:
    sw = FakeSwflows([row("f1", flow_rows.PARKED)], ends=False)
    started = time.monotonic()
    assert lifecycle(sw).check_create_complete("d1", wait=0.2) is False
    assert time.monotonic() - started >= 0.2
    assert sw.waiter.added == ["d1"]
    assert sw.waiter.pending == []  # discarded once the wait gave up
    assert sw.looks == 1


@pytest.mark.parametrize(
    ("rows", "wait", "waits"),
    [
        ([row("f1", flow_rows.PARKED)], 0.0, True),  # no wait asked
        ([row("f1", flow_rows.PARKED)], 5.0, False),  # no Completions
        # at work: what it does next may need the embedder
        ([row("f1", flow_rows.RUNNING)], 5.0, True),
        ([row("f1", flow_rows.PARKED), row("f2", flow_rows.RUNNING)], 5.0, True),
    ],
)
def test_nothing_else_is_waited_for(
    rows: list[flow_rows.FlowRow], wait: float, waits: bool
) -> None:
    sw = FakeSwflows(rows)
    assert lifecycle(sw, waits).check_complete("d1", wait=wait) is False
    assert sw.waiter.added == []
    assert sw.looks == 1


def test_a_delete_check_waits_the_same_way() -> None:
    sw = FakeSwflows([row("f1", flow_rows.PARKED)])

    def gone(deployment_id: str) -> Any:
        raise exceptions.DeploymentNotFound(deployment_id)

    sw.show = gone  # type: ignore[method-assign]
    assert lifecycle(sw).check_delete_complete("d1", wait=2.0) is True
    assert sw.waiter.added == ["d1"]


class Parking(FakeSwflows):
    """A flow that parks at its ``parks_at``-th look."""

    def __init__(self, parks_at: int | None) -> None:
        super().__init__([row("f1", flow_rows.RUNNING)])
        self.parks_at = parks_at

    def list_flows(self, deployment_id: str | None = None) -> list[flow_rows.FlowRow]:
        found = super().list_flows(deployment_id)
        if self.parks_at is not None and self.looks >= self.parks_at:
            return [row("f1", flow_rows.PARKED)]
        return found


def test_settle_returns_once_the_flow_parked(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    sw = Parking(parks_at=4)
    assert lifecycle(sw).settle("d1", 60.0) is True
    assert sw.looks == 4
    # pauses that grow from the first, so a quick park is seen quickly
    assert slept == [0.02, 0.04, 0.08]


def test_settle_gives_up_at_its_timeout() -> None:
    sw = Parking(parks_at=None)
    assert lifecycle(sw).settle("d1", 0.1) is False
    assert sw.looks >= 2


def test_an_ended_action_or_none_is_settled() -> None:
    sw = FakeSwflows([])
    assert lifecycle(sw).settle("d1", 0.0) is True
    assert lifecycle(sw).settle(None, 0.0) is True
