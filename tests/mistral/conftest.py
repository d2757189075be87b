"""A real Mistral (mistral-api, -engine and -executor, mistral 23) on the dev
cloud, started once for the whole run by ``tools/devcloud mistral-up``, with
swflows installed beside it: its actions are the ``mistral.actions`` entry
points Mistral's legacy action provider loads.  Workflows are driven through
mistral-api as the demo user, as ``openstack workflow ...`` would drive them;
the executor's swflows reads the configuration file in mistral.json, and so
does the ``sw`` fixture here (the same store, on PostgreSQL).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swflows import conf as sw_conf
from swflows.api import Swflows
from tests.functional import flowkit
from tests.functional.conftest import devcloud  # noqa: F401  (a fixture)

REPO = Path(__file__).resolve().parents[2]
DEVCLOUD = REPO / "tools" / "devcloud"
MISTRAL_JSON = REPO / ".devcloud" / "mistral.json"
MISTRAL_RECORDS = REPO / ".devcloud" / "mistral-state" / "servers.json"
#: a workflow execution's states once it ended
ENDED = ("SUCCESS", "ERROR", "CANCELLED")

HELLO = """#!/bin/sh
echo "start $name" >> "$runs"
sleep "$pause"
printf "hello %s" "$name" > "$heat_outputs_path.result"
echo "said hello to $name"
echo "end $name" >> "$runs"
"""

#: deploy (synchronous unless ``wait`` is false), then show
DEPLOY = """---
version: '2.0'
deploy_wf:
  input:
    - server_id
    - config_id
    - name
    - wait: true
    - deployment_id: null
    - pause: 0
    - runs: /dev/null
    - config_file: null
  output:
    deployment: <% $.deployment %>
    shown: <% $.shown %>
  tasks:
    deploy:
      action: swflows.deploy
      input:
        server_id: <% $.server_id %>
        config_id: <% $.config_id %>
        deployment_id: <% $.deployment_id %>
        input_values:
          name: <% $.name %>
          pause: <% $.pause %>
          runs: <% $.runs %>
        timeout: 120
        wait: <% $.wait %>
        config_file: <% $.config_file %>
      timeout: 300
      publish:
        deployment: <% task().result %>
      on-success: show
    show:
      action: swflows.show
      input:
        deployment_id: <% $.deployment.id %>
        config_file: <% $.config_file %>
      publish:
        shown: <% task().result %>
"""


def run_devcloud(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(DEVCLOUD), *args],
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="session")
def mistral(devcloud: dict[str, Any]) -> Iterator[dict[str, Any]]:  # noqa: F811
    """mistral.json of a running Mistral: started here unless it already
    runs, stopped at the end if started here.  Fails when it cannot start."""
    was_up = run_devcloud("mistral-status").returncode == 0
    if not was_up:
        res = run_devcloud("mistral-up")
        if res.returncode != 0:
            pytest.fail(
                f"tools/devcloud mistral-up failed (exit {res.returncode}):\n"
                f"{res.stdout}\n{res.stderr}",
                pytrace=False,
            )
    yield json.loads(MISTRAL_JSON.read_text())
    if not was_up and os.environ.get("SWFLOWS_KEEP_DEVCLOUD") != "1":
        res = run_devcloud("mistral-down")
        assert res.returncode == 0, res.stdout + res.stderr


@pytest.fixture(scope="session")
def sw(mistral: dict[str, Any]) -> Iterator[Swflows]:
    """swflows as the executor's actions build it (the same file: identity,
    database and key), without a runner: the tests make configs and
    servers and read deployments, the executor runs the flows."""
    conf = sw_conf.get_conf(config_files=[mistral["swflows_conf"]])
    made = Swflows.from_conf(conf, start=False)
    yield made
    made.close()


@pytest.fixture(scope="session")
def server(sw: Swflows) -> Iterator[str]:
    """A server of the dev cloud's Nova running swflows' agent."""
    made = sw.create_server("mistral-web", "cirros", "m1.tiny")
    yield str(made["server_id"])
    sw.delete_server(made["server_id"])


def make_hello(sw: Swflows, context: Any = None) -> str:
    """:data:`HELLO` as a script config of ``sw`` (the caller's with
    ``context``); its id."""
    config = sw.create_config(
        "hello",
        HELLO,
        group="script",
        inputs=[
            {"name": "name"},
            {"name": "pause", "default": "0"},
            {"name": "runs", "default": "/dev/null"},
        ],
        outputs=[{"name": "result"}],
        context=context,
    )
    return config.id


@pytest.fixture(scope="session")
def hello(sw: Swflows) -> str:
    return make_hello(sw)


def wait_for_status(sw: Swflows, deployment_id: str, timeout: float = 60) -> str:
    """The deployment's status once the executor's action made it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return sw.show(deployment_id).status
        except LookupError:
            assert time.monotonic() < deadline, f"{deployment_id} never made"
            time.sleep(0.3)


