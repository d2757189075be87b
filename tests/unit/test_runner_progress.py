"""A flow driven here tells who waits on it that a step writing its
deployment's row succeeded: a deploy that does not wait returns once the
flow wrote the deployment, not at the next of its looks, and reads the
store only then (SQLite, the in-process cloud)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any, cast
from unittest import mock

import pytest
import tenacity
from taskflow.patterns import linear_flow

from swflows import transport_names as names
from swflows.api import Swflows, results
from swflows.clients.cloud import Clients
from swflows.clients.object_store import ObjectStore
from swflows.engine import conductor, driving
from swflows.fixture import LocalSwflows
from swflows.flows import common, deploy, redeploy
from swflows.tasks import base
from tests.unit.test_runner_fencing import GATES, STARTED, MemoryBoard, gated, until


@pytest.fixture
def local() -> Iterator[LocalSwflows]:
    with LocalSwflows() as made:
        yield made


def test_only_a_step_writing_the_row_sets_its_flows_progress(
    local: LocalSwflows,
) -> None:
    """Steps that write no deployment row (here a custom flow's own) wake
    nobody: a caller waiting for the row would only read it again."""
    gate = "progress"
    STARTED[gate], GATES[gate] = threading.Event(), threading.Event()
    sw = local.sw
    flow_id = sw.run_flow(gated, gate=gate)
    try:
        assert STARTED[gate].wait(30)  # its first step succeeded
        progressed = sw.runner.progress_of(flow_id)
        assert progressed is not None and not progressed.is_set()
    finally:
        GATES[gate].set()
    until(lambda: sw.runner.progress_of(flow_id) is None, 30)  # ended
    assert not progressed.is_set()
    assert sw.runner.progress_of("no-such-flow") is None


def test_the_steps_writing_the_row_are_found_in_nested_flows_too() -> None:
    plan = common.Plan(
        signal_transport=names.TEMP_URL_SIGNAL, config_transport=names.POLL_TEMP_URL
    )
    made = deploy.build("deploy", plan)
    assert driving.row_writers(made) == {base.atom_name("deploy", "CreateDeployment")}
    outer = linear_flow.Flow("outer").add(made, redeploy.make_flow(**plan.to_kwargs()))
    assert driving.row_writers(outer) == {
        base.atom_name("deploy", "CreateDeployment"),
        base.atom_name("redeploy", "StartAction"),
    }


def test_a_deploy_that_does_not_wait_looks_again_as_steps_succeed(
    local: LocalSwflows, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the look of a flow driven here a minute apart, a deploy still
    returns as soon as the flow has written the deployment."""
    monkeypatch.setattr(results, "POLL_STARTED_DRIVEN", 60.0)
    sw = local.sw
    config = sw.create_config("app", "#!/bin/sh\n", group="script")
    started = time.monotonic()
    dep = sw.deploy(local.new_server(), config.id, wait=False)
    assert time.monotonic() - started < 30
    assert sw.show(dep.id).id == dep.id
    sw.wait(dep.id, 60)


def test_a_caller_looks_on_its_own_every_half_second() -> None:
    """Besides when its row is seen (a step here wrote it, or the shared
    look saw it): its own looks are half a second apart."""
    for driven_here in (False, True):
        waits = results.started_waits(driven_here=driven_here)
        rests = []
        for attempt in range(1, 5):
            state = tenacity.RetryCallState(tenacity.Retrying(), None, (), {})
            state.attempt_number = attempt
            rests.append(waits(state))
        assert rests == [0.5] * 4


def test_a_deploy_posted_for_a_conductor_reads_its_row_once_it_is_written(
    local: LocalSwflows,
) -> None:
    """A deploy that does not wait, whose flow a conductor drives, reads the
    store once the shared look saw its row, not at once: a job just posted
    has no row yet (each read before the claim was one for nothing)."""
    sw = Swflows(
        local.store,
        Clients(object_store=lambda: cast("ObjectStore", local.objects)),
        local.conf,
        start=False,
    )
    board = MemoryBoard()
    driver = conductor.Conductor(sw, board=board, workers=2)  # type: ignore[arg-type]
    sw.adopt_runner(driver.runner)
    reads: list[str] = []
    get_deployment = sw.store.get_deployment

    def counted(deployment_id: str, *args: Any, **kwargs: Any) -> Any:
        reads.append(deployment_id)
        return get_deployment(deployment_id, *args, **kwargs)

    config = sw.create_config("app", "#!/bin/sh\n", group="script")
    server = local.new_server()
    returned: list[Any] = []
    try:
        with mock.patch.object(sw.store, "get_deployment", counted):
            caller = threading.Thread(
                target=lambda: returned.append(sw.deploy(server, config.id, wait=False))
            )
            caller.start()
            until(lambda: len(board.jobs()) == 1, 10)
            time.sleep(0.2)  # the caller's first look would have come by now
            assert reads == []
            assert len(driver.claim_some()) == 1
            caller.join(30)
        assert [dep.id for dep in returned] == reads
        sw.wait(returned[0].id, 60)
    finally:
        driver.close()
        sw.close()
