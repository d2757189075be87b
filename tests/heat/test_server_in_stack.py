"""An ``OS::Nova::Server`` and an ``OS::Swflows::Deployment`` in one stack,
the server running Heat's own agents.

The server is Heat's (``user_data_format: SOFTWARE_CONFIG``), booted by
the Nova stand-in with its flavor and image looked up as Heat looks them
up.  Its user data is Heat's, so the stand-in boots Heat's agent chain
(os-collect-config, os-apply-config, os-refresh-config, heat-agents'
``55-heat-config``, script hook and ``heat-config-notify``): the agents
read the server resource's metadata through heat-api
(``software_config_transport: POLL_SERVER_HEAT``) or the TempURL Heat made
for the server (``POLL_TEMP_URL``), run the script and signal the
deployment's TempURL.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from bench.against_heat import SwiftLines
from bench.cloud import until
from swflows import derive
from swflows import metadata as server_metadata
from swflows.api import Swflows
from swflows.embedding.completion import action_flows
from tests.functional.flowkit import leftovers
from tests.heat.conftest import TEMPLATE_VERSION, HeatApi

#: the Nova stand-in's server folders (agent logs)
AGENTS = Path(__file__).resolve().parents[2] / ".devcloud" / "state" / "nova" / "agents"

SCRIPT = """#!/bin/sh
echo "hello $name" > "$heat_outputs_path.result"
"""


def template(config_id: str) -> dict[str, Any]:
    return {
        "heat_template_version": TEMPLATE_VERSION,
        "parameters": {
            "name": {"type": "string"},
            "transport": {"type": "string"},
        },
        "resources": {
            "server": {
                "type": "OS::Nova::Server",
                "properties": {
                    "image": "cirros",
                    "flavor": "m1.tiny",
                    "user_data_format": "SOFTWARE_CONFIG",
                    "software_config_transport": {"get_param": "transport"},
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


def booted(devcloud: dict[str, Any], server_id: str) -> dict[str, Any]:
    """What the Nova stand-in says it booted on the server."""
    url = f"{devcloud['nova']['control_url']}/servers/{server_id}"
    record: dict[str, Any] = requests.get(url, timeout=30).json()["server"]
    return record


def agent_log(server_id: str | None) -> str:
    log = AGENTS / str(server_id) / "agent.log"
    return log.read_text(errors="replace")[-6000:] if log.is_file() else ""


@pytest.mark.parametrize("transport", ["POLL_SERVER_HEAT", "POLL_TEMP_URL"])
def test_heats_agents_on_a_server_of_the_stack_run_the_deployment(
    sw: Swflows,
    heat_api: HeatApi,
    devcloud: dict[str, Any],
    greeting: str,
    transport: str,
) -> None:
    params = {"name": "carol", "transport": transport}
    ref = heat_api.create("with-server", template(greeting), params)
    deployment_id = server_id = None
    try:
        stack = heat_api.wait(ref, timeout=180)
        ids = heat_api.physical_ids(ref)
        deployment_id, server_id = ids["deploy"], ids["server"]
        assert stack["stack_status"] == "CREATE_COMPLETE", (
            stack["stack_status_reason"],
            agent_log(server_id),
        )
        # the script ran on the server, through Heat's hook, and
        # heat-config-notify's signal completed the deployment
        assert heat_api.outputs(ref) == {"result": "hello carol\n", "code": 0}
        assert "Heat's agents" in booted(devcloud, server_id)["agent"]["why"]
        assert sw.show(deployment_id).server_id == server_id
        # enrolled for Heat's agents, reading the metadata Heat serves
        enrolled = sw.show_server(server_id)
        assert (enrolled["config_transport"], enrolled["agent"]) == (
            "POLL_SERVER_HEAT",
            "heat",
        )
        shown = metadata(heat_api, ref, "server")
        # Heat's own section, written when it booted the server, is kept
        collect = shown["os-collect-config"]
        assert ("heat" if transport == "POLL_SERVER_HEAT" else "request") in collect
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
    except BaseException:
        print(f"--- the server's agents ---\n{agent_log(server_id)}")
        raise
    finally:
        heat_api.delete(ref)
    if deployment_id and server_id:
        with pytest.raises(Exception, match=deployment_id):
            sw.show(deployment_id)
        assert action_flows(sw, deployment_id) == []
        assert leftovers(sw, deployment_id) == {}
        # the server went with the stack: so did its enrollment
        assert server_metadata.find_server(sw.services, server_id) is None
        assert leftovers(sw, server_id) == {}


def test_a_waiting_deployment_leaves_its_servers_metadata_object_alone(
    sw: Swflows, heat_api: HeatApi, devcloud: dict[str, Any]
) -> None:
    # Heat checks a deployment about once a second while it waits; each
    # check wrote the server's metadata again and PUT the same object to
    # Swift (a write per waiting deployment per second). Swift's own access
    # lines count the PUTs to the object Heat made for the server.
    config = sw.create_config(
        "sleeper",
        "#!/bin/sh\nsleep 120\n",
        group="script",
        inputs=[{"name": "name"}, {"name": "count", "type": "Number"}],
    )
    swift = SwiftLines(devcloud["swift"]["access_log"])
    ref = heat_api.create(
        "waiting", template(config.id), {"name": "w", "transport": "POLL_TEMP_URL"}
    )
    stack_name = ref.split("/")[0]
    server_id = None
    try:
        # once Heat serves the deployment's item, it has been written
        until(
            lambda: metadata(heat_api, ref, "server").get("deployments"),
            120,
            "the deployment in the server's metadata",
        )
        server_id = heat_api.physical_ids(ref)["server"]
        assert heat_api.show(ref)["stack_status"] == "CREATE_IN_PROGRESS"
        time.sleep(2)  # the PUT that follows the write
        start = time.time()
        time.sleep(8)
        puts = [
            line
            for line in swift.since(start)
            if line["method"] == "PUT"
            and line["path"].split("/")[3].startswith(f"{stack_name}-server-")
        ]
        assert heat_api.show(ref)["stack_status"] == "CREATE_IN_PROGRESS"
        assert len(puts) <= 1, puts
    except BaseException:
        print(f"--- the server's agents ---\n{agent_log(server_id)}")
        raise
    finally:
        swift.close()
        heat_api.delete(ref)
        sw.delete_config(config.id)
