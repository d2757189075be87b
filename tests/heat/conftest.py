"""A real Heat (heat-engine and heat-api, openstack-heat 27) on the dev cloud,
started once for the whole run by ``tools/devcloud heat-up``, with swflows'
plugin in its ``plugin_dirs``.  Stacks are driven through heat-api as the
demo user, as an operator's ``openstack stack ...`` would drive them.
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

from swflows.api import Swflows
from tests.functional import flowkit
from tests.functional.conftest import devcloud  # noqa: F401  (a fixture)
from tools.devcloud_lib import heat as devcloud_heat

REPO = Path(__file__).resolve().parents[2]
DEVCLOUD = REPO / "tools" / "devcloud"
HEAT_JSON = REPO / ".devcloud" / "heat.json"
HEAT_RECORDS = REPO / ".devcloud" / "heat-state" / "servers.json"
TEMPLATE_VERSION = "2021-04-16"


def run_devcloud(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(DEVCLOUD), *args],
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="session")
def heat(devcloud: dict[str, Any]) -> Iterator[dict[str, Any]]:  # noqa: F811
    """heat.json of a running Heat: started here unless it already runs
    with the engine workers asked for (``SWFLOWS_HEAT_ENGINE_WORKERS``, 1:
    a Heat left with more by ``tox -e bench-heat`` is started again),
    stopped at the end if started here.  Fails when Heat cannot start."""
    was_up = run_devcloud("heat-status").returncode == 0 and (
        json.loads(HEAT_JSON.read_text()).get("engine_workers")
        == devcloud_heat.engine_workers()
    )
    if not was_up:
        res = run_devcloud("heat-up")
        if res.returncode != 0:
            pytest.fail(
                f"tools/devcloud heat-up failed (exit {res.returncode}):\n"
                f"{res.stdout}\n{res.stderr}",
                pytrace=False,
            )
    yield json.loads(HEAT_JSON.read_text())
    if not was_up and os.environ.get("SWFLOWS_KEEP_DEVCLOUD") != "1":
        res = run_devcloud("heat-down")
        assert res.returncode == 0, res.stdout + res.stderr


@pytest.fixture(scope="session")
def sw(heat: dict[str, Any]) -> Iterator[Swflows]:
    """swflows as heat-engine's plugin builds it (the same options, identity
    and database), without a runner: the tests read and make servers and
    configs, heat-engine runs the flows."""
    from heat.common import config  # noqa: F401  (registers Heat's options)
    from oslo_config import cfg

    from swflows.embedding import heat as plugin

    cfg.CONF(["--config-file", heat["conf"]], project="heat")
    made = plugin.build(cfg.CONF, start=False)
    yield made
    made.close()


@pytest.fixture(scope="session")
def server(sw: Swflows) -> Iterator[str]:
    """A server running swflows' agent, enrolled on the transport the
    plugin picks by default for this cloud's catalog."""
    from swflows.embedding import heat as plugin

    made = sw.create_server(
        "heat-web",
        "cirros",
        "m1.tiny",
        config_transport=plugin.default_config_transport(sw),
    )
    yield str(made["server_id"])
    sw.delete_server(made["server_id"])


class HeatApi(flowkit.ServiceApi):
    """heat-api as the demo user (keystoneauth only, no heatclient)."""

    service_type = "orchestration"

    def create(
        self,
        name: str,
        template: dict[str, Any] | str,
        parameters: dict[str, Any],
        environment: dict[str, Any] | None = None,
    ) -> str:
        name = f"{name}-{uuid.uuid4().hex[:8]}"
        body = {"stack_name": name, "template": template, "parameters": parameters}
        if environment is not None:
            body["environment"] = environment
        stack_id = self.call("POST", "/stacks", json=body)["stack"]["id"]
        return f"{name}/{stack_id}"

    def update(
        self,
        ref: str,
        template: dict[str, Any],
        parameters: dict[str, Any],
        environment: dict[str, Any] | None = None,
    ) -> None:
        body = {"template": template, "parameters": parameters}
        if environment is not None:
            body["environment"] = environment
        self.call("PUT", f"/stacks/{ref}", json=body)

    def action(self, ref: str, name: str) -> None:
        """A stack action: suspend, resume, check."""
        self.call("POST", f"/stacks/{ref}/actions", json={name: None})

    def show(self, ref: str) -> dict[str, Any]:
        stack: dict[str, Any] = self.call("GET", f"/stacks/{ref}")["stack"]
        return stack

    def wait(
        self, ref: str, timeout: float = 120, action: str | None = None
    ) -> dict[str, Any]:
        """The stack once no action is in progress (``action``: once that
        action, which Heat may start after answering, has ended)."""
        deadline = time.monotonic() + timeout
        while True:
            stack = self.show(ref)
            status = stack["stack_status"]
            if not status.endswith("_IN_PROGRESS") and (
                action is None or status.startswith(action.upper() + "_")
            ):
                return stack
            if time.monotonic() > deadline:
                raise AssertionError(f"{ref} still {stack['stack_status']}")
            time.sleep(0.5)

    def outputs(self, ref: str) -> dict[str, Any]:
        return {
            o["output_key"]: o.get("output_value")
            for o in self.show(ref).get("outputs") or []
        }

    def resource(self, ref: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.call("GET", f"/stacks/{ref}/resources/{name}")[
            "resource"
        ]
        return found

    def physical_ids(self, ref: str) -> dict[str, str]:
        """Each resource's physical id, by name, from the stack's resource
        list (showing a SoftwareConfig resource asks the engine again, which
        a single engine worker cannot answer while it answers the show)."""
        listed = self.call("GET", f"/stacks/{ref}/resources")["resources"]
        return {r["resource_name"]: r["physical_resource_id"] for r in listed}

    def signal(self, ref: str, name: str, details: dict[str, Any]) -> None:
        self.call("POST", f"/stacks/{ref}/resources/{name}/signal", json=details)

    def delete(self, ref: str, timeout: float = 120) -> None:
        """Delete and wait until Heat no longer lists the stack."""
        self.call("DELETE", f"/stacks/{ref}")
        deadline = time.monotonic() + timeout
        while True:
            resp = self.session.get(
                f"/stacks/{ref}", endpoint_filter=self.filter, raise_exc=False
            )
            if resp.status_code == 404:
                return
            status = resp.json()["stack"]["stack_status"]
            if status in ("DELETE_COMPLETE",):
                return
            assert status != "DELETE_FAILED", resp.json()["stack"]
            assert time.monotonic() < deadline, status
            time.sleep(0.5)


@pytest.fixture(scope="session")
def heat_api(heat: dict[str, Any], devcloud: dict[str, Any]) -> HeatApi:  # noqa: F811
    return HeatApi(devcloud)


def kill_engine() -> None:
    """SIGKILL heat-engine and its workers (its own process group)."""
    record = json.loads(HEAT_RECORDS.read_text())["heat-engine"]
    os.killpg(record["pid"], signal.SIGKILL)


def start_engine() -> None:
    res = run_devcloud("heat-engine-start")
    assert res.returncode == 0, res.stdout + res.stderr
