"""A command that returns at once (``--no-wait``) first lets its flow settle:
it looks every ``SETTLE_INTERVAL`` until no flow of the deployment runs (it
parked or ended), for at most ``SETTLE_TIMEOUT``, then shows the deployment."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from swflows import exceptions
from swflows.cli import deployment as cli_deployment
from swflows.cli import flow as cli_flow


class Sw:
    """Flows RUNNING for ``running`` looks, then PARKED."""

    def __init__(self, running: int, gone: bool = False) -> None:
        self.running = running
        self.looks = 0
        self.gone = gone

    def list_flows(self, deployment_id: str | None = None) -> list[Any]:
        self.looks += 1
        state = "RUNNING" if self.looks <= self.running else "PARKED"
        return [SimpleNamespace(id="f1", state=state)]

    def show(self, deployment_id: str) -> Any:
        if self.gone:
            raise exceptions.DeploymentNotFound(deployment_id)
        return SimpleNamespace(id=deployment_id, looks=self.looks)


@pytest.fixture(autouse=True)
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_deployment, "SETTLE_INTERVAL", 0.01)


def test_settle_looks_until_no_flow_runs() -> None:
    sw = Sw(running=3)
    assert cli_deployment.settle(sw, "d1") is not None
    assert sw.looks == 4


def test_settle_shows_a_flow_still_running_after_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cli_deployment, "SETTLE_TIMEOUT", 0.2)
    sw = Sw(running=10_000)
    started = time.monotonic()
    found = cli_deployment.settle(sw, "d1")
    assert 0.2 <= time.monotonic() - started < 5
    assert found is not None and found.id == "d1" and 5 <= sw.looks < 10_000


def test_settle_of_a_removed_deployment_is_none() -> None:
    assert cli_deployment.settle(Sw(running=0, gone=True), "d1") is None


def test_a_resumed_flow_is_running_while_its_row_says_so() -> None:
    sw = Sw(running=1)
    assert cli_flow._running(sw, "f1") is True
    assert cli_flow._running(sw, "f1") is False
    assert cli_flow._running(sw, "other") is False


def test_a_wait_whose_deployment_was_deleted_meanwhile_is_not_success(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--wait`` on a deployment deleted beside it (``follow`` finds no
    deployment) exits FAILED saying so; it exited 0 with the old row."""
    import argparse
    import io

    from swflows import model, states
    from swflows.cli import progress
    from swflows.cli.parsing import ExitCode

    monkeypatch.setattr(progress, "follow", lambda *args, **kwargs: None)
    command = cli_deployment.CreateDeployment.__new__(cli_deployment.CreateDeployment)
    stderr = io.StringIO()
    command.app = SimpleNamespace(stderr=stderr, swflows=lambda resume: object())
    dep = model.Deployment(
        id="d1",
        server_id="s1",
        config_id=None,
        source_config_id=None,
        action="CREATE",
        status=states.IN_PROGRESS,
    )
    command.finish(dep, argparse.Namespace(wait=True))
    assert command.exit_status == ExitCode.FAILED
    assert "d1 no longer exists" in stderr.getvalue()
