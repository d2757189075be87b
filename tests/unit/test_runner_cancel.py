"""A custom flow asked to cancel while one of its steps runs starts no
further step: the write that would record the next step's start reads the
request in its transaction and refuses it.  No read of the flow's row is
made after each step for it (an embedded runner on SQLite, no cloud)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from taskflow import task
from taskflow.patterns import linear_flow

from swflows.engine import runner as runner_mod
from swflows.fixture import LocalSwflows
from swflows.persistence import flow_registry as flow_rows

#: per run: the steps that ran and those reverted, in order
RAN: dict[str, list[str]] = {}
#: per run: set once its first step runs, and what lets that step end
STARTED: dict[str, threading.Event] = {}
GO_ON: dict[str, threading.Event] = {}


class Step(task.Task):  # type: ignore[misc]
    def __init__(self, name: str, run: str) -> None:
        super().__init__(name=name, inject={"run": run}, provides=name)

    def execute(self, run: str) -> str:
        if self.name == "cancel.first" and run in GO_ON:
            STARTED[run].set()
            GO_ON[run].wait(30)
        RAN[run].append(self.name)
        return "done"

    def revert(self, run: str, **kwargs: Any) -> None:
        RAN[run].append(f"revert {self.name}")


def three_steps(run: str) -> Any:
    return linear_flow.Flow("cancel").add(
        Step("cancel.first", run), Step("cancel.second", run), Step("cancel.third", run)
    )


@pytest.fixture
def local() -> Iterator[LocalSwflows]:
    with LocalSwflows() as made:
        yield made


def test_a_cancel_during_a_step_stops_the_flow_before_its_next_step(
    local: LocalSwflows,
) -> None:
    run = "during"
    RAN[run], STARTED[run], GO_ON[run] = [], threading.Event(), threading.Event()
    flow_id = local.sw.run_flow(three_steps, run=run)
    assert STARTED[run].wait(30)
    local.sw.cancel_flow(flow_id, "not now")
    GO_ON[run].set()  # the first step ends; the second never starts
    with pytest.raises(runner_mod.FlowCancelled, match="not now"):
        local.sw.wait_flow(flow_id, timeout=30)
    assert local.sw.flow_result(flow_id)["state"] == "REVERTED"
    assert RAN[run][0] == "cancel.first"
    assert "cancel.second" not in RAN[run]
    assert "cancel.third" not in RAN[run]
    assert "revert cancel.first" in RAN[run]


def test_a_flow_not_cancelled_reads_its_row_for_a_cancel_no_more(
    local: LocalSwflows, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The steps' own writes read the row; nothing else asks after each
    step (three steps used to cost three reads of the note, and one more
    before the first)."""
    reads: list[str] = []
    asked = flow_rows.FlowRegistry.cancel_note

    def counted(self: flow_rows.FlowRegistry, flow_id: str) -> str | None:
        reads.append(flow_id)
        return asked(self, flow_id)

    monkeypatch.setattr(flow_rows.FlowRegistry, "cancel_note", counted)
    run = "quiet"
    RAN[run] = []
    flow_id = local.sw.run_flow(three_steps, run=run)
    assert local.sw.wait_flow(flow_id, timeout=30)["state"] == "SUCCESS"
    assert RAN[run] == ["cancel.first", "cancel.second", "cancel.third"]
    assert flow_id not in reads
