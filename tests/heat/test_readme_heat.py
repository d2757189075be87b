"""The README's "Embedding in Heat", followed as it is: its Python makes the
config and enrolls the server, its template makes the stack."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import yaml

from swflows.api import Swflows
from tests.heat.conftest import HeatApi
from tests.heat.test_stacks import gone

README = Path(__file__).resolve().parents[2] / "README.md"


def section() -> str:
    text = README.read_text().split("### Embedding in Heat", 1)[1]
    return text.split("\n## ", 1)[0]


def block(kind: str) -> str:
    match = re.search(rf"```{kind}\n(.*?)\n *```", section(), re.S)
    assert match, f"README's Heat section has no {kind} block"
    return textwrap.dedent(match.group(1))


def test_the_walk_through(
    sw: Swflows, heat: dict[str, Any], heat_api: HeatApi, server: str
) -> None:
    code = block("python").replace("/etc/heat/heat.conf", heat["conf"])
    scope: dict[str, Any] = {"server_id": server}
    exec(compile(code, str(README), "exec"), scope)  # noqa: S102
    theirs: Swflows = scope["sw"]
    try:
        config = scope["config"]
        template = block("yaml")  # sent as written: Heat parses it
        assert yaml.safe_load(template)["resources"]["deploy"]
        ref = heat_api.create(
            "readme", template, {"name": "bob", "config": config.id, "server": server}
        )
        stack = heat_api.wait(ref)
        assert stack["stack_status"] == "CREATE_COMPLETE", stack["stack_status_reason"]
        assert heat_api.outputs(ref) == {"result": "hello bob\n", "status": 0}
        deployment_id = heat_api.resource(ref, "deploy")["physical_resource_id"]
        gone(sw, heat_api, ref, deployment_id)
        sw.delete_config(config.id)
    finally:
        theirs.close()
