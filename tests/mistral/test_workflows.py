"""Workflows of swflows' actions run by a real Mistral.

The servers are booted by the dev cloud's Nova stand-in and run swflows'
agent as a real process, which runs the scripts here on this machine.
The actions run in mistral-executor; an asynchronous one (``wait: false``)
reports its result through mistral-api, found in the caller's catalog.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from swflows import states
from swflows.api import Swflows
from tests.mistral.conftest import DEPLOY, MistralApi, wait_for_status

NAMES = [
    "swflows.cancel",
    "swflows.deploy",
    "swflows.group_delete",
    "swflows.group_deploy",
    "swflows.group_show",
    "swflows.redeploy",
    "swflows.show",
    "swflows.trigger",
    "swflows.undeploy",
]

FAILING = """#!/bin/sh
echo "no disk left" >&2
exit 3
"""

ON_ERROR = """---
version: '2.0'
on_error_wf:
  input:
    - server_id
    - config_id
  output:
    kind: <% $.kind %>
    message: <% $.message %>
    code: <% $.code %>
  tasks:
    deploy:
      action: swflows.deploy
      input:
        server_id: <% $.server_id %>
        config_id: <% $.config_id %>
        timeout: 120
      on-error: report
    report:
      action: std.noop
      publish:
        kind: <% task(deploy).result.kind %>
        message: <% task(deploy).result.message %>
        code: <% task(deploy).result.deployment.output_values.deploy_status_code %>
"""

SHOW = """---
version: '2.0'
show_wf:
  input:
    - deployment_id
  tasks:
    show:
      action: swflows.show
      input:
        deployment_id: <% $.deployment_id %>
"""

CANCEL = """---
version: '2.0'
cancel_wf:
  input:
    - deployment_id
    - reason
  output:
    cancelled: <% $.cancelled %>
  tasks:
    cancel:
      action: swflows.cancel
      input:
        deployment_id: <% $.deployment_id %>
        reason: <% $.reason %>
      publish:
        cancelled: <% task().result %>
