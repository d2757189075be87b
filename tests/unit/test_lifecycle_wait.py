"""Lifecycle checks given ``wait``: only an action's one flow, parked by
this process's runner, is waited for; ``settle`` waits for the park."""

from __future__ import annotations

import datetime
import time
import types
from typing import Any

import pytest

from swflows import exceptions, states
from swflows.embedding.lifecycle import Lifecycle
from swflows.persistence import flow_registry as flow_rows


def row(flow_id: str, state: str) -> flow_rows.FlowRow:
    return flow_rows.FlowRow(
        id=flow_id,
        kind="deploy",
        deployment_id="d1",
        server_id="s1",
        state=state,
        owner="here",
        lease_until=None,
        waiting=None,
        takeovers=0,
        note=None,
        created_at=datetime.datetime(2026, 1, 1),
    )


class Runner:
    def __init__(self, sw: FakeSwflows, ends: bool) -> None:
        self.sw = sw
        self.ends = ends
        self.waits: list[tuple[str, float]] = []

    def ended_here(self, flow_id: str, timeout: float) -> bool:
        self.waits.append((flow_id, timeout))
        if self.ends:
            self.sw.rows = []
        return self.ends


class FakeSwflows:
    """What a Lifecycle asks of Swflows: the flows, the runner, the row."""

    def __init__(self, rows: list[flow_rows.FlowRow], ends: bool = True) -> None:
        self.rows = rows
        self.runner = Runner(self, ends)
        self.looks = 0

    def list_flows(self, deployment_id: str | None = None) -> list[flow_rows.FlowRow]:
        self.looks += 1
        return list(self.rows)

    def show(self, deployment_id: str) -> Any:
        return types.SimpleNamespace(status=states.COMPLETE)


def lifecycle(sw: FakeSwflows) -> Lifecycle:
    return Lifecycle(sw)  # type: ignore[arg-type]


def test_the_one_parked_flow_is_waited_for_and_its_end_read_at_once() -> None:
    sw = FakeSwflows([row("f1", flow_rows.PARKED)])
    assert lifecycle(sw).check_create_complete("d1", wait=5.0) is True
    assert sw.runner.waits == [("f1", 5.0)]
    assert sw.looks == 2  # before the wait, and after it to see it gone


def test_a_parked_flow_that_goes_on_waiting_reads_as_not_complete() -> None:
    sw = FakeSwflows([row("f1", flow_rows.PARKED)], ends=False)
    assert lifecycle(sw).check_create_complete("d1", wait=5.0) is False
    assert sw.runner.waits == [("f1", 5.0)]
    assert sw.looks == 1


@pytest.mark.parametrize(
    ("rows", "wait"),
    [
        ([row("f1", flow_rows.PARKED)], 0.0),  # no wait asked
        ([row("f1", flow_rows.RUNNING)], 5.0),  # its metadata may be pushed yet
        ([row("f1", flow_rows.PARKED), row("f2", flow_rows.PARKED)], 5.0),
    ],
)
def test_nothing_else_is_waited_for(rows: list[flow_rows.FlowRow], wait: float) -> None:
    sw = FakeSwflows(rows)
    assert lifecycle(sw).check_complete("d1", wait=wait) is False
    assert sw.runner.waits == []
    assert sw.looks == 1


def test_a_delete_check_waits_the_same_way() -> None:
    sw = FakeSwflows([row("f1", flow_rows.PARKED)])

    def gone(deployment_id: str) -> Any:
        raise exceptions.DeploymentNotFound(deployment_id)

    sw.show = gone  # type: ignore[method-assign]
    assert lifecycle(sw).check_delete_complete("d1", wait=2.0) is True
    assert sw.runner.waits == [("f1", 2.0)]


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
