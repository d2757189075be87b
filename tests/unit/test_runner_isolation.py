"""The runner contains a failure resuming one flow, and takes over its own
flows left undriven (their end could not be recorded through an outage)."""

from __future__ import annotations

import time
from typing import Any

import pytest
import sqlalchemy as sa

from swflows.engine import driving
from swflows.engine import runner as runner_mod
from swflows.persistence import flow_registry as flow_rows
from tests.unit.test_runner_resume import FakeEngine, StoppedStorage


def add(runner: runner_mod.Runner, flow_id: str, lease_until: float) -> None:
    runner.registry.add(
        flow_id,
        kind="deploy",
        deployment_id=f"d-{flow_id}",
        server_id="s1",
        owner=runner.owner,
        lease_until=lease_until,
    )


def test_its_own_flow_left_undriven_is_taken_over(runner: runner_mod.Runner) -> None:
    add(runner, "mine", time.time() - 1)  # lease ran out, nothing drives it
    add(runner, "live", time.time() + 60)
    assert [row.id for row in runner.interrupted()] == ["mine"]
    runner.resume_interrupted()
    # it had no logbook: it never started, and is removed
    assert runner.registry.get("mine") is None
    live = runner.registry.get("live")
    assert live is not None and live.state == flow_rows.RUNNING


def test_a_flow_whose_end_is_being_recorded_is_not_taken_over(
    runner: runner_mod.Runner,
) -> None:
    add(runner, "f1", time.time() - 1)
    runner._recording.add("f1")
    assert runner.interrupted() == []
    assert runner.resume_interrupted() == []
    assert runner.registry.get("f1") is not None