"""


@pytest.fixture(scope="module")
def failing(sw: Swflows) -> str:
    return sw.create_config("failing", FAILING, group="script").id


def test_mistral_lists_every_action(mistral_api: MistralApi) -> None:
    listed = mistral_api.call("GET", "/actions?limit=1000")["actions"]
    found = {a["name"]: a for a in listed if a["name"].startswith("swflows.")}
    assert sorted(found) == NAMES
    spec = found["swflows.deploy"]["input"]
    assert spec.startswith("server_id, config_id, input_values=null, "), spec
    assert "wait=true" in spec.split(", ")
    assert found["swflows.show"]["input"].startswith("deployment_id"), found


def test_sync_deploy_then_show(
    mistral_api: MistralApi, workflow: Any, sw: Swflows, server: str, hello: str
) -> None:
    name = workflow("deploy_wf", DEPLOY)
    run = mistral_api.start(name, server_id=server, config_id=hello, name="sync")
    ended = mistral_api.wait(run)
    assert ended["state"] == "SUCCESS", (ended["state_info"], mistral_api.tasks(run))
    deployment = ended["output"]["deployment"]
    assert deployment["status"] == states.COMPLETE, deployment
    assert deployment["server_id"] == server
    assert deployment["output_values"]["result"] == "hello sync"
    assert deployment["output_values"]["deploy_status_code"] == 0
    assert "said hello to sync" in deployment["output_values"]["deploy_stdout"]
    assert ended["output"]["shown"] == deployment
    assert sw.show(deployment["id"]).status == states.COMPLETE
    # the synchronous action ran in the executor, its result is Mistral's
    tasks = mistral_api.tasks(run)
    [action] = mistral_api.action_executions(tasks["deploy"]["id"])
    assert action["name"] == "swflows.deploy"
    assert action["state"] == "SUCCESS"
    assert action["output"]["result"]["id"] == deployment["id"]
    sw.undeploy(deployment["id"], wait=True)


def test_async_deploy_reports_through_mistral_api(
    mistral_api: MistralApi, workflow: Any, sw: Swflows, server: str, hello: str
) -> None:
    """``wait: false``: the action returns at once; swflows PUTs the result
    to mistral-api (found in the demo user's catalog, as workflowv2) with
    the caller's token, and the workflow goes on from there."""
    name = workflow("deploy_wf", DEPLOY)
    deployment_id = str(uuid.uuid4())
    run = mistral_api.start(
        name,
        server_id=server,
        config_id=hello,
        name="async",
        wait=False,
        pause=3,
        deployment_id=deployment_id,
    )
    assert wait_for_status(sw, deployment_id) in (states.IN_PROGRESS, states.COMPLETE)
    # still waiting for the result while the script runs
    tasks = mistral_api.tasks(run)
    if sw.show(deployment_id).status == states.IN_PROGRESS:
        assert tasks["deploy"]["state"] == "RUNNING", tasks["deploy"]
    ended = mistral_api.wait(run)
    assert ended["state"] == "SUCCESS", (ended["state_info"], mistral_api.tasks(run))
    deployment = ended["output"]["deployment"]
    assert deployment["id"] == deployment_id
    assert deployment["status"] == states.COMPLETE, deployment
    assert deployment["output_values"]["result"] == "hello async"
    assert ended["output"]["shown"]["status"] == states.COMPLETE
    [action] = mistral_api.action_executions(mistral_api.tasks(run)["deploy"]["id"])
    assert action["state"] == "SUCCESS"
    assert action["output"]["result"]["id"] == deployment_id
    sw.undeploy(deployment_id, wait=True)


@pytest.mark.parametrize("wait", [True, False], ids=["sync", "async"])
def test_failed_deploy_ends_the_workflow_error_with_the_message(
    mistral_api: MistralApi,
    workflow: Any,
    sw: Swflows,
    server: str,
    failing: str,
    wait: bool,
) -> None:
    name = workflow("deploy_wf", DEPLOY)
    run = mistral_api.start(
        name, server_id=server, config_id=failing, name="x", wait=wait
    )
    ended = mistral_api.wait(run)
    assert ended["state"] == "ERROR", ended
    tasks = mistral_api.tasks(run)
    assert set(tasks) == {"deploy"}, tasks  # show never ran
    task = tasks["deploy"]
    assert task["state"] == "ERROR"
    [action] = mistral_api.action_executions(task["id"])
    assert action["state"] == "ERROR"
    error = action["output"]["result"]
    assert error["kind"] == "exit_code", error
    assert "3" in error["message"], error
    assert error["deployment"]["status"] == states.FAILED
    assert error["deployment"]["output_values"]["deploy_stderr"] == "no disk left\n"
    assert "Traceback" not in str(error)
    # the workflow's and the task's state_info carry the error
    assert "exit_code" in task["state_info"], task["state_info"]
    assert "exit_code" in ended["state_info"], ended["state_info"]
    sw.undeploy(error["deployment"]["id"], wait=True)


def test_on_error_reads_the_kind(
    mistral_api: MistralApi, workflow: Any, sw: Swflows, server: str, failing: str
) -> None:
    name = workflow("on_error_wf", ON_ERROR)
    run = mistral_api.start(name, server_id=server, config_id=failing)
    ended = mistral_api.wait(run)
    assert ended["state"] == "SUCCESS", (ended["state_info"], mistral_api.tasks(run))
    assert ended["output"]["kind"] == "exit_code"
    assert ended["output"]["code"] == 3
    assert ended["output"]["message"]
    deployment_id = mistral_api.tasks(run)["deploy"]["result"]["deployment"]["id"]
    sw.undeploy(deployment_id, wait=True)


def test_not_found_is_an_error_result(mistral_api: MistralApi, workflow: Any) -> None:
    name = workflow("show_wf", SHOW)
    missing = str(uuid.uuid4())
    run = mistral_api.start(name, deployment_id=missing)
    ended = mistral_api.wait(run)
    assert ended["state"] == "ERROR", ended
    [action] = mistral_api.action_executions(mistral_api.tasks(run)["show"]["id"])
    error = action["output"]["result"]
    assert error["kind"] == "not_found", error
    assert missing in error["message"], error
    assert "not_found" in ended["state_info"], ended["state_info"]


def test_invalid_input_is_refused_before_anything_is_done(
    mistral_api: MistralApi, workflow: Any, sw: Swflows, server: str, hello: str
) -> None:
    name = workflow("deploy_wf", DEPLOY)
    deployment_id = str(uuid.uuid4())
    run = mistral_api.start(
        name,
        server_id=server,
        config_id=hello,
        name="x",
        wait="soon",
        deployment_id=deployment_id,
    )
    ended = mistral_api.wait(run)
    assert ended["state"] == "ERROR", ended
    [action] = mistral_api.action_executions(mistral_api.tasks(run)["deploy"]["id"])
    error = action["output"]["result"]
    assert error == {
        "kind": "invalid_input",
        "message": error["message"],
        "field": "wait",
    }, error
    with pytest.raises(LookupError):
        sw.show(deployment_id)


def test_cancel_ends_a_waiting_async_deploy(
    mistral_api: MistralApi, workflow: Any, sw: Swflows, server: str, hello: str
) -> None:
    """swflows.cancel from another workflow: the deployment ends FAILED
    (kind cancelled), and the workflow waiting for it ends ERROR."""
    deploying = workflow("deploy_wf", DEPLOY)
    cancelling = workflow("cancel_wf", CANCEL)
    deployment_id = str(uuid.uuid4())
    run = mistral_api.start(
        deploying,
        server_id=server,
        config_id=hello,
        name="slow",
        wait=False,
        pause=60,
        deployment_id=deployment_id,
    )
    assert wait_for_status(sw, deployment_id) == states.IN_PROGRESS
    cancel = mistral_api.start(cancelling, deployment_id=deployment_id, reason="no")
    done = mistral_api.wait(cancel)
    assert done["state"] == "SUCCESS", (done["state_info"], mistral_api.tasks(cancel))
    cancelled = done["output"]["cancelled"]
    assert cancelled["id"] == deployment_id
    assert cancelled["status"] == states.FAILED
    assert cancelled["reason"]["kind"] == "cancelled", cancelled["reason"]
    ended = mistral_api.wait(run, timeout=90)
    assert ended["state"] == "ERROR", ended
    [action] = mistral_api.action_executions(mistral_api.tasks(run)["deploy"]["id"])
    assert action["output"]["result"]["kind"] == "cancelled", action["output"]
    assert sw.show(deployment_id).status == states.FAILED
    sw.undeploy(deployment_id, wait=True)


LIFECYCLE = """---
version: '2.0'
lifecycle_wf:
  input:
    - server_id
    - config_id
    - group
  output:
    deployed: <% $.deployed %>
    redeployed: <% $.redeployed %>
    undeployed: <% $.undeployed %>
    group: <% $.group_made %>
    shown: <% $.group_shown %>
    deleted: <% $.group_deleted %>
  tasks:
    deploy:
      action: swflows.deploy
      input:
        server_id: <% $.server_id %>
        config_id: <% $.config_id %>
        input_values: {name: first}
      publish:
        deployed: <% task().result %>
      on-success: redeploy
    redeploy:
      action: swflows.redeploy
      input:
        deployment_id: <% $.deployed.id %>
        input_values: {name: second}
      publish:
        redeployed: <% task().result %>
      on-success: undeploy
    undeploy:
      action: swflows.undeploy
      input:
        deployment_id: <% $.redeployed.id %>
      publish:
        undeployed: <% task().result %>
      on-success: group_deploy
    group_deploy:
      action: swflows.group_deploy
      input:
        name: <% $.group %>
        config_id: <% $.config_id %>
        servers:
          web: <% $.server_id %>
        input_values: {name: member}
      publish:
        group_made: <% task().result %>
      on-success: group_show
    group_show:
      action: swflows.group_show
      input:
        name: <% $.group %>
      publish:
        group_shown: <% task().result %>
      on-success: group_delete
    group_delete:
      action: swflows.group_delete
      input:
        name: <% $.group %>
      publish:
        group_deleted: <% task().result %>
"""


def test_redeploy_undeploy_and_a_group(
    mistral_api: MistralApi, workflow: Any, sw: Swflows, server: str, hello: str
) -> None:
    """The other actions, one after another in one workflow."""
    name = workflow("lifecycle_wf", LIFECYCLE)
    group = f"mistral-{uuid.uuid4().hex[:8]}"
    run = mistral_api.start(name, server_id=server, config_id=hello, group=group)
    ended = mistral_api.wait(run)
    assert ended["state"] == "SUCCESS", (ended["state_info"], mistral_api.tasks(run))
    out = ended["output"]
    assert out["deployed"]["output_values"]["result"] == "hello first"
    assert out["redeployed"]["status"] == states.COMPLETE, out["redeployed"]
    assert out["redeployed"]["action"] == "UPDATE"
    assert out["redeployed"]["output_values"]["result"] == "hello second"
    assert out["undeployed"] == {"id": out["redeployed"]["id"], "undeployed": True}
    with pytest.raises(LookupError):
        sw.show(out["redeployed"]["id"])
    assert out["group"]["name"] == group
    assert out["group"]["status"] == states.COMPLETE, out["group"]
    assert out["shown"]["status"] == states.COMPLETE
    assert out["shown"]["outputs"]["result"]["web"] == "hello member", out["shown"]
    assert out["deleted"] == {"name": group, "deleted": True}
    with pytest.raises(LookupError):
        sw.show_group(group)
