"""Honest waits: a deploy whose flow has not written its deployment when
the wait ends says so (WaitTimeout naming the deployment, never
DeploymentNotFound: the flow runs later all the same), and a deploy made
again under the id it chose returns that deployment instead of deploying
twice (SQLite, the in-process agent; the flow held by a failpoint, as a
busy installation with no conductor free would hold it)."""

from __future__ import annotations

import datetime
import pathlib
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from swflows import exceptions, failpoints, model, states
from swflows.fixture import LocalSwflows

HELD = "deployment.create"


@pytest.fixture
def local() -> Iterator[LocalSwflows]:
    with LocalSwflows() as made:
        yield made


@pytest.fixture
def held() -> Iterator[threading.Event]:
    """The flows that write a deployment wait until this is set."""
    release = threading.Event()
    with failpoints.armed(HELD, failpoints.stall(30, until=release)):
        try:
            yield release
        finally:
            release.set()


def test_a_wait_that_ends_before_the_deployment_is_written_names_it(
    local: LocalSwflows, held: threading.Event
) -> None:
    sw = local.sw
    config = sw.create_config("app", "#!/bin/sh\n", group="script")
    server = local.new_server()
    chosen = model.new_id()
    with pytest.raises(exceptions.WaitTimeout) as caught:
        sw.deploy(server, config.id, deployment_id=chosen, wait=False, wait_timeout=0.3)
    assert not isinstance(caught.value, exceptions.DeploymentNotFound)
    assert caught.value.deployment_id == chosen
    assert caught.value.started is False
    assert chosen in str(caught.value) and "not started" in str(caught.value)
    # a blocking wait says the same
    with pytest.raises(exceptions.WaitTimeout) as blocking:
        sw.deploy(server, config.id, wait_timeout=0.3)
    assert blocking.value.started is False
    # made again meanwhile: the same flow, not a second one
    with pytest.raises(exceptions.WaitTimeout):
        sw.deploy(server, config.id, deployment_id=chosen, wait=False, wait_timeout=0.3)
    assert len(sw.list_flows(deployment_id=chosen)) == 1
    # another config under that id is refused, even before it is written
    other = sw.create_config("other", "#!/bin/sh\n", group="script")
    with pytest.raises(exceptions.DeploymentExists, match="config"):
        sw.deploy(server, other.id, deployment_id=chosen, wait=False)
    held.set()  # the flow goes on: the deployment is made, once
    done = sw.wait(chosen, timeout=30)
    assert done.status == states.COMPLETE
    assert sw.deploy(server, config.id, deployment_id=chosen).id == chosen
    assert sw.wait(blocking.value.deployment_id, timeout=30).status == states.COMPLETE
    assert len(local.agent.ran) == 2  # each deployment ran once


def test_a_blocking_wait_ends_at_its_bound_not_at_the_next_look(
    held: threading.Event,
) -> None:
    """A wait shorter than the watcher's poll interval ends when asked: it
    had slept a whole interval, by which time the flow could have started
    and the error said "still running" of a deployment never shown."""
    with LocalSwflows(overrides={"watcher": {"poll_interval": 5}}) as local:
        config = local.sw.create_config("app", "#!/bin/sh\n", group="script")
        begun = time.monotonic()
        with pytest.raises(exceptions.WaitTimeout) as caught:
            local.sw.deploy(local.new_server(), config.id, wait_timeout=0.05)
        assert time.monotonic() - begun < 2
        assert caught.value.started is False
        held.set()
        assert local.sw.wait(caught.value.deployment_id, timeout=30).is_terminal


def test_a_wait_for_a_custom_flows_outcome_ends_at_its_bound() -> None:
    """A deployment a custom flow works on is waited for by looking at its
    status every poll interval; the last look comes at the bound, not one
    whole interval after it."""
    from types import SimpleNamespace

    from swflows.api import results

    waiter = object.__new__(results.Results)
    waiter.conf = SimpleNamespace(watcher=SimpleNamespace(poll_interval=5))
    looks: list[float] = []

    def show(deployment_id: str) -> Any:
        looks.append(time.monotonic())
        return SimpleNamespace(status=states.IN_PROGRESS)

    waiter.show = show  # type: ignore[method-assign,assignment]
    begun = time.monotonic()
    with pytest.raises(exceptions.WaitTimeout):
        waiter._wait_outcome("deployment", 0.3)
    assert time.monotonic() - begun < 2
    assert len(looks) >= 2  # the first at once, the last at the bound
    assert looks[-1] - begun >= 0.3


def test_a_failed_flow_whose_outcome_comes_late_still_fails_its_waiter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A flow's row goes before its outcome is set: a drive held between
    the two for longer than the poll interval (a busy machine) had a
    blocking deploy return the deployment FAILED, as if its flow had
    succeeded, instead of raising the flow's error."""
    with LocalSwflows(overrides={"watcher": {"poll_interval": 0.1}}) as local:
        runner = local.sw.runner
        finish = runner._finish

        def late(flow_id: str, error: BaseException | None) -> None:
            time.sleep(1.0)
            finish(flow_id, error)

        monkeypatch.setattr(runner, "_finish", late)
        config = local.sw.create_config("app", "#!/bin/sh\n", group="script")
        unpublishable = exceptions.SwflowsError("the metadata could not be published")
        with (
            failpoints.armed("metadata.publish", failpoints.fail(unpublishable)),
            pytest.raises(exceptions.SwflowsError, match="could not be published"),
        ):
            local.sw.deploy(local.new_server(), config.id, wait_timeout=30)


