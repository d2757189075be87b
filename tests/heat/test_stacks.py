"""Stacks of ``OS::Swflows::Deployment`` driven through a real heat-api.

The servers are booted by the Nova stand-in; a server enrolled for swflows'
agent runs that agent as a real process, which runs the scripts here on
this machine, so a script can count its own runs in a file.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from swflows import bootdata, model
from swflows.api import Swflows
from swflows.embedding.completion import action_flows
from tests.functional.flowkit import leftovers
from tests.heat.conftest import TEMPLATE_VERSION, HeatApi, kill_engine, start_engine

HELLO = """#!/bin/sh
echo "start $name" >> "$runs"
sleep "$pause"
echo "hello $name" > "$heat_outputs_path.result"
echo "end $name" >> "$runs"
echo "said hello to $name"
"""

FAILING = """#!/bin/sh
echo "no disk left" >&2
exit 3
"""


def template(config_id: str, server_id: str, **properties: Any) -> dict[str, Any]:
    """One deployment, its inputs from the stack's parameters, its outputs
    read both ways Heat's SoftwareDeployment allows."""
    return {
        "heat_template_version": TEMPLATE_VERSION,
        "parameters": {
            "name": {"type": "string"},
            "runs": {"type": "string", "default": "/dev/null"},
            "pause": {"type": "number", "default": 0},
        },
        "resources": {
            "deploy": {
                "type": "OS::Swflows::Deployment",
                "properties": {
                    "config": config_id,
                    "server": server_id,
                    "input_values": {
                        "name": {"get_param": "name"},
                        "runs": {"get_param": "runs"},
                        "pause": {"get_param": "pause"},
                    },
                    **properties,
                },
            }
        },
        "outputs": {
            "result": {"value": {"get_attr": ["deploy", "result"]}},
            "from_map": {"value": {"get_attr": ["deploy", "outputs", "result"]}},
            "code": {"value": {"get_attr": ["deploy", "deploy_status_code"]}},
            "stdout": {"value": {"get_attr": ["deploy", "deploy_stdout"]}},
        },
    }


@pytest.fixture(scope="module")
def hello(sw: Swflows) -> Iterator[str]:
    config = sw.create_config(
        "hello",
        HELLO,
        group="script",
        inputs=[{"name": "name"}, {"name": "runs"}, {"name": "pause"}],
        outputs=[{"name": "result"}],
    )
    yield config.id
    sw.delete_config(config.id)


