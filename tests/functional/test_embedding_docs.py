"""docs/embedding.md's examples run: the workflow's actions take its inputs,
and the embedder's Python runs against the dev cloud, its signal and
metadata handlers serving a server."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml
from cryptography import fernet
from mistral_lib import actions as ml_actions
from stevedore import extension

from swflows import states
from tests.functional import conftest, db_fixtures, flowkit
from tests.functional.fakeserver import FakeServer

DOC = Path(__file__).resolve().parents[2] / "docs" / "embedding.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), re.S)


def test_the_workflows_actions_take_its_inputs() -> None:
    manager: extension.ExtensionManager[Any] = extension.ExtensionManager(
        namespace="mistral.actions", invoke_on_load=False
    )
    (workflow_text,) = blocks("yaml")
    workflow = yaml.safe_load(workflow_text)
    tasks = workflow["app_rollout"]["tasks"]
    used = 0
    for task in tasks.values():
        name = task["action"]
        if not name.startswith("swflows."):
            continue
        descriptor = ml_actions.PythonActionDescriptor(
            name, manager[name].plugin, namespace=""
        )
        descriptor.check_parameters(task["input"])  # raises on a wrong input
        used += 1
    assert used == 2
    assert tasks["deploy"]["input"]["wait"] is False


class Server(FakeServer):
    """A server served by the doc's own handlers: it reads its metadata
    with ``get_metadata`` and signals through ``post_signal``."""

    def __init__(self, names: dict[str, Any], server_id: str) -> None:
        super().__init__(names["sw"], server_id)
        self.names = names

    def read_metadata(self) -> dict[str, Any]:
        return dict(self.names["get_metadata"](self.server_id))

    def send(self, item: dict[str, Any], answer: dict[str, Any]) -> None:
        inputs = {i["name"]: i.get("value") for i in item["inputs"]}
        deployment_id = self._deployment_for(item["id"])
        accepted = self.names["post_signal"](
            deployment_id, inputs["deploy_user_id"], json.dumps(answer).encode()
        )
        assert accepted


def test_the_embedder_example_runs(
    devcloud: dict[str, Any],
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    python = blocks("python")
    assert len(python) == 7
    build, signal, metadata, lifecycle, callback, delete, wsgi = python
    engine = sa.create_engine(db_fixtures._create_database(request.config))
    ks = devcloud["keystone"]
    names: dict[str, Any] = {
        "session": conftest.keystone_session(devcloud, "demo"),
        "engine": engine,
        "secret_key": fernet.Fernet.generate_key(),
        "domain_admin": conftest.stack_domain_admin_session(devcloud),
        "domain_id": ks["stack_user_domain_id"],
        "server_id": str(uuid.uuid4()),
        "keystone_url": ks["auth_url"],
        "service_password": "not-used-until-a-request",
    }

    def run(code: str) -> None:
        exec(compile(code, str(DOC), "exec"), names)  # noqa: S102

    try:
        run(build)
        sw = names["sw"]
        sw.conf.set_override("poll_interval", flowkit.POLL_INTERVAL, "watcher")
        names["config_id"] = (
            sw.create_config(
                "app",
                "#!/bin/sh\n",
                group="script",
                inputs=[{"name": "foo"}],
                outputs=[{"name": "result"}],
            )
        ).id
        run(signal)
        run(metadata)
        with Server(names, names["server_id"]) as server:
            run(lifecycle)
            run(callback)
            run(delete)
        run(wsgi)
        assert callable(names["app"])
    finally:
        if "sw" in names:
            names["sw"].close()
        engine.dispose()
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "result: out-bar",
        f"updated: {states.COMPLETE}",
        "deleted: {'deployments': []}",
    ]
    assert len(server.handled) == 2  # CREATE and UPDATE: the config has no DELETE
