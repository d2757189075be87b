"""The four flows against the real dev cloud, a test server signalling back."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from swflows import derive, exceptions, states
from swflows.api import Swflows
from tests.functional import flowkit
from tests.functional.fakeserver import FakeServer, ok_responder
from tests.functional.flowkit import leftovers

sw = flowkit.sw

TRANSPORTS = ["TEMP_URL_SIGNAL", "ZAQAR_SIGNAL", "HEAT_SIGNAL"]
SCRIPT = "#!/bin/sh\necho $foo > $heat_outputs_path.result\n"


def new_server() -> str:
    return str(uuid.uuid4())


def script_config(sw: Swflows) -> Any:
    return sw.create_config(
        "app",
        SCRIPT,
        group="script",
        inputs=[{"name": "foo", "default": "d"}],
        outputs=[{"name": "result"}, {"name": "problem", "error_output": True}],
    )


def component_config(sw: Swflows) -> Any:
    return sw.create_config(
        "db",
        {
            "configs": [
                {
                    "actions": ["CREATE", "UPDATE"],
                    "config": "install",
                    "tool": "script",
                },
                {"actions": ["BACKUP"], "config": "backup", "tool": "script"},
                {"actions": ["DELETE"], "config": "remove", "tool": "script"},
            ]
        },
        group="component",
        inputs=[{"name": "foo"}],
        outputs=[{"name": "result"}],
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_deploy_completes_with_outputs(sw: Swflows, transport: str) -> None:
    config = script_config(sw)
    server = new_server()
    with FakeServer(sw, server):
        dep = sw.deploy(
            server,
            config.id,
            input_values={"foo": "bar"},
            signal_transport=transport,
            timeout=60,
        )
    assert dep.status == states.COMPLETE, dep.status_reason
    assert dep.output_values["result"] == "out-bar"
    assert dep.output_values["deploy_status_code"] == 0
    assert dep.reason == {"kind": "outputs_received"}
    sw.undeploy(dep.id)
    assert sw.list_deployments(server_id=server) == []
    assert leftovers(sw, dep.id) == {}


def test_failed_signal_is_a_result(sw: Swflows) -> None:
    config = script_config(sw)
    server = new_server()

    def failing(item: dict[str, Any]) -> dict[str, Any]:
        return {"deploy_stdout": "", "deploy_stderr": "boom\n", "deploy_status_code": 3}

    with FakeServer(sw, server, failing):
        dep = sw.deploy(server, config.id, timeout=60)
    assert dep.status == states.FAILED
    assert dep.reason is not None and dep.reason["kind"] == "exit_code"
    assert dep.reason["exit_code"] == 3
    assert dep.output_values["deploy_stderr"] == "boom\n"
    assert "non-zero status code: 3" in dep.status_reason
    sw.undeploy(dep.id)


def test_error_output_fails(sw: Swflows) -> None:
    config = script_config(sw)
    server = new_server()

    def erroring(item: dict[str, Any]) -> dict[str, Any]:
        return {**ok_responder(item), "problem": "disk full"}

    with FakeServer(sw, server, erroring):
        dep = sw.deploy(server, config.id, timeout=60)
    assert dep.status == states.FAILED
    assert dep.reason is not None and dep.reason["kind"] == "error_output"
    assert "problem : disk full" in dep.status_reason
    sw.undeploy(dep.id)


@pytest.mark.parametrize("transport", ["TEMP_URL_SIGNAL", "ZAQAR_SIGNAL"])
def test_timeout_fails_and_cleans_up(sw: Swflows, transport: str) -> None:
    config = script_config(sw)
    server = new_server()
    dep = sw.deploy(server, config.id, signal_transport=transport, timeout=1)
    assert dep.status == states.FAILED
    assert dep.reason is not None and dep.reason["kind"] == "timeout"
    sw.undeploy(dep.id)
    assert leftovers(sw, dep.id) == {}


def test_no_signal_completes_at_once(sw: Swflows) -> None:
    config = script_config(sw)
    server = new_server()
    dep = sw.deploy(server, config.id, signal_transport="NO_SIGNAL")
    assert dep.status == states.COMPLETE
    assert dep.reason == {"kind": "not_waiting"}
    items = sw.server_metadata(server)
    assert [i["id"] for i in items] == [dep.config_id]
    sw.undeploy(dep.id)
    assert sw.server_metadata(server) == []


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_redeploy_trigger_undeploy(sw: Swflows, transport: str) -> None:
    config = component_config(sw)
    server = new_server()
    with FakeServer(sw, server) as fake:
        dep = sw.deploy(
            server,
            config.id,
            input_values={"foo": "a"},
            signal_transport=transport,
            timeout=60,
        )
        assert dep.status == states.COMPLETE, dep.status_reason
        first_config = dep.config_id

        dep = sw.redeploy(dep.id, input_values={"foo": "b"})
        assert dep.status == states.COMPLETE, dep.status_reason
        assert dep.action == "UPDATE" and dep.output_values["result"] == "out-b"
        assert dep.config_id != first_config
        assert [i["id"] for i in sw.server_metadata(server)] == [dep.config_id]

        backup = sw.trigger(dep.id, "BACKUP", input_values={"foo": "c"})
        assert backup.status == states.COMPLETE, backup.status_reason
        assert backup.name == "db-BACKUP" and backup.parent_id == dep.id
        assert backup.output_values["result"] == "out-c"
        assert sw.show(dep.id).config_id == dep.config_id  # untouched

        sw.undeploy(backup.id)
        assert sw.undeploy(dep.id) is None
        actions = [
            {i["name"]: i.get("value") for i in h["item"]["inputs"]}["deploy_action"]
            for h in fake.handled.values()
        ]
    assert actions == ["CREATE", "UPDATE", "BACKUP", "DELETE"]
    assert sw.list_deployments(server_id=server) == []
    assert leftovers(sw, dep.id, backup.id) == {}


def test_signal_to_finished_deployment_is_ignored(sw: Swflows) -> None:
    config = script_config(sw)
    server = new_server()
    with FakeServer(sw, server):
        dep = sw.deploy(server, config.id, signal_transport="HEAT_SIGNAL", timeout=60)
    assert sw.signal(dep.id, {"deploy_status_code": 9}) is False
    assert sw.show(dep.id).status == states.COMPLETE
    sw.undeploy(dep.id)


def inputs_of(item: dict[str, Any]) -> dict[str, Any]:
    return {i["name"]: i.get("value") for i in item["inputs"]}


#: inputs that tell an agent where or how to signal
SIGNAL_INPUTS = {
    derive.DEPLOY_SIGNAL_ID,
    derive.DEPLOY_SIGNAL_VERB,
    derive.DEPLOY_QUEUE_ID,
    derive.DEPLOY_QUEUE_SIGNED_URL,
    derive.DEPLOY_USER_ID,
    derive.DEPLOY_PASSWORD,
    derive.DEPLOY_SIGNAL_STARTED,
}


@pytest.mark.parametrize(
    "config_transport", ["POLL_TEMP_URL", "ZAQAR_MESSAGE", "POLL_SERVER_HEAT"]
)
def test_no_signal_every_flow(sw: Swflows, config_transport: str) -> None:
    """Deploy, redeploy, trigger and undeploy complete once published.

    The server reads each action through its config transport and sends
    nothing back; nothing is made for a signal (no user, object or queue).
    """
    config = component_config(sw)
    server = new_server()
    with FakeServer(sw, server, responder=lambda item: None) as fake:
        dep = sw.deploy(
            server,
            config.id,
            input_values={"foo": "a"},
            signal_transport="NO_SIGNAL",
            config_transport=config_transport,
        )
        assert (dep.status, dep.action) == (states.COMPLETE, "CREATE")
        assert dep.reason == {"kind": "not_waiting"}
        assert dep.output_values == {}
        assert leftovers(sw, dep.id) == {}
        fake.wait_handled(1)

        updated = sw.redeploy(dep.id, input_values={"foo": "b"})
        assert (updated.status, updated.action) == (states.COMPLETE, "UPDATE")
        assert updated.reason == {"kind": "not_waiting"}
        assert updated.generation == dep.generation + 1
        # the previous derived config is gone once the new one is published
        published = [i["id"] for i in fake.read_metadata()["deployments"]]
        assert published == [updated.config_id]
        assert dep.config_id not in {
            c.id for c in sw.list_configs(include_derived=True)
        }
        fake.wait_handled(2)

        backup = sw.trigger(dep.id, "BACKUP", input_values={"foo": "c"})
        assert (backup.status, backup.action) == (states.COMPLETE, "BACKUP")
        assert backup.name == "db-BACKUP" and backup.parent_id == dep.id
        assert backup.signal_transport == "NO_SIGNAL"
        assert sw.show(dep.id).config_id == updated.config_id  # untouched
        fake.wait_handled(3)

        sw.undeploy(backup.id)
        sw.undeploy(dep.id)
        assert fake.read_metadata()["deployments"] == []
    items = [h["item"] for h in fake.handled.values()]
    seen = [(inputs_of(i)["deploy_action"], inputs_of(i)["foo"]) for i in items]
    # the DELETE is published and withdrawn at once: the server may miss it
    assert seen[:3] == [("CREATE", "a"), ("UPDATE", "b"), ("BACKUP", "c")]
    for item in items:
        assert inputs_of(item)["deploy_signal_transport"] == "NO_SIGNAL"
        assert not SIGNAL_INPUTS & set(inputs_of(item)), item["name"]
    assert sw.list_deployments(server_id=server) == []
    assert leftovers(sw, dep.id, backup.id) == {}
    assert [c.id for c in sw.list_configs(include_derived=True)] == [config.id]


def suspendable_config(sw: Swflows) -> Any:
    return sw.create_config(
        "svc",
        {
            "configs": [
                {"actions": ["CREATE", "UPDATE"], "config": "run", "tool": "script"},
                {"actions": ["SUSPEND"], "config": "stop", "tool": "script"},
                {"actions": ["RESUME"], "config": "start", "tool": "script"},
            ]
        },
        group="component",
        inputs=[{"name": "foo", "default": "d"}],
        outputs=[{"name": "result"}],
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_suspend_and_resume(sw: Swflows, transport: str) -> None:
    config = suspendable_config(sw)
    server = new_server()
    with FakeServer(sw, server) as fake:
        dep = sw.deploy(server, config.id, signal_transport=transport, timeout=60)
        assert dep.status == states.COMPLETE, dep.status_reason

        suspended = sw.suspend(dep.id, input_values={"foo": "s"})
        assert suspended.status == states.COMPLETE, suspended.status_reason
        assert suspended.action == "SUSPEND"
        assert suspended.output_values["result"] == "out-s"
        assert suspended.output_values["deploy_stdout"] == "ran SUSPEND"
        assert [i["id"] for i in fake.read_metadata()["deployments"]] == [
            suspended.config_id
        ]

        resumed = sw.resume_deployment(dep.id)
        assert resumed.status == states.COMPLETE, resumed.status_reason
        assert resumed.action == "RESUME"
        assert resumed.output_values["result"] == "out-s"  # inputs carried on
        assert resumed.generation == dep.generation + 2
        assert [i["id"] for i in fake.read_metadata()["deployments"]] == [
            resumed.config_id
        ]
        sw.undeploy(dep.id)
    actions = [inputs_of(h["item"])["deploy_action"] for h in fake.handled.values()]
    assert actions == ["CREATE", "SUSPEND", "RESUME"]
    assert sw.list_deployments(server_id=server) == []
    assert leftovers(sw, dep.id) == {}
    assert [c.id for c in sw.list_configs(include_derived=True)] == [config.id]


def test_suspend_refused_when_the_config_has_no_suspend(sw: Swflows) -> None:
    config = component_config(sw)  # CREATE, UPDATE, BACKUP, DELETE
    server = new_server()
    with FakeServer(sw, server):
        dep = sw.deploy(server, config.id, timeout=60)
        with pytest.raises(exceptions.ValidationError, match="no entry for SUSPEND"):
            sw.suspend(dep.id)
        assert sw.show(dep.id) == dep  # untouched
        sw.undeploy(dep.id)


def test_suspend_a_script_deployed_with_suspend_in_its_actions(sw: Swflows) -> None:
    config = script_config(sw)
    server = new_server()
    with FakeServer(sw, server):
        dep = sw.deploy(
            server,
            config.id,
            actions=["CREATE", "UPDATE", "SUSPEND", "RESUME"],
            timeout=60,
        )
        try:
            assert dep.actions == ("CREATE", "UPDATE", "SUSPEND", "RESUME")
            assert sw.suspend(dep.id).action == "SUSPEND"
        finally:
            sw.undeploy(dep.id)


def test_zaqar_credentials_mode(sw: Swflows) -> None:
    """ZAQAR_SIGNAL with a stack user, as Heat does it.

    The agent logs in to Keystone with the deployment's credentials and
    posts to a queue of the stack user's own project; the user outlives
    each action's queue and is removed with the deployment.
    """
    sw.conf.set_override("zaqar_signal_auth", "credentials")
    config = component_config(sw)
    server = new_server()
    queues_seen: dict[str, tuple[str, list[str]]] = {}

    def responder(item: dict[str, Any]) -> dict[str, Any]:
        values = inputs_of(item)
        project = values[derive.DEPLOY_PROJECT_ID]
        queues_seen[values["deploy_action"]] = (
            project,
            flowkit.zaqar_queues(values[derive.DEPLOY_QUEUE_ID]),
        )
        return ok_responder(item)

    with FakeServer(sw, server, responder) as fake:
        dep = sw.deploy(
            server,
            config.id,
            input_values={"foo": "a"},
            signal_transport="ZAQAR_SIGNAL",
            timeout=60,
        )
        assert dep.status == states.COMPLETE, dep.status_reason
        assert dep.output_values["result"] == "out-a"
        assert dep.config_id is not None
        values = inputs_of(fake.handled[dep.config_id]["item"])
        assert derive.DEPLOY_QUEUE_SIGNED_URL not in values
        assert values[derive.DEPLOY_QUEUE_ID] == f"sws-{dep.id}-1"
        assert values[derive.DEPLOY_AUTH_URL] == sw.services.clients.identity_url
        assert values[derive.DEPLOY_USERNAME] == f"swflows-{dep.id}"
        project = values[derive.DEPLOY_PROJECT_ID]
        # the queue was the stack user's, and went once its signal was read
        assert queues_seen["CREATE"] == (project, [f"{project}/sws-{dep.id}-1"])
        held = leftovers(sw, dep.id)
        assert held == {
            "users": [f"swflows-{dep.id}"],
            "projects": [f"swflows-{dep.id}"],
        }

        updated = sw.redeploy(dep.id, input_values={"foo": "b"})
        assert updated.status == states.COMPLETE, updated.status_reason
        assert updated.output_values["result"] == "out-b"
        assert queues_seen["UPDATE"] == (project, [f"{project}/sws-{dep.id}-2"])
        assert leftovers(sw, dep.id) == held

        # an agent signalling late makes its queue again (Zaqar creates
        # queues on a post); removing the user must not strand it
        FakeServer.as_stack_user(values).post(
            values[derive.DEPLOY_QUEUE_ID], {"deploy_status_code": 0}, ttl=600
        )
        assert flowkit.zaqar_queues(dep.id) == [f"{project}/sws-{dep.id}-1"]

        sw.undeploy(dep.id)  # runs DELETE the same way first
    assert queues_seen["DELETE"] == (project, [f"{project}/sws-{dep.id}-3"])
    assert sw.list_deployments(server_id=server) == []
    assert leftovers(sw, dep.id) == {}