def test_only_a_kept_failure_past_its_hour_is_forgotten() -> None:
    """A deploy that reverts before writing its deployment keeps why in
    its logbook; the sweep forgets it after an hour, never the logbook of
    a flow still running, nor a failure kept less than the hour."""
    from swflows.persistence import flow_registry as flow_rows

    failing, release = threading.Event(), threading.Event()

    def create(name: str) -> None:
        if failing.is_set():
            raise failpoints.FailpointError(name)
        release.wait(30)

    # an engine each: a round held in one flow's step would hold the other
    rounds_off = {"runner": {"launch_batch": 0}}
    with (
        LocalSwflows(overrides=rounds_off) as local,
        failpoints.armed("deployment.create", create),
    ):
        sw = local.sw
        registry = sw.runner.registry
        config = sw.create_config("app", "#!/bin/sh\n", group="script")
        hour_on = model.utcnow() + datetime.timedelta(
            seconds=flow_rows.KEPT_FAILURE_SECONDS + 60
        )
        with pytest.raises(exceptions.WaitTimeout) as queued:
            sw.deploy(local.new_server(), config.id, wait=False, wait_timeout=0.01)
        running = queued.value.deployment_id
        while failpoints.hits("deployment.create") < 1:
            time.sleep(0.01)
        failing.set()
        with pytest.raises(failpoints.FailpointError):  # its own error, here
            sw.deploy(local.new_server(), config.id, wait_timeout=30)
        assert flow_rows.forget_kept_failures(registry) == 0
        assert flow_rows.forget_kept_failures(registry, now=hour_on) == 1
        assert flow_rows.forget_kept_failures(registry, now=hour_on) == 0
        assert sw.list_flows(deployment_id=running) != []  # still running
        failing.clear()
        release.set()
        assert sw.wait(running, timeout=30).is_terminal


def test_a_deploy_made_again_returns_the_deployment_it_made(
    local: LocalSwflows,
) -> None:
    sw = local.sw
    config = sw.create_config(
        "app", "#!/bin/sh\n", group="script", inputs=[{"name": "x"}]
    )
    server = local.new_server()
    first = sw.deploy(server, config.id, input_values={"x": "1"})
    assert first.status == states.COMPLETE
    again = sw.deploy(
        server, config.id, input_values={"x": "1"}, deployment_id=first.id, wait=False
    )
    assert (again.id, again.generation, again.status) == (
        first.id,
        first.generation,
        states.COMPLETE,
    )
    assert sw.list_flows(deployment_id=first.id) == []
    assert len(local.agent.ran) == 1
    with pytest.raises(exceptions.DeploymentExists, match="other input values"):
        sw.deploy(server, config.id, input_values={"x": "2"}, deployment_id=first.id)
    with pytest.raises(exceptions.DeploymentExists, match="server"):
        sw.deploy(
            local.new_server(),
            config.id,
            input_values={"x": "1"},
            deployment_id=first.id,
        )
    assert len(local.agent.ran) == 1


def test_the_readme_example_of_a_deploy_made_again(
    local: LocalSwflows, held: threading.Event
) -> None:
    readme = pathlib.Path(__file__).resolve().parents[2] / "README.md"
    section = readme.read_text().split("**A wait that ends early", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README has no example under 'A wait that ends early'"
    sw = local.sw
    config = sw.create_config("app", "#!/bin/sh\n", group="script")
    names: dict[str, Any] = {
        "sw": sw,
        "server_id": local.new_server(),
        "config": config,
    }
    threading.Timer(3, held.set).start()  # a conductor takes it later
    exec(compile(match.group(1), str(readme), "exec"), names)  # noqa: S102
    assert names["dep"].id == names["dep_id"]
    assert len(sw.list_flows(deployment_id=names["dep_id"])) <= 1
    assert sw.wait(names["dep_id"], timeout=30).status == states.COMPLETE
    assert len(local.agent.ran) == 1


def test_a_blocking_deploy_whose_row_is_written_just_after_a_look_waits_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A wait read the flow's row, found none, and only then asked whether
    its round had written it yet: a round that wrote it in between made
    the flow look ended, and a blocking deploy raised DeploymentNotFound
    for a deployment its flow then made (seen under load)."""
    with LocalSwflows(overrides={"watcher": {"poll_interval": 0.1}}) as local:
        runner = local.sw.runner
        get = runner.registry.get
        stale: list[str] = []

        def read_then_recorded(flow_id: str) -> Any:
            found = get(flow_id)
            if found is None and runner._unrecorded(flow_id) and not stale:
                stale.append(flow_id)  # the round writes it right after
                deadline = time.monotonic() + 10
                while runner._unrecorded(flow_id) and time.monotonic() < deadline:
                    time.sleep(0.01)
            return found

        monkeypatch.setattr(runner.registry, "get", read_then_recorded)
        config = local.sw.create_config("app", "#!/bin/sh\n", group="script")
        # the round is slow to record and to write the deployment, as on a
        # busy machine
        with (
            failpoints.armed("launch.record", failpoints.stall(0.5)),
            failpoints.armed(HELD, failpoints.stall(1.0)),
        ):
            dep = local.sw.deploy(local.new_server(), config.id, wait_timeout=30)
        assert stale, "the race was not met"
        assert dep.status == states.COMPLETE
