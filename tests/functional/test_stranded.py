"""No deployment is stranded IN_PROGRESS when its flow fails and its revert
cannot write the row at once.

The failure seen under load: ``PublishMetadata`` fails, the revert's
write of the deployment row loses a race (``ConcurrentUpdate``) or the
database is busy for a moment.  A revert that gave up silently let the flow
end REVERTED and be forgotten, leaving the deployment IN_PROGRESS with no
flow, no job and no timeout.  Now the revert tries again, the deployment
ends FAILED naming the step and the cause, and a revert that cannot write
at all leaves its flow BROKEN and the deployment FAILED (``flow_broken``);
the watcher's reconciler ends whatever is left IN_PROGRESS with no flow.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swflows import exceptions, failpoints, signals, states
from swflows.api import Swflows
from swflows.persistence import flow_registry as flow_rows
from swflows.persistence.deployments import DeploymentRows
from swflows.tasks import base, metadata
from tests.functional import flowkit
from tests.functional.db_fixtures import pg_url
from tests.functional.fakeserver import FakeServer
from tests.functional.test_jobboard import Setup

sw = flowkit.sw
__all__ = ["pg_url", "sw"]

#: the deployments of this module are short: nothing here waits for a signal
TIMEOUT = 60


class PublishFailed(RuntimeError):
    """The failure the tests make PublishMetadata raise."""


def publish_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    real = metadata.PublishMetadata.execute

    @functools.wraps(real)  # TaskFlow reads the task's requirements from it
    def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise PublishFailed("object-store: put object failed (injected)")

    monkeypatch.setattr(metadata.PublishMetadata, "execute", execute)


def row_write_races_once(monkeypatch: pytest.MonkeyPatch, deployment_id: str) -> None:
    """The revert's first write of ``deployment_id``'s row (a delete, or an
    update ending it) loses a compare-and-set race, once."""
    left = [1]

    def racing(real: Any) -> Any:
        @functools.wraps(real)
        def call(self: Any, dep_id: str, *args: Any, **kwargs: Any) -> Any:
            ending = real.__name__ == "delete_deployment" or kwargs.get("status") in (
                states.FAILED,
            )
            if dep_id == deployment_id and ending and left[0]:
                left[0] -= 1
                raise exceptions.ConcurrentUpdate(
                    f"deployment {dep_id} changed meanwhile (injected)",
                    deployment_id=dep_id,
                )
            return real(self, dep_id, *args, **kwargs)

        return call

    for name in ("delete_deployment", "update_deployment"):
        monkeypatch.setattr(DeploymentRows, name, racing(getattr(DeploymentRows, name)))


def reconciled(sw: Swflows) -> dict[str, int]:
    """What ``swflows conductor list`` counts."""
    return flow_rows.reconciled(
        sw.runner.registry,
        {
            "orphaned": signals.ORPHANED_PREFIX,
            "flow_broken": signals.FLOW_BROKEN_PREFIX,
        },
    )


@pytest.fixture
def config_id(sw: Swflows) -> str:
    return sw.create_config("app", "#!/bin/sh\necho hi\n", group="script").id


def test_a_revert_that_loses_a_race_still_ends_the_deployment(
    sw: Swflows, config_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = str(uuid.uuid4())
    dep_id = str(uuid.uuid4())
    with FakeServer(sw, server):
        publish_fails(monkeypatch)
        row_write_races_once(monkeypatch, dep_id)
        with pytest.raises(PublishFailed):
            sw.deploy(server, config_id, timeout=TIMEOUT, deployment_id=dep_id)
        monkeypatch.undo()
        row = sw.show(dep_id)
    # kept, FAILED, naming the step and the cause: never IN_PROGRESS
    assert row.status == states.FAILED, row.status_reason
    assert row.reason is not None
    assert row.reason["kind"] == "infrastructure"
    assert row.reason["step"] == "PublishMetadata"
    assert "injected" in row.reason["error"]
    assert "PublishMetadata" in row.status_reason
    assert row.config_id is None
    assert sw.runner.registry.find(deployment_id=dep_id) == []
    # the user deletes the record, as Heat's CREATE_FAILED resource
    sw.undeploy(dep_id)
    with pytest.raises(exceptions.DeploymentNotFound):
        sw.show(dep_id)


def test_a_revert_that_cannot_write_leaves_its_flow_broken_and_says_so(
    sw: Swflows, config_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = str(uuid.uuid4())
    dep_id = str(uuid.uuid4())
    monkeypatch.setattr(base, "REVERT_PATIENCE", 1.0)
    with FakeServer(sw, server):
        publish_fails(monkeypatch)
        with failpoints.armed("revert.row", failpoints.fail()):
            with pytest.raises(Exception, match="revert"):
                sw.deploy(server, config_id, timeout=TIMEOUT, deployment_id=dep_id)
        monkeypatch.undo()
        row = sw.show(dep_id)
    assert row.status == states.FAILED, row.status_reason
    assert row.reason is not None
    assert row.reason["kind"] == "flow_broken"
    (flow,) = sw.runner.registry.find(deployment_id=dep_id)
    assert flow.state == flow_rows.BROKEN
    assert flow.note is not None and "revert failed" in flow.note
    assert flow.id == row.reason["flow_id"]
    assert reconciled(sw) == {"orphaned": 0, "flow_broken": 1}


def test_the_reconciler_ends_what_no_flow_drives(
    sw: Swflows, config_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deployment left IN_PROGRESS with no flow (a process that died
    between two writes, a revert of an older version) is ended FAILED
    ``orphaned`` once idle for the grace; one a flow drives is not."""
    server = str(uuid.uuid4())
    with FakeServer(sw, server) as fake:
        fake.pause()  # the waiting one gets no answer
        waiting = sw.deploy(server, config_id, timeout=TIMEOUT, wait=False)
        stranded = sw.deploy(server, config_id, timeout=TIMEOUT, wait=False)
        deadline = time.monotonic() + 60
        while not all(
            sw.runner.registry.find(states=[flow_rows.PARKED], deployment_id=d.id)
            for d in (waiting, stranded)
        ):
            assert time.monotonic() < deadline, "never parked"
            time.sleep(0.1)
        # what a lost flow leaves: its deployment IN_PROGRESS, no flow row
        (row,) = sw.runner.registry.find(deployment_id=stranded.id)
        sw.runner.registry.remove(row.id)
        reconciler = sw.runner.watcher.sweeper.reconciler
        sw.conf.set_override("orphan_grace", 3600.0, "watcher")
        assert reconciler.reconcile() == []  # not idle long enough yet
        sw.conf.set_override("orphan_grace", 1.0, "watcher")
        time.sleep(1.5)
        assert reconciler.reconcile() == [stranded.id]
        assert sw.show(stranded.id).status == states.FAILED
        assert sw.show(stranded.id).reason == {
            "kind": "orphaned",
            "detail": "no flow has driven it for 1 s",
        }
        assert sw.show(waiting.id).status == states.IN_PROGRESS
        # withdrawn from the server's metadata, the waiting one kept
        published = str(fake.read_metadata())
        assert str(sw.show(waiting.id).config_id) in published
        assert str(sw.show(stranded.id).config_id) not in published
        assert reconciler.repaired == {"orphaned": 1}
        assert reconciled(sw) == {"orphaned": 1, "flow_broken": 0}
        assert reconciler.reconcile() == []  # once
        sw.cancel(waiting.id)


