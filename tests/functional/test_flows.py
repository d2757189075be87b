"""The four flows against the real dev cloud, a test server signalling back."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from swflows import states
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
