"""An ``OS::Nova::Server`` and an ``OS::Swflows::Deployment`` in one stack.

The server is Heat's own (``user_data_format: SOFTWARE_CONFIG``,
``software_config_transport: POLL_SERVER_HEAT``), booted by the Nova
stand-in with its flavor and image looked up as Heat looks them up.  Heat's
agents on it would read the server resource's metadata through heat-api:
the deployment's derived config must be there, beside Heat's own
``os-collect-config`` section.  No agent runs on it here (the stand-in
starts only swflows' agent), so the test reads that metadata as the agent
would, and signals through heat-api as ``heat-config-notify`` would.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from swflows import derive
from swflows import metadata as server_metadata
from swflows.api import Swflows
from swflows.embedding.completion import action_flows
from tests.functional.flowkit import leftovers
from tests.heat.conftest import TEMPLATE_VERSION, HeatApi

SCRIPT = """#!/bin/sh
echo "hello $name" > "$heat_outputs_path.result"
"""


def template(config_id: str) -> dict[str, Any]:
    return {
        "heat_template_version": TEMPLATE_VERSION,
        "parameters": {"name": {"type": "string"}},
        "resources": {
            "server": {
                "type": "OS::Nova::Server",
                "properties": {
                    "image": "cirros",
                    "flavor": "m1.tiny",
                    "user_data_format": "SOFTWARE_CONFIG",
                    "software_config_transport": "POLL_SERVER_HEAT",
                },
            },
            "deploy": {
                "type": "OS::Swflows::Deployment",
                "properties": {
                    "config": config_id,
                    "server": {"get_resource": "server"},
                    "input_values": {"name": {"get_param": "name"}, "count": 3},
                    "signal_transport": "TEMP_URL_SIGNAL",
                },
            },
        },
        "outputs": {
            "result": {"value": {"get_attr": ["deploy", "result"]}},
            "code": {"value": {"get_attr": ["deploy", "deploy_status_code"]}},
        },
    }


@pytest.fixture(scope="module")
def greeting(sw: Swflows) -> Iterator[str]:
    config = sw.create_config(
        "greeting",
        SCRIPT,
        group="script",
        inputs=[{"name": "name"}, {"name": "count", "type": "Number"}],
        outputs=[{"name": "result"}],
    )
    yield config.id
    sw.delete_config(config.id)


def metadata(heat_api: HeatApi, ref: str, name: str) -> dict[str, Any]:
    """``openstack stack resource metadata REF NAME``: what Heat's
    ``heat`` collector reads."""
    found: dict[str, Any] = heat_api.call(
        "GET", f"/stacks/{ref}/resources/{name}/metadata"
    )["metadata"]
    return found


def test_the_servers_metadata_carries_the_deployment(
    sw: Swflows, heat_api: HeatApi, greeting: str
) -> None:
    ref = heat_api.create("with-server", template(greeting), {"name": "carol"})
    try:
        deadline = time.monotonic() + 90
        deployment_id = server_id = None
        while True:
            stack = heat_api.show(ref)
            assert stack["stack_status"] == "CREATE_IN_PROGRESS", (
                stack["stack_status"],
                stack["stack_status_reason"],
            )
            deployment_id = heat_api.resource(ref, "deploy")["physical_resource_id"]
            items = metadata(heat_api, ref, "server").get("deployments") or []
            if deployment_id and items:
                break
            assert time.monotonic() < deadline, "no deployment in the metadata"
            time.sleep(0.5)
        server_id = heat_api.resource(ref, "server")["physical_resource_id"]
        assert sw.show(deployment_id).server_id == server_id
        # enrolled for Heat's agents, on the transport Heat booted it with
        enrolled = sw.show_server(server_id)
        assert (enrolled["config_transport"], enrolled["agent"]) == (
            "POLL_SERVER_HEAT",
            "heat",
        )

        shown = metadata(heat_api, ref, "server")
        # Heat's own section, written when it booted the server, is kept
        assert shown["os-collect-config"]["heat"]["resource_name"] == "server"
        [item] = shown["deployments"]
        created = sw.show(deployment_id)
        assert item["id"] == derive.derived_config_id(deployment_id, created.generation)
        assert item["group"] == "script"
        assert item["config"] == SCRIPT
        inputs = {i["name"]: i["value"] for i in item["inputs"]}
        assert inputs["name"] == "carol"
        assert inputs["count"] == "3"  # Heat's hooks take text only
        assert inputs["deploy_server_id"] == server_id
        assert inputs["deploy_action"] == "CREATE"
        assert inputs["deploy_signal_transport"] == "TEMP_URL_SIGNAL"

        # what heat-config-notify sends once the script ran
        heat_api.signal(
            ref,
            "deploy",
            {"deploy_status_code": 0, "deploy_stdout": "", "result": "hello carol"},
        )
        stack = heat_api.wait(ref)
        assert stack["stack_status"] == "CREATE_COMPLETE", stack["stack_status_reason"]
        assert heat_api.outputs(ref) == {"result": "hello carol", "code": 0}
        [after] = metadata(heat_api, ref, "server")["deployments"]
        assert after["id"] == item["id"]
    finally:
        if heat_api.show(ref)["stack_status"] == "CREATE_IN_PROGRESS":
            # a deployment still waiting is not deleted: end it first
            heat_api.signal(ref, "deploy", {"deploy_status_code": 1})
            heat_api.wait(ref)
        heat_api.delete(ref)
    if deployment_id and server_id:
        with pytest.raises(Exception, match=deployment_id):
            sw.show(deployment_id)
        assert action_flows(sw, deployment_id) == []
        assert leftovers(sw, deployment_id) == {}
        # the server went with the stack: so did its enrollment
        assert server_metadata.find_server(sw.services, server_id) is None
        assert leftovers(sw, server_id) == {}
