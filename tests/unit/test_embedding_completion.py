"""Completion callbacks over a SQLite store: a flow that ends, one set
aside as broken, a callback that fails, flows that run no action."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from swflows import model, states
from swflows.api import Swflows
from swflows.embedding import Completion, Completions
from swflows.fixture import LocalSwflows


@pytest.fixture
def sw(tmp_path: Path) -> Iterator[Swflows]:
    overrides = {"runner": {"resume_on_start": False}}
    with LocalSwflows(tmp_path, overrides=overrides) as local:
        yield local.sw


def flow(sw: Swflows, deployment_id: str, kind: str = "deploy") -> str:
    flow_id = str(uuid.uuid4())
    sw.runner.registry.add(
        flow_id,
        kind=kind,
        deployment_id=deployment_id,
        server_id="s",
        owner="elsewhere:1:x",
        lease_until=time.time() + 3600,
    )
    return flow_id


def test_called_once_the_flows_end(sw: Swflows) -> None:
    seen: list[Completion] = []
    ended, broken, composed = (str(uuid.uuid4()) for _ in range(3))
    ended_flow = flow(sw, ended)
    broken_flow = flow(sw, broken)
    flow(sw, composed, kind="custom")  # a user's flow: runs no action
    with Completions(sw, thread=False) as completions:
        for deployment_id in (ended, broken, composed):
            completions.add(deployment_id, seen.append)
        assert completions.check() == 1
        assert [c.deployment_id for c in seen] == [composed]
        assert completions.check() == 0
        sw.runner.registry.break_flow(broken_flow, "revert failed: boom")
        sw.runner.registry.remove(ended_flow)
        assert completions.check() == 2
        assert completions.pending() == []
    by_id = {c.deployment_id: c for c in seen}
    assert by_id[ended].removed  # no deployment row: as after an undeploy
    assert by_id[broken].deployment is None
    error = by_id[broken].error
    assert error is not None and "boom" in error
    assert not by_id[broken].removed


def test_the_thread_reports_by_itself(sw: Swflows) -> None:
    deployment_id = str(uuid.uuid4())
    flow_id = flow(sw, deployment_id)
    reported = threading.Event()
    with Completions(sw, interval=0.05) as completions:
        completions.add(deployment_id, lambda done: reported.set())
        assert not reported.wait(0.3)
        sw.runner.registry.remove(flow_id)
        assert reported.wait(30)


def test_the_thread_ends_with_the_last_callback_and_add_starts_another(
    sw: Swflows,
) -> None:
    """An idle Completions holds no thread (a Heat engine's, waiting for
    nothing, costs nothing); a callback discarded is never called."""
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    first_flow = flow(sw, first)
    second_flow = flow(sw, second)
    seen: list[str] = []
    with Completions(sw, interval=0.05) as completions:
        completions.add(first, lambda done: seen.append(done.deployment_id))
        thread = completions._thread
        assert thread is not None
        sw.runner.registry.remove(first_flow)
        thread.join(30)
        assert not thread.is_alive()
        assert seen == [first] and completions._thread is None

        def dropped(done: Completion) -> None:
            seen.append("dropped")

        completions.add(second, dropped)
        completions.discard(second, dropped)
        assert completions.pending() == []
        completions.add(second, lambda done: seen.append(done.deployment_id))
        assert completions._thread is not None and completions._thread is not thread
        sw.runner.registry.remove(second_flow)
        deadline = time.monotonic() + 30
        while len(seen) < 2:
            assert time.monotonic() < deadline, seen
            time.sleep(0.02)
    assert seen == [first, second]


def test_a_look_reads_only_the_flows_of_the_deployments_waited_for(
    sw: Swflows,
) -> None:
    watched = str(uuid.uuid4())
    flow(sw, watched)
    for _ in range(3):
        flow(sw, str(uuid.uuid4()))
    completions = Completions(sw, thread=False)
    assert [left.deployment_id for left in completions._left([watched])] == [watched]
    assert completions._left([]) == []


def test_a_failing_callback_is_logged_and_the_others_still_run(
    sw: Swflows, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []

    def failing(done: Completion) -> None:
        raise RuntimeError("callback bug")

    deployment_id = str(uuid.uuid4())
    completions = Completions(sw, thread=False)
    completions.add(deployment_id, failing)
    completions.add(deployment_id, lambda done: seen.append(done.deployment_id))
    completions.check()
    completions.close()
    assert seen == [deployment_id]
    assert "completion callback of" in caplog.text
    with pytest.raises(Exception, match="closed"):
        completions.add(deployment_id, failing)


def test_a_deployment_a_users_flow_runs_ends_with_its_status(sw: Swflows) -> None:
    """As Swflows.wait: a composed flow goes on after the deployment's action,
    so the deployment is reported once it is no longer IN_PROGRESS."""
    made = sw.store.create_deployment(
        model.Deployment(
            id=str(uuid.uuid4()),
            server_id="s",
            config_id=None,
            source_config_id=None,
            action="BACKUP",
            status=states.IN_PROGRESS,
        )
    )
    flow(sw, made.id, kind="custom")
    seen: list[Completion] = []
    with Completions(sw, thread=False) as completions:
        completions.add(made.id, seen.append)
        assert completions.check() == 0
        sw.store.update_deployment(made.id, status=states.COMPLETE)
        assert completions.check() == 1
    assert seen[0].deployment is not None
    assert seen[0].deployment.status == states.COMPLETE