def loads(text: Any) -> Any:
    """A JSON field of Mistral's API (it sends most of them as text)."""
    return json.loads(text) if isinstance(text, str) else text


class MistralApi(flowkit.ServiceApi):
    """mistral-api as the demo user (keystoneauth only, no mistralclient)."""

    service_type = "workflowv2"

    def workflow(self, definition: str) -> str:
        """Store a workflow (a private one of the demo project); its name."""
        made = self.call(
            "POST",
            "/workflows",
            data=definition,
            headers={"Content-Type": "text/plain"},
        )["workflows"]
        assert len(made) == 1, made
        return str(made[0]["name"])

    def delete_workflow(self, name: str) -> None:
        self.call("DELETE", f"/workflows/{name}")

    def start(self, workflow_name: str, /, **inputs: Any) -> str:
        """Start an execution of a workflow; its id."""
        body = {"workflow_name": workflow_name, "input": inputs}
        return str(self.call("POST", "/executions", json=body)["id"])

    def execution(self, execution_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self.call("GET", f"/executions/{execution_id}")
        return found

    def wait(self, execution_id: str, timeout: float = 180) -> dict[str, Any]:
        """The execution once it ended, its ``output`` parsed."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.execution(execution_id)
            if found["state"] in ENDED:
                found["output"] = loads(found.get("output") or "{}")
                return found
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"execution {execution_id} still {found['state']}: "
                    f"{self.tasks(execution_id)}"
                )
            time.sleep(0.5)

    def tasks(self, execution_id: str) -> dict[str, dict[str, Any]]:
        """The execution's tasks by name, each with its ``result`` parsed."""
        listed = self.call("GET", f"/executions/{execution_id}/tasks")["tasks"]
        out = {}
        for task in listed:
            full = self.call("GET", f"/tasks/{task['id']}")
            full["result"] = loads(full.get("result"))
            full["published"] = loads(full.get("published") or "{}")
            out[str(task["name"])] = full
        return out

    def action_executions(self, task_id: str) -> list[dict[str, Any]]:
        """A task's action executions, each with its input and output
        parsed (the listing leaves them out)."""
        listed = self.call("GET", f"/tasks/{task_id}/action_executions")
        found = []
        for action in listed["action_executions"]:
            full = self.call("GET", f"/action_executions/{action['id']}")
            full["output"] = loads(full.get("output"))
            full["input"] = loads(full.get("input"))
            found.append(full)
        return found

    def cancel(self, execution_id: str) -> None:
        self.call("PUT", f"/executions/{execution_id}", json={"state": "CANCELLED"})


@pytest.fixture(scope="session")
def mistral_api(
    mistral: dict[str, Any],
    devcloud: dict[str, Any],  # noqa: F811
) -> MistralApi:
    return MistralApi(devcloud)


@pytest.fixture
def workflow(mistral_api: MistralApi) -> Iterator[Any]:
    """Store a workflow (its name made unique); each is deleted afterwards."""
    made: list[str] = []

    def store(name: str, definition: str) -> str:
        unique = f"{name}_{uuid.uuid4().hex[:8]}"
        made.append(mistral_api.workflow(definition.replace(name, unique, 1)))
        return unique

    yield store
    for name in made:
        mistral_api.delete_workflow(name)


def kill_executor() -> None:
    """SIGKILL mistral-executor and its worker (its own process group)."""
    record = json.loads(MISTRAL_RECORDS.read_text())["mistral-executor"]
    os.killpg(record["pid"], signal.SIGKILL)


def start_executor() -> None:
    res = run_devcloud("mistral-executor-start")
    assert res.returncode == 0, res.stdout + res.stderr
