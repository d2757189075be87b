"""The Mistral actions, loaded through stevedore as Mistral's executor loads
them, run against the dev cloud; asynchronous results are received by a
small local HTTP server standing where Mistral's API would be."""

from __future__ import annotations

import http.server
import json
import queue
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mistral_lib import actions as ml_actions
from mistral_lib.actions import context as ml_context
from mistral_lib.actions import types
from stevedore import extension

from swflows import states
from swflows.api import Swflows
from swflows.embedding import mistral
from tests.functional import flowkit
from tests.functional.fakeserver import FakeServer
from tests.functional.flowkit import leftovers
from tests.functional.test_flows import component_config, script_config
from tests.functional.test_runner import until

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
TOKEN = "a-token-of-the-workflow-user"


@pytest.fixture(scope="module")
def descriptors() -> dict[str, Any]:
    """Every ``mistral.actions`` entry point, as Mistral's legacy provider
    registers them."""
    manager: extension.ExtensionManager[Any] = extension.ExtensionManager(
        namespace="mistral.actions", invoke_on_load=False
    )
    return {
        name: ml_actions.PythonActionDescriptor(
            name, manager[name].plugin, namespace=""
        )
        for name in manager.names()
        if name.startswith("swflows.")
    }


@pytest.fixture
def config_file(
    devcloud: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    path = flowkit.write_conf(
        devcloud,
        tmp_path / "swflows.conf",
        database=f"sqlite:///{tmp_path / 'swflows.sqlite'}",
    )
    monkeypatch.setenv(mistral.CONFIG_DIRS_ENV, str(tmp_path))
    monkeypatch.delenv(mistral.CONFIG_FILE_ENV, raising=False)
    yield str(path)
    mistral.close_all()


@pytest.fixture
def sw(config_file: str) -> Swflows:
    """The instance the actions use (opened by the first of them)."""
    return mistral.instance(config_file)[0]


class Receiver:
    """Stands where Mistral's API is: records the PUTs it is sent."""

    def __init__(self) -> None:
        self.received: queue.Queue[dict[str, Any]] = queue.Queue()
        received = self.received

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                received.put(
                    {
                        "path": self.path,
                        "token": self.headers.get("X-Auth-Token"),
                        "type": self.headers.get("Content-Type"),
                        "body": json.loads(self.rfile.read(length)),
                    }
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def context(self, action_execution_id: str) -> ml_context.ActionContext:
        """The context Mistral's executor gives an action: the callback is a
        path, its API is in the caller's catalog (a token's ``catalog``)."""
        catalog = {
            "catalog": [
                {
                    "type": "workflowv2",
                    "name": "mistral",
                    "endpoints": [
                        {
                            "interface": "public",
                            "region": "RegionOne",
                            "url": f"{self.url}/v2",
                        }
                    ],
                }
            ]
        }
        return context(action_execution_id, catalog, TOKEN)

    def next(self, timeout: float = 90) -> dict[str, Any]:
        return self.received.get(timeout=timeout)


def context(
    action_execution_id: str | None = None,
    catalog: Any = None,
    token: str | None = None,
) -> ml_context.ActionContext:
    action_execution_id = action_execution_id or str(uuid.uuid4())
    return ml_context.ActionContext(
        ml_context.SecurityContext(
            auth_token=token,
            service_catalog=catalog,
            region_name="RegionOne",
            project_id="p",
        ),
        ml_context.ExecutionContext(
            workflow_execution_id=str(uuid.uuid4()),
            task_execution_id=str(uuid.uuid4()),
            action_execution_id=action_execution_id,
            workflow_name="wf",
            callback_url=f"/v2/action_executions/{action_execution_id}",
        ),
    )


def run(
    descriptors: dict[str, Any],
    name: str,
    params: dict[str, Any],
    ctx: ml_context.ActionContext | None = None,
) -> Any:
    """Check, instantiate and run an action as Mistral's executor does."""
    descriptor = descriptors[name]
    descriptor.check_parameters(params)
    action = descriptor.instantiate(params, {})
    result = action.run(ctx or context())
    if action.is_sync():
        assert isinstance(result, types.Result), result
    return action, result


def ok(result: Any) -> dict[str, Any]:
    assert isinstance(result, types.Result) and result.is_success(), result
    return dict(result.data)


def error(result: Any) -> dict[str, Any]:
    assert isinstance(result, types.Result) and result.is_error(), result
    assert "Traceback" not in json.dumps(result.error)
    return dict(result.error)


def test_mistral_finds_every_action(descriptors: dict[str, Any]) -> None:
    assert sorted(descriptors) == NAMES
    spec = descriptors["swflows.deploy"].params_spec
    assert spec.startswith("server_id, config_id, input_values=null, ")
    for name in ("config_file=null", "wait=true", "wait_timeout=null"):
        assert name in spec.split(", ")
    assert "deployment_id" in descriptors["swflows.show"].params_spec


def test_sync_lifecycle(
    descriptors: dict[str, Any], config_file: str, sw: Swflows
) -> None:
    config = component_config(sw)
    server = str(uuid.uuid4())
    common = {"config_file": config_file}
    with FakeServer(sw, server):
        _, result = run(
            descriptors,
            "swflows.deploy",
            {
                "server_id": server,
                "config_id": config.id,
                "input_values": {"foo": "a"},
                "timeout": 60,
                **common,
            },
        )
        dep = ok(result)
        assert dep["status"] == states.COMPLETE
        assert dep["output_values"]["result"] == "out-a"
        json.dumps(dep)  # plain JSON

        dep = ok(
            run(
                descriptors,
                "swflows.redeploy",
                {"deployment_id": dep["id"], "input_values": {"foo": "b"}, **common},
            )[1]
        )
        assert dep["action"] == "UPDATE" and dep["output_values"]["result"] == "out-b"

        backup = ok(
            run(
                descriptors,
                "swflows.trigger",
                {"deployment_id": dep["id"], "action": "BACKUP", **common},
            )[1]
        )
        assert backup["status"] == states.COMPLETE
        assert backup["parent_id"] == dep["id"]

        shown = ok(
            run(descriptors, "swflows.show", {"deployment_id": dep["id"], **common})[1]
        )
        assert shown["config_id"] == dep["config_id"]

        for gone in (backup["id"], dep["id"]):
            removed = ok(
                run(descriptors, "swflows.undeploy", {"deployment_id": gone, **common})[
                    1
                ]
            )
            assert removed == {"id": gone, "undeployed": True}
    assert sw.list_deployments(server_id=server) == []
    assert leftovers(sw, dep["id"], backup["id"]) == {}


def test_a_failed_deployment_is_an_error_result_with_its_reason_kind(
    descriptors: dict[str, Any], config_file: str, sw: Swflows
) -> None:
    config = script_config(sw)
    server = str(uuid.uuid4())

    def failing(item: dict[str, Any]) -> dict[str, Any]:
        return {"deploy_stdout": "", "deploy_stderr": "boom", "deploy_status_code": 4}

    with FakeServer(sw, server, failing):
        _, result = run(
            descriptors,
            "swflows.deploy",
            {
                "server_id": server,
                "config_id": config.id,
                "timeout": 60,
                "config_file": config_file,
            },
        )
    failed = error(result)
    assert failed["kind"] == "exit_code"
    assert "status code: 4" in failed["message"]
    assert failed["deployment"]["status"] == states.FAILED
    assert failed["deployment"]["output_values"]["deploy_stderr"] == "boom"
    sw.undeploy(failed["deployment"]["id"])


def test_cancel_and_wait_timeout(
    descriptors: dict[str, Any], config_file: str, sw: Swflows
) -> None:
    config = script_config(sw)
    server = str(uuid.uuid4())  # nothing answers it
    inputs = {
        "server_id": server,
        "config_id": config.id,
        "timeout": 120,
        "config_file": config_file,
    }
    # a wait shorter than the flow's first steps (a stack user, a
    # container): queued, not shown until it starts, waited for again
    queued = error(
        run(descriptors, "swflows.deploy", {**inputs, "wait_timeout": 0.001})[1]
    )
    assert (queued["kind"], queued["started"]) == ("wait_timeout", False), queued
    deployment_id = queued["deployment_id"]
    show = {"deployment_id": deployment_id, "config_file": config_file}
    assert error(run(descriptors, "swflows.show", show)[1])["kind"] == "not_found"
    until(lambda: sw.list_deployments(server_id=server), what="its start")

    again = {**inputs, "deployment_id": deployment_id, "wait_timeout": 1}
    late = error(run(descriptors, "swflows.deploy", again)[1])
    assert (late["kind"], late["started"]) == ("wait_timeout", True), late
    assert late["deployment_id"] == deployment_id
    assert ok(run(descriptors, "swflows.show", show)[1])["status"] == (
        states.IN_PROGRESS  # left running, deployed once
    )
    assert [d.id for d in sw.list_deployments(server_id=server)] == [deployment_id]

    cancelled = ok(
        run(
            descriptors,
            "swflows.cancel",
            {
                "deployment_id": deployment_id,
                "reason": "no",
                "config_file": config_file,
            },
        )[1]
    )
    assert cancelled["status"] == states.FAILED
    assert cancelled["reason"]["kind"] == "cancelled"
    again = error(
        run(
            descriptors,
            "swflows.cancel",
            {"deployment_id": deployment_id, "config_file": config_file},
        )[1]
    )
    assert again["kind"] == "invalid_transition"
    sw.wait(deployment_id, timeout=60)
    sw.undeploy(deployment_id)
    assert leftovers(sw, deployment_id) == {}


def test_bad_input_is_an_error_result_and_leaves_nothing(
    descriptors: dict[str, Any], config_file: str, sw: Swflows, tmp_path: Path
) -> None:
    server = str(uuid.uuid4())
    missing = error(
        run(
            descriptors,
            "swflows.deploy",
            {
                "server_id": server,
                "config_id": str(uuid.uuid4()),
                "config_file": config_file,
            },
        )[1]
    )
    assert missing["kind"] == "not_found"
    config = script_config(sw)
    wrong = error(
        run(
            descriptors,
            "swflows.deploy",
            {
                "server_id": server,
                "config_id": config.id,
                "signal_transport": "PIGEON",
                "config_file": config_file,
            },
        )[1]
    )
    assert wrong["kind"] == "invalid_input" and "PIGEON" in wrong["message"]
    assert sw.list_deployments(server_id=server) == []
    assert sw.list_flows() == []

    elsewhere = error(
        run(
            descriptors,
            "swflows.show",
            {"deployment_id": "x", "config_file": "/etc/passwd"},
        )[1]
    )
    assert elsewhere == {
        "kind": "invalid_input",
        "message": f"config_file: /etc/passwd is not in a directory of "
        f"${mistral.CONFIG_DIRS_ENV}",
        "field": "config_file",
    }
    unset = error(run(descriptors, "swflows.show", {"deployment_id": "x"})[1])
    assert unset["kind"] == "invalid_input" and unset["field"] == "config_file"
    broken = tmp_path / "broken.conf"
    broken.write_text("[DEFAULT]\ndeployment_timeout = s3cr3t\n")
    unreadable = error(
        run(
            descriptors,
            "swflows.show",
            {"deployment_id": "x", "config_file": str(broken)},
        )[1]
    )
    assert unreadable["kind"] == "invalid_input"
    assert "s3cr3t" not in json.dumps(unreadable)


def test_async_deploy_reports_to_the_action_execution(
    descriptors: dict[str, Any], config_file: str, sw: Swflows
) -> None:
    config = script_config(sw)
    server = str(uuid.uuid4())
    action_id = str(uuid.uuid4())
    with Receiver() as mistral_api, FakeServer(sw, server):
        action, result = run(
            descriptors,
            "swflows.deploy",
            {
                "server_id": server,
                "config_id": config.id,
                "input_values": {"foo": "z"},
                "timeout": 60,
                "wait": False,
                "config_file": config_file,
            },
            mistral_api.context(action_id),
        )
        assert action.is_sync() is False
        assert result is None
        put = mistral_api.next()
    assert put["path"] == f"/v2/action_executions/{action_id}"
    assert put["token"] == TOKEN
    assert put["type"] == "application/json"
    assert put["body"]["state"] == "SUCCESS"
    dep = put["body"]["output"]
    assert (
        dep["status"] == states.COMPLETE and dep["output_values"]["result"] == "out-z"
    )
    assert mistral_api.received.empty()  # reported once

    with Receiver() as mistral_api:
        action, result = run(
            descriptors,
            "swflows.undeploy",
            {"deployment_id": dep["id"], "wait": False, "config_file": config_file},
            mistral_api.context(action_id),
        )
        assert result is None
        put = mistral_api.next()
    assert put["body"] == {
        "state": "SUCCESS",
        "output": {"id": dep["id"], "undeployed": True},
    }
    assert leftovers(sw, dep["id"]) == {}


def test_async_failure_reports_an_error_state(
    descriptors: dict[str, Any], config_file: str, sw: Swflows
) -> None:
    config = script_config(sw)
    server = str(uuid.uuid4())
    action_id = str(uuid.uuid4())
    with Receiver() as mistral_api:
        _, result = run(
            descriptors,
            "swflows.deploy",
            {
                "server_id": server,
                "config_id": config.id,
                "timeout": 1,  # nothing answers: it times out
                "wait": False,
                "config_file": config_file,
            },
            mistral_api.context(action_id),
        )
        assert result is None
        put = mistral_api.next()
    assert put["body"]["state"] == "ERROR"
    output = put["body"]["output"]
    assert output["kind"] == "timeout"
    assert output["deployment"]["status"] == states.FAILED
    sw.undeploy(output["deployment"]["id"])


def test_async_start_errors_come_back_at_once(
    descriptors: dict[str, Any], config_file: str, sw: Swflows
) -> None:
    """Mistral takes an error result of an asynchronous action at once."""
    server = str(uuid.uuid4())
    action, result = run(
        descriptors,
        "swflows.deploy",
        {
            "server_id": server,
            "config_id": script_config(sw).id,
            "wait": False,
            "config_file": config_file,
        },
        context(catalog=None),  # no Mistral in the catalog: nowhere to report
    )
    assert action.is_sync() is False
    assert error(result)["field"] == "callback_base_url"
    assert sw.list_deployments(server_id=server) == []