def runs(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def gone(sw: Swflows, heat_api: HeatApi, ref: str, deployment_id: str) -> None:
    """Delete the stack; nothing of its deployment is left anywhere."""
    heat_api.delete(ref)
    with pytest.raises(Exception, match=deployment_id):
        sw.show(deployment_id)
    assert action_flows(sw, deployment_id) == []
    assert leftovers(sw, deployment_id) == {}


def test_create_update_delete(
    sw: Swflows, heat_api: HeatApi, server: str, hello: str, tmp_path: Path
) -> None:
    counted = tmp_path / "runs"
    tmpl = template(hello, server)
    ref = heat_api.create("hello", tmpl, {"name": "bob", "runs": str(counted)})
    stack = heat_api.wait(ref)
    assert stack["stack_status"] == "CREATE_COMPLETE", stack["stack_status_reason"]
    assert heat_api.outputs(ref) == {
        "result": "hello bob\n",
        "from_map": "hello bob\n",
        "code": 0,
        "stdout": "said hello to bob\n",
    }
    deployment_id = heat_api.resource(ref, "deploy")["physical_resource_id"]
    assert sw.show(deployment_id).server_id == server
    assert runs(counted) == ["start bob", "end bob"]

    heat_api.update(ref, tmpl, {"name": "alice", "runs": str(counted)})
    stack = heat_api.wait(ref, action="update")
    assert stack["stack_status"] == "UPDATE_COMPLETE", stack["stack_status_reason"]
    assert heat_api.outputs(ref)["result"] == "hello alice\n"
    assert sw.show(deployment_id).action == model.UPDATE
    assert runs(counted) == ["start bob", "end bob", "start alice", "end alice"]

    # the config has no SUSPEND or RESUME: as in Heat, nothing runs
    for action in ("suspend", "resume"):
        heat_api.action(ref, action)
        stack = heat_api.wait(ref, action=action)
        assert stack["stack_status"] == f"{action.upper()}_COMPLETE", stack
    assert len(runs(counted)) == 4

    gone(sw, heat_api, ref, deployment_id)
    assert sw.list_deployments(server_id=server) == []


def test_a_failing_script_fails_the_stack(
    sw: Swflows, heat_api: HeatApi, server: str
) -> None:
    config = sw.create_config("broken", FAILING, group="script")
    ref = heat_api.create(
        "broken",
        {
            "heat_template_version": TEMPLATE_VERSION,
            "resources": {
                "deploy": {
                    "type": "OS::Swflows::Deployment",
                    "properties": {"config": config.id, "server": server},
                }
            },
            "outputs": {
                "code": {"value": {"get_attr": ["deploy", "deploy_status_code"]}},
                "stderr": {"value": {"get_attr": ["deploy", "deploy_stderr"]}},
            },
        },
        {},
    )
    stack = heat_api.wait(ref)
    assert stack["stack_status"] == "CREATE_FAILED"
    resource = heat_api.resource(ref, "deploy")
    assert resource["resource_status"] == "CREATE_FAILED"
    assert "status code 3" in resource["resource_status_reason"] or (
        "3" in resource["resource_status_reason"]
    ), resource["resource_status_reason"]
    deployment_id = resource["physical_resource_id"]
    failed = sw.show(deployment_id)
    assert failed.reason == {"kind": "exit_code", "exit_code": 3}
    assert heat_api.outputs(ref) == {"code": 3, "stderr": "no disk left\n"}
    gone(sw, heat_api, ref, deployment_id)
    sw.delete_config(config.id)


def test_a_signal_through_heat_api(
    sw: Swflows, heat_api: HeatApi, hello: str, devcloud: dict[str, Any]
) -> None:
    """A server enrolled for Heat's agents, where none runs (its image has
    no agent: the Nova stand-in boots none without user data): a signal
    sent with ``openstack stack resource signal`` reaches the deployment,
    whatever its transport.  HEAT_SIGNAL itself is refused before anything
    is made: no agent can sign in to heat-api for the resource (swflows'
    agent retried it forever, naming a ``heat_signal_url``)."""
    from swflows.embedding import heat as plugin

    server_id = str(uuid.uuid4())
    control = f"{devcloud['nova']['control_url']}/servers/{server_id}"
    requests.put(control, json={"name": "heat-signal"}, timeout=30).raise_for_status()
    sw.enroll_server(
        server_id,
        plugin.default_config_transport(sw, bootdata.HEAT_AGENTS),
        agent=bootdata.HEAT_AGENTS,
    )
    try:
        with pytest.raises(AssertionError, match="400") as refused:
            heat_api.create(
                "heat-signal",
                template(hello, server_id, signal_transport="HEAT_SIGNAL"),
                {"name": "nobody"},
            )
        assert "TEMP_URL_SIGNAL" in str(refused.value)
        assert sw.list_deployments(server_id=server_id) == []
        ref = heat_api.create(
            "signalled",
            template(hello, server_id, signal_transport="TEMP_URL_SIGNAL"),
            {"name": "nobody"},
        )
        deadline = time.monotonic() + 60
        while heat_api.show(ref)["stack_status"] == "CREATE_IN_PROGRESS":
            # a signal before the deployment waits for one is ignored
            heat_api.signal(
                ref,
                "deploy",
                {"deploy_status_code": 0, "deploy_stdout": "ok", "result": "by hand"},
            )
            assert time.monotonic() < deadline
            time.sleep(1)
        stack = heat_api.wait(ref)
        assert stack["stack_status"] == "CREATE_COMPLETE", stack["stack_status_reason"]
        outputs = heat_api.outputs(ref)
        assert outputs["result"] == "by hand"
        assert outputs["code"] == 0
        deployment_id = heat_api.resource(ref, "deploy")["physical_resource_id"]
        assert sw.show(deployment_id).signal_transport == "TEMP_URL_SIGNAL"
        gone(sw, heat_api, ref, deployment_id)
    finally:
        sw.delete_server(server_id)


def test_engine_killed_mid_create_then_updated(
    sw: Swflows, heat_api: HeatApi, server: str, hello: str, tmp_path: Path
) -> None:
    """heat-engine SIGKILLed while the config runs; once it is back, a stack
    update adopts the deployment: the config ran once, its result is read."""
    counted = tmp_path / "runs"
    tmpl = template(hello, server)
    params = {"name": "once", "runs": str(counted), "pause": 4}
    ref = heat_api.create("killed", tmpl, params)
    deadline = time.monotonic() + 60
    while runs(counted) != ["start once"]:
        assert time.monotonic() < deadline, runs(counted)
        time.sleep(0.2)
    deployment_id = heat_api.resource(ref, "deploy")["physical_resource_id"]
    kill_engine()
    start_engine()

    heat_api.update(ref, tmpl, params)
    stack = heat_api.wait(ref, timeout=180, action="update")
    assert stack["stack_status"] == "UPDATE_COMPLETE", stack["stack_status_reason"]
    assert heat_api.resource(ref, "deploy")["physical_resource_id"] == deployment_id
    assert heat_api.outputs(ref)["result"] == "hello once\n"
    assert runs(counted) == ["start once", "end once"]
    gone(sw, heat_api, ref, deployment_id)


def test_swflows_uses_what_the_catalog_lists(sw: Swflows, devcloud: Any) -> None:
    """The plugin's swflows uses the services Keystone's catalog lists, and
    its default transports follow: Swift's where Swift is listed, else
    Zaqar's for swflows' agent and Heat's own API for Heat's agents."""
    from keystoneauth1 import session as ks_session
    from oslo_config import cfg

    from swflows.embedding import heat as plugin

    auth = plugin.service_auth(cfg.CONF)
    session = ks_session.Session(auth=auth)
    access = auth.get_access(session)
    listed = {entry["type"] for entry in access.service_catalog.catalog}
    offered = {
        service
        for service in plugin.CATALOG_TYPES
        if sw.services.clients.offers(service)
    }
    assert offered == {
        service for service, kind in plugin.CATALOG_TYPES.items() if kind in listed
    }
    assert "compute" in offered and "messaging" in offered
    if "object_store" in offered:
        expected = {"swflows": "POLL_TEMP_URL", "heat": "POLL_TEMP_URL"}
    else:
        expected = {"swflows": "ZAQAR_MESSAGE", "heat": "POLL_SERVER_HEAT"}
    assert {
        agent: plugin.default_config_transport(sw, agent) for agent in expected
    } == expected


def test_heat_lists_the_resource_type(heat_api: HeatApi) -> None:
    """``openstack orchestration resource type list`` and ``... show``."""
    listed = heat_api.call("GET", "/resource_types")["resource_types"]
    assert "OS::Swflows::Deployment" in listed
    shown = heat_api.call("GET", "/resource_types/OS::Swflows::Deployment")
    assert shown["attributes"]["deploy_status_code"]["type"] == "integer"
    assert shown["properties"]["config"]["required"] is True