def test_under_a_conductor_a_revert_that_loses_a_race_ends_the_deployment(
    devcloud: dict[str, Any],
    pg_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    setup = Setup("redis", devcloud, pg_url, tmp_path)
    poster = Swflows.from_conf(setup.conf())
    try:
        server = str(uuid.uuid4())
        config = poster.create_config("app", "#!/bin/sh\n", group="script")
        with FakeServer(poster, server):
            # the conductor's publish fails, in its round and again in the
            # engine the flow is then handed to; its revert's first row
            # write fails too
            monkeypatch.setenv(
                failpoints.ENV, "publish_metadata=fail:2;revert.row=fail:1"
            )
            setup.conductor()
            monkeypatch.delenv(failpoints.ENV)
            dep = poster.deploy(server, config.id, timeout=TIMEOUT, wait=False)
            deadline = time.monotonic() + 60
            row = poster.show(dep.id)
            while row.status == states.IN_PROGRESS or poster.runner.registry.find(
                deployment_id=dep.id
            ):
                assert time.monotonic() < deadline, row.status_reason
                time.sleep(0.2)
                row = poster.show(dep.id)
        assert row.status == states.FAILED, row.status_reason
        assert row.reason is not None
        assert row.reason["step"] == "PublishMetadata", row.reason
        assert "failpoint publish_metadata" in row.reason["error"]
        listed = subprocess.run(
            [
                *(sys.executable, "-m", "swflows.cli"),
                *("--config-file", str(setup.conf_path), "conductor", "list"),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        assert (
            "deployments ended with no flow to end them: 0 orphaned, 0 flow_broken"
            in listed.stderr
        )
    finally:
        poster.close()
        poster.store.close()
        setup.close()


@pytest.fixture(autouse=True)
def _no_failpoints_left() -> Iterator[None]:
    yield
    assert os.environ.get(failpoints.ENV) is None
    failpoints.disarm("revert.row")
