"""What Mistral itself does to a running swflows action: its executor
killed mid-action, its workflow execution cancelled."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swflows import conf as sw_conf
from swflows import states
from swflows.api import Swflows
from tests.mistral.conftest import (
    DEPLOY,
    MistralApi,
    kill_executor,
    loads,
    make_hello,
    start_executor,
    wait_for_status,
)

#: DEPLOY, its deploy task run again when it fails (a lost executor)
RETRIED = DEPLOY.replace(
    "      timeout: 300\n",
    "      timeout: 300\n      retry:\n        count: 2\n        delay: 1\n",
)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"no {what} after {timeout} s"
        time.sleep(0.3)


def test_a_retried_deploy_after_the_executor_died_deploys_once(
    mistral_api: MistralApi,
    workflow: Any,
    sw: Swflows,
    server: str,
    hello: str,
    tmp_path: Path,
) -> None:
    """The executor is killed while a synchronous deploy waits; Mistral
    fails the action when its heartbeats stop, the task's retry runs it
    again on the restarted executor, and with the same ``deployment_id``
    it waits for the deployment under way (its flow taken over by the new
    executor's runner) instead of deploying a second time."""
    name = workflow("deploy_wf", RETRIED)
    runs = tmp_path / "runs"
    deployment_id = str(uuid.uuid4())
    run = mistral_api.start(
        name,
        server_id=server,
        config_id=hello,
        name="once",
        pause=8,
        runs=str(runs),
        deployment_id=deployment_id,
    )
    until(lambda: lines(runs) == ["start once"], 60, "start of the script")
    kill_executor()
    try:
        # the heartbeat checker fails the action ([action_heartbeat]: 10 s,
        # 60 s if it died before its first heartbeat)
        def failed() -> bool:
            task = mistral_api.tasks(run)["deploy"]
            actions = mistral_api.action_executions(task["id"])
            return any(a["state"] == "ERROR" for a in actions)

        until(failed, 90, "failed action execution")
    finally:
        start_executor()
    ended = mistral_api.wait(run)
    assert ended["state"] == "SUCCESS", (ended["state_info"], mistral_api.tasks(run))
    deployment = ended["output"]["deployment"]
    assert deployment["id"] == deployment_id
    assert deployment["status"] == states.COMPLETE, deployment
    assert deployment["output_values"]["result"] == "hello once"
    assert lines(runs) == ["start once", "end once"]  # run once
    task = mistral_api.tasks(run)["deploy"]
    assert task["state"] == "SUCCESS"
    assert loads(task["runtime_context"])["retry_task_policy"]["retry_no"] == 1
    assert task["result"]["id"] == deployment_id
    # The retry's action execution is not the demo user's: Mistral ran it
    # in the heartbeat checker's administrative context (no project, no
    # token, no catalog), so the demo user sees the failed one only.
    [failed_action] = mistral_api.action_executions(task["id"])
    assert failed_action["state"] == "ERROR"
    assert failed_action["output"] == {"result": "Heartbeat wasn't received."}
    sw.undeploy(deployment_id, wait=True)


def test_cancelling_the_execution_leaves_the_deployment_to_finish(
    mistral_api: MistralApi,
    workflow: Any,
    sw: Swflows,
    server: str,
    hello: str,
    tmp_path: Path,
) -> None:
    """A workflow execution cancelled in Mistral while an asynchronous
    deploy runs: Mistral does not tell the action, so the deployment runs
    to its end; its result, PUT afterwards, does not revive the execution."""
    name = workflow("deploy_wf", DEPLOY)
    runs = tmp_path / "runs"
    deployment_id = str(uuid.uuid4())
    run = mistral_api.start(
        name,
        server_id=server,
        config_id=hello,
        name="orphan",
        wait=False,
        pause=4,
        runs=str(runs),
        deployment_id=deployment_id,
    )
    until(lambda: lines(runs) == ["start orphan"], 60, "start of the script")
    mistral_api.cancel(run)
    ended = mistral_api.wait(run)
    assert ended["state"] == "CANCELLED", ended
    until(lambda: lines(runs)[-1:] == ["end orphan"], 60, "end of the script")
    assert wait_for_status(sw, deployment_id) in (states.IN_PROGRESS, states.COMPLETE)
    until(lambda: sw.show(deployment_id).status == states.COMPLETE, 60, "COMPLETE")
    time.sleep(3)  # the result's PUT, and whatever Mistral makes of it
    # Mistral takes the late result (the action and its task SUCCESS) but
    # the execution stays CANCELLED: nothing after the task runs
    assert mistral_api.execution(run)["state"] == "CANCELLED"
    tasks = mistral_api.tasks(run)
    assert set(tasks) == {"deploy"}, tasks
    [action] = mistral_api.action_executions(tasks["deploy"]["id"])
    assert action["state"] == "SUCCESS", action
    assert action["output"]["result"]["id"] == deployment_id
    assert action["output"]["result"]["status"] == states.COMPLETE
    sw.undeploy(deployment_id, wait=True)


@pytest.fixture(scope="module")
def conducted(mistral: dict[str, Any]) -> Iterator[Swflows]:
    """The swflows a workflow picks whose flows are jobs on Redis (its own
    tables and board), without a runner: conductors run its flows."""
    conf = sw_conf.get_conf(config_files=[mistral["swflows_conducted_conf"]])
    made = Swflows.from_conf(conf, start=False)
    yield made
    made.close()


@pytest.fixture
def conductor(mistral: dict[str, Any]) -> Iterator[subprocess.Popen[str]]:
    """A ``swflows conductor`` on that configuration, running until the end."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "swflows.cli",
            "--config-file",
            mistral["swflows_conducted_conf"],
            "conductor",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("conductor "), line
    yield proc
    proc.terminate()
    proc.wait(timeout=60)


def test_a_result_outlives_its_executor_when_conductors_run_the_flows(
    mistral: dict[str, Any],
    mistral_api: MistralApi,
    workflow: Any,
    conducted: Swflows,
    conductor: subprocess.Popen[str],
    tmp_path: Path,
) -> None:
    """An asynchronous deploy whose executor is killed while the script
    runs, and started again with no new action: the conductor finishes the
    deployment and sends the result the store kept with it, and the
    workflow goes on to SUCCESS.  The script ran once."""
    made = conducted.create_server("mistral-conducted", "cirros", "m1.tiny")
    server_id = str(made["server_id"])
    config_id = make_hello(conducted)
    name = workflow("deploy_wf", DEPLOY)
    runs = tmp_path / "runs"
    deployment_id = str(uuid.uuid4())
    try:
        run = mistral_api.start(
            name,
            server_id=server_id,
            config_id=config_id,
            name="outlived",
            wait=False,
            pause=8,
            runs=str(runs),
            deployment_id=deployment_id,
            config_file=mistral["swflows_conducted_conf"],
        )
        until(lambda: lines(runs) == ["start outlived"], 90, "start of the script")
        until(
            lambda: bool(conducted.store.results_of(deployment_id)),
            30,
            "the result's row",
        )
        kill_executor()
        start_executor()
        ended = mistral_api.wait(run)
        assert ended["state"] == "SUCCESS", (
            ended["state_info"],
            mistral_api.tasks(run),
        )
        assert ended["output"]["deployment"]["status"] == states.COMPLETE
        assert ended["output"]["shown"]["output_values"]["result"] == "hello outlived"
        assert lines(runs) == ["start outlived", "end outlived"]
        [sent] = conducted.store.results_of(deployment_id)
        assert sent.outcome == "delivered"
        conducted.undeploy(deployment_id, wait=True, wait_timeout=120)
    finally:
        conducted.delete_server(server_id)