def test_one_flow_failing_to_resume_stops_no_other(
    runner: runner_mod.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    add(runner, "bad", time.time() - 1)
    add(runner, "good", time.time() - 1)
    loaded: list[str] = []

    def load(flow_id: str) -> bool:
        if flow_id == "bad":
            raise KeyError("a stored value does not read back")
        loaded.append(flow_id)
        return True

    monkeypatch.setattr(runner, "_load_and_submit", load)
    assert runner.resume_interrupted() == ["good"]
    assert loaded == ["good"]
    assert runner.failures["resume"] == 1
    bad = runner.registry.get("bad")
    # released, the failure counted: one failing every time is set aside
    assert bad is not None and bad.owner is None and bad.takeovers == 1


def test_an_outage_while_resuming_is_not_counted_against_the_flow(
    runner: runner_mod.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    add(runner, "f1", time.time() - 1)

    def load(flow_id: str) -> bool:
        raise sa.exc.OperationalError("SELECT", {}, Exception("connection refused"))

    monkeypatch.setattr(runner, "_load_and_submit", load)
    assert runner.resume_interrupted() == []
    row = runner.registry.get("f1")
    assert row is not None and row.owner is None and row.takeovers == 0


def test_recording_an_end_is_retried_through_an_outage(
    runner: runner_mod.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    add(runner, "f1", time.time() + 30)
    release = runner.registry.release
    calls: list[Any] = []

    def flaky(*args: Any, **kwargs: Any) -> bool:
        calls.append(kwargs)
        if len(calls) < 3:
            raise sa.exc.OperationalError("UPDATE", {}, Exception("refused"))
        return release(*args, **kwargs)

    monkeypatch.setattr(runner.registry, "release", flaky)
    engine = FakeEngine(StoppedStorage())  # type: ignore[arg-type]
    down = sa.exc.OperationalError("UPDATE", {}, Exception("refused"))
    runner.through_outage(
        lambda: runner._after_run(driving._Drive("f1", engine, {}), down), "test"
    )
    assert len(calls) == 3
    # the flow stopped on an outage: released, not counted against it
    row = runner.registry.get("f1")
    assert row is not None and row.owner is None and row.takeovers == 0


def save_deploy_logbook(runner: runner_mod.Runner, flow_id: str, *atoms: Any) -> None:
    """A deploy flow's logbook as its launch writes it, with ``atoms``."""
    from taskflow.persistence import models

    from swflows import flows

    book = models.LogBook("swflows-deploy-x", uuid=flow_id)
    detail = models.FlowDetail("swflows.deploy", uuid=flow_id)
    detail.meta[runner_mod.META_KEY] = {
        "kind": "deploy",
        "version": flows.VERSIONS["deploy"],
        "deployment_id": f"d-{flow_id}",
    }
    for atom in atoms:
        detail.add(atom)
    book.add(detail)
    with runner._connection() as conn:
        conn.save_logbook(book)


def test_a_launch_killed_before_its_inputs_were_stored_is_removed(
    runner: runner_mod.Runner,
) -> None:
    """A runner killed between writing a flow's logbook and storing its
    inputs: the flow is removed at takeover, not rebuilt (it could not run:
    its steps' inputs are missing) and set aside after five tries."""
    flow_id = "f-unlaunched"
    add(runner, flow_id, lease_until=time.time() - 1)
    save_deploy_logbook(runner, flow_id)
    assert runner._load_and_submit(flow_id) is False
    assert runner.registry.get(flow_id) is None
    assert runner.interrupted() == []
    with runner._connection() as conn, pytest.raises(Exception):  # noqa: B017
        conn.get_logbook(flow_id)


def _inputs_row_without_values() -> Any:
    """The row TaskFlow adds for a flow's inputs before writing their
    values: a runner can die between the two writes."""
    from taskflow.persistence import models

    from swflows.engine import takeover

    return models.TaskDetail(takeover.INJECTOR, uuid="inputs-" + str(time.time()))


def test_a_launch_killed_between_its_inputs_row_and_their_values_is_removed(
    runner: runner_mod.Runner,
) -> None:
    """A runner killed after TaskFlow added the inputs' row but before it
    wrote their values: such a flow cannot be loaded (TaskFlow reads the
    values' keys), and raised AttributeError at each takeover until it was
    set aside, its group member waiting on it for ever.  It never ran a
    step: it is removed, as one without the row is."""
    flow_id = "f-half-launched"
    add(runner, flow_id, lease_until=time.time() - 1)
    save_deploy_logbook(runner, flow_id, _inputs_row_without_values())
    assert runner.resume_interrupted() == []
    assert runner.failures["resume"] == 0
    assert runner.registry.get(flow_id) is None
    with runner._connection() as conn, pytest.raises(Exception):  # noqa: B017
        conn.get_logbook(flow_id)


def noted_flow(flow_id: str) -> Any:
    """A custom flow of one step that notes the id it was given."""
    from taskflow import task
    from taskflow.patterns import linear_flow

    class Note(task.Task):  # type: ignore[misc]
        def execute(self, flow_id: str) -> str:
            NOTED.append(flow_id)
            return flow_id

    return linear_flow.Flow("noted").add(Note("note"))


NOTED: list[str] = []


def test_a_custom_flow_killed_between_its_inputs_row_and_their_values_runs(
    runner: runner_mod.Runner,
) -> None:
    """The same half-written inputs row in a custom flow (its inputs are
    only its id: its factory's arguments are stored with the flow): it is
    given its id again and runs."""
    from taskflow import engines
    from taskflow.persistence import models

    from swflows.engine import launching

    flow_id = "f-half-custom"
    runner.registry.add(
        flow_id,
        kind=runner_mod.CUSTOM,
        deployment_id="",
        server_id="",
        owner=runner.owner,
        lease_until=time.time() - 1,
    )
    book = models.LogBook(f"swflows-custom-{flow_id}", uuid=flow_id)
    book.meta = {runner_mod.META_KEY: {"kind": runner_mod.CUSTOM}}
    detail = models.FlowDetail("noted", uuid=flow_id)
    engines.save_factory_details(detail, noted_flow, [], {"flow_id": flow_id})
    detail.meta[runner_mod.META_KEY] = {
        "kind": runner_mod.CUSTOM,
        "factory": launching.factory_path(noted_flow),
    }
    detail.add(_inputs_row_without_values())
    book.add(detail)
    with runner._connection() as conn:
        conn.save_logbook(book)
    NOTED.clear()
    assert runner.resume_interrupted() == [flow_id]
    runner.wait(flow_id, timeout=30)
    assert NOTED == [flow_id]
    assert runner.failures["resume"] == 0
