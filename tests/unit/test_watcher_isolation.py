"""The watcher contains a failure handling one parked flow: the others are
looked after in the same cycle, and a deployment whose own data keeps
failing ends FAILED (``internal_error``) instead of waiting forever."""

from __future__ import annotations

import time
from typing import Any

import pytest

from swflows import model, outcomes, states
from swflows.engine import containment
from swflows.engine import runner as runner_mod


def parked(runner: runner_mod.Runner, **waiting: Any) -> str:
    """A waiting deployment and its parked flow; the deployment's id."""
    dep = runner.services.store.create_deployment(
        model.Deployment(
            id=model.new_id(),
            server_id="srv",
            config_id=None,
            source_config_id=None,
            action="CREATE",
            status=states.IN_PROGRESS,
        )
    )
    flow_id = f"flow-{dep.id}"
    runner.registry.add(
        flow_id,
        kind="deploy",
        deployment_id=dep.id,
        server_id="srv",
        owner=runner.owner,
        lease_until=time.time() + 30,
    )
    values = {
        "transport": "NO_SIGNAL",
        "options": {},
        "store": {},
        "deployment_id": dep.id,
        "generation": dep.generation,
        "timeout": 60,
        "deadline": time.time() + 60,
        "pickup_deadline": None,
        "delivery_timeout": 0,
        "picked_up": False,
        "seen": None,
        **waiting,
    }
    assert runner.registry.park(flow_id, runner.owner, values)
    return str(dep.id)


def status(runner: runner_mod.Runner, deployment_id: str) -> model.Deployment:
    return runner.services.store.get_deployment(deployment_id)


def test_a_broken_row_stalls_no_other_and_ends_failed(
    runner: runner_mod.Runner, caplog: pytest.LogCaptureFixture
) -> None:
    broken = parked(runner, deadline="soon")
    late = parked(runner, deadline=time.time() - 1)  # its timeout has passed
    waiting = parked(runner)
    watcher = runner.watcher
    watcher.cycle()
    assert (status(runner, late).reason or {})[
        "kind"
    ] == states.ReasonKind.TIMEOUT.value
    assert status(runner, broken).status == states.IN_PROGRESS
    for _ in range(containment.MAX_DATA_FAILURES - 1):
        watcher.cycle()
    ended = status(runner, broken)
    assert ended.status == states.FAILED
    assert ended.reason == {
        "kind": states.ReasonKind.INTERNAL_ERROR.value,
        "detail": "ValueError: could not convert string to float: 'soon'",
        "attempts": containment.MAX_DATA_FAILURES,
    }
    assert status(runner, waiting).status == states.IN_PROGRESS
    assert watcher.failures["check"] == containment.MAX_DATA_FAILURES
    # logged once, on one line
    told = [r for r in caplog.records if "failed for flow" in r.getMessage()]
    assert len(told) == 1
    assert "ValueError" in told[0].getMessage()


def test_an_outage_is_not_held_against_a_flow(
    runner: runner_mod.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlalchemy as sa

    deployment_id = parked(runner)
    watcher = runner.watcher

    def down(*args: Any, **kwargs: Any) -> bool:
        raise sa.exc.OperationalError("UPDATE", {}, Exception("refused"))

    monkeypatch.setattr(watcher, "_check", down)
    for _ in range(containment.MAX_DATA_FAILURES * 2):
        watcher.cycle()
    assert watcher.failures["check"] == containment.MAX_DATA_FAILURES * 2
    assert status(runner, deployment_id).status == states.IN_PROGRESS


def test_a_row_that_cannot_be_ended_is_set_aside(
    runner: runner_mod.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    deployment_id = parked(runner, deadline="soon")
    monkeypatch.setattr(
        outcomes,
        "record_outcome",
        lambda *args: (_ for _ in ()).throw(ValueError("refused by the database")),
    )
    for _ in range(containment.MAX_DATA_FAILURES):
        runner.watcher.cycle()
    (row,) = runner.registry.find(deployment_id=deployment_id)
    assert row.state == "BROKEN"
    assert row.note is not None and "ValueError" in row.note


def test_each_transport_is_read_at_once_with_the_others(
    runner: runner_mod.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow transport (a read per Zaqar queue) holds no other transport's
    look up: each is read at once, on the runner's workers."""
    slow = parked(runner, transport="SLOW", store={"s": 1})
    fast = parked(runner, transport="FAST", store={"f": 1})
    watcher = runner.watcher
    seen: dict[str, tuple[float, float]] = {}

    def reads(services: Any, name: str, options: Any, members: Any) -> dict[str, Any]:
        began = time.monotonic()
        time.sleep(1.0 if name == "SLOW" else 0.01)
        seen[name] = (began, time.monotonic())
        return {}

    monkeypatch.setattr(watcher.reader, "_reads", reads)
    watcher.cycle()
    assert set(seen) == {"SLOW", "FAST"}
    (slow_began, slow_ended), (fast_began, fast_ended) = seen["SLOW"], seen["FAST"]
    # the fast one neither waited for the slow one nor was waited for
    assert fast_began < slow_ended and slow_began < fast_ended
    assert status(runner, slow).status == states.IN_PROGRESS
    assert status(runner, fast).status == states.IN_PROGRESS


def test_a_deeply_nested_signal_is_refused_like_any_malformed_one() -> None:
    """900 levels once overflowed the code that handles a signal, and the
    deployment ended ``internal_error`` after three failed tries: it is a
    signal swflows refuses, read by the watcher or handed by an embedder."""
    from swflows.fixture import LocalSwflows

    def deep(item: Any) -> dict[str, Any]:
        nested: Any = "bottom"
        for _ in range(900):
            nested = [nested]
        return {"deploy_status_code": 0, "result": nested}

    with LocalSwflows(answer=deep) as local:
        sw = local.sw
        config = sw.create_config(
            "app", "#!/bin/sh\n", group="script", outputs=[{"name": "result"}]
        )
        dep = sw.deploy(local.new_server(), config.id, wait_timeout=60)
        assert dep.status == states.FAILED
        assert dep.reason is not None
        assert dep.reason["kind"] == states.ReasonKind.SIGNAL_REJECTED.value
        assert "nests deeper than 64 levels" in dep.status_reason
        # what an embedder hands to signal(): the same outcome
        outcome = outcomes.outcome_from_payload(sw.services, dep, deep(None))
        assert outcome is not None
        assert outcome.reason["kind"] == states.ReasonKind.SIGNAL_REJECTED.value
