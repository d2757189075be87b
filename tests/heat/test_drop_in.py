"""A template written for Heat's own ``OS::Heat::SoftwareDeployment``, with
its configs in ``OS::Heat::SoftwareConfig`` and ``OS::Heat::SoftwareComponent``
resources, runs unedited through swflows' environment file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from swflows import exceptions
from swflows.api import Swflows
from swflows.embedding import heat_plugins
from tests.functional.flowkit import leftovers
from tests.heat.conftest import TEMPLATE_VERSION, HeatApi

#: as a Heat user writes it: nothing in it names swflows
TEMPLATE = f"""
heat_template_version: "{TEMPLATE_VERSION}"
parameters:
  server: {{type: string}}
  name: {{type: string}}
resources:
  greeting:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs:
        - name: name
      outputs:
        - name: result
      config: |
        #!/bin/sh
        echo "hello $name" > "$heat_outputs_path.result"
        echo "greeted $name"
  backup:
    type: OS::Heat::SoftwareComponent
    properties:
      configs:
        - actions: [CREATE, UPDATE]
          tool: script
          config: |
            #!/bin/sh
            echo "saved by $deploy_action" > "$heat_outputs_path.saved"
      outputs:
        - name: saved
  greet:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {{get_resource: greeting}}
      server: {{get_param: server}}
      input_values:
        name: {{get_param: name}}
  save:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {{get_resource: backup}}
      server: {{get_param: server}}
outputs:
  result: {{value: {{get_attr: [greet, result]}}}}
  stdout: {{value: {{get_attr: [greet, deploy_stdout]}}}}
  saved: {{value: {{get_attr: [save, saved]}}}}
"""


def environment() -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load(Path(heat_plugins.ENVIRONMENT).read_text())
    return found


def test_heats_template_runs_unedited_through_the_environment(
    sw: Swflows, heat_api: HeatApi, server: str
) -> None:
    ref = heat_api.create(
        "drop-in", TEMPLATE, {"server": server, "name": "dora"}, environment()
    )
    deployments: list[str] = []
    configs: list[str] = []
    try:
        stack = heat_api.wait(ref)
        assert stack["stack_status"] == "CREATE_COMPLETE", stack["stack_status_reason"]
        assert heat_api.outputs(ref) == {
            "result": "hello dora\n",
            "stdout": "greeted dora\n",
            "saved": "saved by CREATE\n",
        }
        ids = heat_api.physical_ids(ref)
        for name, config in (("greet", "greeting"), ("save", "backup")):
            shown = heat_api.resource(ref, name)
            assert shown["resource_type"] == "OS::Heat::SoftwareDeployment"
            deployment = sw.show(shown["physical_resource_id"])
            deployments.append(deployment.id)
            # the deployment's config is a copy of Heat's, under its id
            heat_config = ids[config]
            assert deployment.source_config_id == heat_config
            assert sw.get_config(heat_config).group in ("script", "component")
            configs.append(heat_config)
    finally:
        heat_api.delete(ref)
    for config_id in configs:
        with pytest.raises(exceptions.ConfigNotFound):
            sw.get_config(config_id)
    assert deployments and leftovers(sw, *deployments) == {}
    assert sw.list_deployments(server_id=server) == []


def test_a_config_neither_swflows_nor_heat_fails_naming_it(
    heat_api: HeatApi, server: str
) -> None:
    missing = "4f1d9a0c-0000-4000-8000-00000000dead"
    template = yaml.safe_load(TEMPLATE)
    template["resources"]["greet"]["properties"]["config"] = missing
    del template["resources"]["save"]
    del template["outputs"]["saved"]
    ref = heat_api.create(
        "no-config", template, {"server": server, "name": "x"}, environment()
    )
    try:
        stack = heat_api.wait(ref)
        assert stack["stack_status"] == "CREATE_FAILED"
        reason = heat_api.resource(ref, "greet")["resource_status_reason"]
        assert missing in reason and "neither a swflows config" in reason, reason
    finally:
        heat_api.delete(ref)


#: Heat's SoftwareDeploymentGroup over a server of the stack, booted for
#: Heat's agents, and one running swflows' agent
GROUP_TEMPLATE = f"""
heat_template_version: "{TEMPLATE_VERSION}"
parameters:
  server: {{type: string}}
  name: {{type: string}}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs:
        - name: name
      outputs:
        - name: result
      config: |
        #!/bin/sh
        echo "hello $name from $deploy_server_id" > "$heat_outputs_path.result"
  booted:
    type: OS::Nova::Server
    properties:
      image: cirros
      flavor: m1.tiny
      user_data_format: SOFTWARE_CONFIG
      software_config_transport: POLL_SERVER_HEAT
  deps:
    type: OS::Heat::SoftwareDeploymentGroup
    properties:
      config: {{get_resource: config}}
      servers:
        heat: {{get_resource: booted}}
        ours: {{get_param: server}}
      input_values:
        name: {{get_param: name}}
outputs:
  result: {{value: {{get_attr: [deps, result]}}}}
  codes: {{value: {{get_attr: [deps, deploy_status_codes]}}}}
"""


def test_heats_deployment_group_runs_unedited_through_the_environment(
    sw: Swflows, heat_api: HeatApi, server: str
) -> None:
    """Heat's agents on the stack's own server and swflows' agent on the
    other each run the config; an update redeploys both; the delete leaves
    nothing, the stack's server forgotten."""
    ref = heat_api.create(
        "group", GROUP_TEMPLATE, {"server": server, "name": "ann"}, environment()
    )
    group_id = booted = None
    try:
        stack = heat_api.wait(ref, timeout=180)
        assert stack["stack_status"] == "CREATE_COMPLETE", stack["stack_status_reason"]
        ids = heat_api.physical_ids(ref)
        group_id, booted = ids["deps"], ids["booted"]
        assert heat_api.outputs(ref) == {
            "result": {
                "heat": f"hello ann from {booted}\n",
                "ours": f"hello ann from {server}\n",
            },
            "codes": {"heat": 0, "ours": 0},
        }
        shown = sw.show_group(group_id)
        assert shown["servers"] == {"heat": booted, "ours": server}
        assert sw.show_server(booted)["agent"] == "heat"

        heat_api.update(
            ref,
            yaml.safe_load(GROUP_TEMPLATE),
            {"server": server, "name": "bo"},
            environment(),
        )
        stack = heat_api.wait(ref, timeout=180, action="update")
        assert stack["stack_status"] == "UPDATE_COMPLETE", stack["stack_status_reason"]
        assert heat_api.outputs(ref)["result"] == {
            "heat": f"hello bo from {booted}\n",
            "ours": f"hello bo from {server}\n",
        }
        members = sw.show_group(group_id)["members"]
        deployments = [m["deployment_id"] for m in members.values()]
    finally:
        heat_api.delete(ref)
    assert group_id and booted
    with pytest.raises(exceptions.GroupNotFound):
        sw.show_group(group_id)
    assert leftovers(sw, *deployments) == {}
    assert sw.list_deployments(server_id=server) == []
    assert leftovers(sw, booted) == {}
    with pytest.raises(exceptions.NotFound):
        sw.show_server(booted)
