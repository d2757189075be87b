"""A timeout names the stage its deployment stopped at: published (the
server never picked it up), picked up (it read its metadata) or started
(its agent said "started"), so a dead server is told from a hung hook."""

from __future__ import annotations

import time

import pytest

from swflows import signals, states
from swflows.engine import runner as runner_mod
from swflows.persistence import flow_registry
from tests.unit.test_watcher_isolation import parked, status


@pytest.mark.parametrize(
    ("waiting", "stage"),
    [
        ({"picked_up": False}, signals.PUBLISHED),
        ({"picked_up": True}, signals.PICKED_UP),
        ({"picked_up": True, "started_at": 5.0}, signals.STARTED),
    ],
)
def test_the_stage_a_wait_reached(waiting: dict[str, object], stage: str) -> None:
    assert signals.stage_of(waiting) == stage


def test_a_timeout_names_its_stage() -> None:
    plain = signals.timeout_outcome(120)
    assert plain.status_reason == "Deployment timed out: no signal within 120 seconds"
    assert plain.reason == {"kind": "timeout", "timeout": 120}
    said = {stage: signals.timeout_outcome(120, stage) for stage in signals.STAGES}
    for stage, outcome in said.items():
        assert outcome.status == states.FAILED
        assert outcome.reason == {"kind": "timeout", "timeout": 120, "stage": stage}
        assert outcome.status_reason.startswith(plain.status_reason + "; stopped at: ")
    assert "no sign that the server picked it up" in said["published"].status_reason
    assert "the server read its metadata" in said["picked_up"].status_reason
    assert "the hook still runs, or hung" in said["started"].status_reason
    assert signals.storable_outcome(said["started"]).reason["stage"] == "started"


def test_the_first_pickup_and_start_are_kept() -> None:
    first = flow_registry.picked_up({"picked_up": False}, 10.0)
    assert first == {"picked_up": True, "picked_up_at": 10.0}
    assert flow_registry.picked_up(first, 20.0)["picked_up_at"] == 10.0
    begun = flow_registry.started(first, 30.0)
    assert begun == {"picked_up": True, "picked_up_at": 10.0, "started_at": 30.0}
    assert flow_registry.started(begun, 40.0) == begun
    # a "started" signal with no metadata read seen: picked up then too
    assert flow_registry.started({}, 5.0)["picked_up_at"] == 5.0


def test_the_watcher_times_each_out_at_its_stage(runner: runner_mod.Runner) -> None:
    soon = time.time() + 0.5
    read = parked(runner, deadline=soon)
    begun = parked(runner, deadline=soon)
    runner.registry.mark_picked_up("srv")  # both read their metadata ...
    runner.registry.mark_started(begun)  # ... and one said "started"
    published = parked(runner, deadline=soon)  # never seen
    time.sleep(0.6)
    runner.watcher.cycle()
    for deployment_id, stage in (
        (published, "published"),
        (read, "picked_up"),
        (begun, "started"),
    ):
        ended = status(runner, deployment_id)
        assert ended.status == states.FAILED
        assert (ended.reason or {}).get("stage") == stage, ended.reason
        assert f"stopped at: {stage.replace('_', ' ')}" in ended.status_reason


def test_a_started_signal_handed_by_an_embedder_counts() -> None:
    """The agent's "started" delivered through ``signal()`` (as an
    embedder hands it on) is that stage too, and the server is seen."""
    from swflows.fixture import LocalSwflows

    with LocalSwflows(overrides={"deployment_timeout": 3}) as local:
        local.agent.published = lambda document: None  # type: ignore[method-assign]
        sw = local.sw
        config = sw.create_config("app", "#!/bin/sh\n", group="script")
        dep = sw.deploy("srv-x", config.id, wait=False)
        until = time.monotonic() + 30
        while not [r for r in sw.list_flows() if r.state == "PARKED"]:
            assert time.monotonic() < until, sw.list_flows()
            time.sleep(0.05)
        assert sw.list_servers()[0]["last_seen"] is None
        assert sw.signal(dep.id, signals.progress_payload())
        final = sw.wait(dep.id, 30)
        assert final.status == states.FAILED
        assert (final.reason or {}).get("stage") == "started", final.reason
        (server,) = sw.list_servers()
        assert server["server_id"] == "srv-x" and server["last_seen"]
