"""The Mistral actions' pure parts: error results, the callback's URL and
delivery, which configuration files an action may name."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mistral_lib.actions import context as ml_context
from mistral_lib.actions import types

from swflows import callbacks, exceptions, model, states
from swflows.clients.callback import put_result
from swflows.embedding import mistral
from swflows.embedding.mistral import actions as mistral_actions
from swflows.embedding.mistral import instances as mistral_instances


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (exceptions.ValidationError("timeout", "must be positive"), "invalid_input"),
        (exceptions.DeploymentNotFound("d1"), "not_found"),
        (
            exceptions.InvalidTransition("d1", "IN_PROGRESS", "FAILED"),
            "invalid_transition",
        ),
        (exceptions.WaitTimeout("d1", 5), "wait_timeout"),
        (exceptions.NotSupported("no messaging service"), "not_supported"),
        (exceptions.CloudError("swift", "down", retryable=True), "cloud_error"),
        (exceptions.FlowError("f1", "broken"), "flow_error"),
        (exceptions.SignalRejected("payload", "too large"), "signal_rejected"),
    ],
)
def test_errors_carry_their_kind(exc: exceptions.SwflowsError, kind: str) -> None:
    error = mistral.error_of(exc)
    assert error["kind"] == kind
    assert error["message"] == str(exc)
    json.dumps(error)


def test_error_fields() -> None:
    assert mistral.error_of(exceptions.ValidationError("timeout", "bad")) == {
        "kind": "invalid_input",
        "message": "timeout: bad",
        "field": "timeout",
    }
    waited = mistral.error_of(exceptions.WaitTimeout("d1", 5))
    assert (waited["deployment_id"], waited["started"]) == ("d1", True)
    queued = mistral.error_of(exceptions.WaitTimeout("d1", 5, started=False))
    assert (queued["deployment_id"], queued["started"]) == ("d1", False)
    assert mistral.error_of(exceptions.CloudError("x", "y", retryable=True))[
        "retryable"
    ]


def test_a_foreign_error_says_only_its_type() -> None:
    error = mistral.error_of(RuntimeError("password=hunter2 at /etc/x"))
    assert error == {"kind": "internal_error", "message": "RuntimeError"}


def deployment(status: str, reason: dict[str, Any] | None) -> model.Deployment:
    return model.Deployment(
        id="d1",
        server_id="s1",
        config_id="c1",
        source_config_id="c0",
        action="CREATE",
        status=status,
        status_reason="Deployment exited with non-zero status code: 3",
        reason=reason,
        output_values={"deploy_status_code": 3},
    )


def test_a_failed_deployment_is_an_error_with_its_reason_kind() -> None:
    failed = mistral.outcome_of(
        deployment(states.FAILED, {"kind": "exit_code", "exit_code": 3})
    )
    assert failed.is_error()
    assert failed.error["kind"] == "exit_code"
    assert failed.error["deployment"]["output_values"] == {"deploy_status_code": 3}
    done = mistral.outcome_of(deployment(states.COMPLETE, {"kind": "outputs_received"}))
    assert done.is_success() and done.data["id"] == "d1"


def ctx(
    callback: str | None = "/v2/action_executions/a1",
    catalog: Any = None,
    region: str | None = None,
) -> ml_context.ActionContext:
    return ml_context.ActionContext(
        ml_context.SecurityContext(service_catalog=catalog, region_name=region),
        ml_context.ExecutionContext(action_execution_id="a1", callback_url=callback),
    )


def catalog(url: str, region: str = "R1") -> list[dict[str, Any]]:
    return [
        {"type": "identity", "endpoints": [{"interface": "public", "url": "k"}]},
        {
            "type": "workflowv2",
            "endpoints": [
                {"interface": "internal", "region": region, "url": "http://internal"},
                {"interface": "public", "region": region, "url": url},
            ],
        },
    ]


@pytest.mark.parametrize(
    "shape",
    [
        lambda c: c,  # a list
        lambda c: {"catalog": c},  # a token body, as Mistral keeps it
        lambda c: json.dumps({"catalog": c}),  # as a header carries it
    ],
)
def test_the_callback_goes_to_mistral_in_the_callers_catalog(shape: Any) -> None:
    found = mistral.callback_url(ctx(catalog=shape(catalog("http://m:8989/v2/"))))
    assert found == "http://m:8989/v2/action_executions/a1"


def test_the_callback_base(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(mistral.MISTRAL_URL_ENV, raising=False)
    assert (
        mistral.callback_url(ctx(), "http://m:8989")
        == "http://m:8989/v2/action_executions/a1"
    )
    monkeypatch.setenv(mistral.MISTRAL_URL_ENV, "http://env:1/v2")
    assert mistral.callback_url(ctx()) == "http://env:1/v2/action_executions/a1"
    absolute = "http://elsewhere/v2/action_executions/a1"
    assert mistral.callback_url(ctx(callback=absolute)) == absolute
    # no callback path: Mistral's own, from the action execution's id
    assert mistral.callback_url(ctx(callback=None)).endswith("/v2/action_executions/a1")


def test_the_callers_region_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(mistral.MISTRAL_URL_ENV, raising=False)
    entries = catalog("http://r1/v2", "R1") + catalog("http://r2/v2", "R2")
    assert mistral.mistral_endpoint(ctx(catalog=entries, region="R2").security) == (
        "http://r2/v2"
    )


def test_nowhere_to_report_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(mistral.MISTRAL_URL_ENV, raising=False)
    with pytest.raises(exceptions.ValidationError) as raised:
        mistral.callback_url(ctx(catalog=[]))
    assert raised.value.field == "callback_base_url"


class Flaky(http.server.BaseHTTPRequestHandler):
    """Answers 503 to the first PUT, then 204; records what it got."""

    seen: list[dict[str, Any]]

    def do_PUT(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.seen.append(
            {
                "token": self.headers.get("X-Auth-Token"),
                "body": json.loads(self.rfile.read(length)),
            }
        )
        self.send_response(503 if len(self.seen) == 1 else 204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def flaky() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    handler = type("Handler", (Flaky,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v2/action_executions/a1", seen
    server.shutdown()
    server.server_close()


def test_a_result_put_is_retried_past_a_5xx(
    flaky: tuple[str, list[dict[str, Any]]],
) -> None:
    url, seen = flaky
    body = callbacks.body(callbacks.ERROR, {"kind": "timeout"})
    assert put_result(url, body, "tok") == 204
    assert len(seen) == 2
    assert seen[1] == {
        "token": "tok",
        "body": {"state": "ERROR", "output": {"kind": "timeout"}},
    }


def test_config_files_only_from_the_allowed_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    monkeypatch.setenv(mistral.CONFIG_DIRS_ENV, str(allowed))
    monkeypatch.delenv(mistral.CONFIG_FILE_ENV, raising=False)
    inside = allowed / "a.conf"
    assert mistral_instances._config_path(str(inside)) == str(inside.resolve())
    for outside in (
        str(tmp_path / "b.conf"),
        f"{allowed}/../b.conf",
        str(allowed / "sub" / "c.conf"),
    ):
        with pytest.raises(exceptions.ValidationError) as raised:
            mistral_instances._config_path(outside)
        assert raised.value.field == "config_file"
    link = allowed / "link.conf"
    link.symlink_to(tmp_path / "b.conf")
    with pytest.raises(exceptions.ValidationError):
        mistral_instances._config_path(
            str(link)
        )  # a link out is followed, then refused
    assert mistral_instances._config_path(None) is None


def test_the_default_file_and_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(mistral.CONFIG_DIRS_ENV, raising=False)
    default = tmp_path / "swflows.conf"
    monkeypatch.setenv(mistral.CONFIG_FILE_ENV, str(default))
    assert mistral_instances._config_path(None) == str(default.resolve())
    assert mistral_instances._config_path(str(tmp_path / "other.conf")) == str(
        (tmp_path / "other.conf").resolve()
    )


def test_wait_must_be_a_boolean() -> None:
    action = mistral.ShowAction("d1")
    assert action.is_sync()
    deploy = mistral.DeployAction("s1", "c1", wait="no")  # type: ignore[arg-type]
    result = deploy.run(ctx())
    assert isinstance(result, types.Result) and result.error["field"] == "wait"


@pytest.mark.parametrize(
    ("action", "field"),
    [
        (mistral.DeployAction("s1", ["c1"]), "config_id"),  # type: ignore[arg-type]
        (mistral.DeployAction("s1", "c1", input_values="a=1"), "input_values"),  # type: ignore[arg-type]
        (mistral.DeployAction("s1", "c1", timeout="ten"), "timeout"),  # type: ignore[arg-type]
        (mistral.DeployAction("s1", "c1", actions="CREATE"), "actions"),  # type: ignore[arg-type]
        (mistral.RedeployAction(["d1"]), "deployment_id"),  # type: ignore[arg-type]
        (mistral.TriggerAction("d1", 5), "action"),  # type: ignore[arg-type]
        (mistral.ShowAction(5), "deployment_id"),  # type: ignore[arg-type]
    ],
)
def test_an_input_of_the_wrong_type_is_invalid_input(
    action: mistral_actions._SwflowsAction, field: str
) -> None:
    """Refused before any swflows is opened, naming the input."""
    result = action.run(ctx())
    assert isinstance(result, types.Result)
    assert result.error["kind"] == "invalid_input"
    assert result.error["field"] == field


def test_an_action_travels_to_a_remote_executor() -> None:
    """Mistral serializes an action to send it to an executor: its inputs are
    plain JSON, and it comes back the same."""
    from mistral_lib import serialization

    serializer = serialization.get_polymorphic_serializer()
    action = mistral.DeployAction(
        "s1", "c1", input_values={"foo": [1, 2]}, wait=False, timeout=60
    )
    back = serializer.deserialize(serializer.serialize(action))
    assert isinstance(back, mistral.DeployAction)
    assert vars(back) == vars(action)
    assert back.is_sync() is False
    result = serializer.deserialize(
        serializer.serialize(types.Result(error={"kind": "timeout"}))
    )
    assert result.is_error() and result.error == {"kind": "timeout"}


def test_an_embedder_gives_its_own_instance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from swflows.fixture import LocalSwflows

    monkeypatch.delenv(mistral.CONFIG_FILE_ENV, raising=False)
    local = LocalSwflows(tmp_path, overrides={"runner": {"resume_on_start": False}})
    sw = local.sw
    try:
        mistral.use(sw)
        assert mistral.instance()[0] is sw
        shown = mistral.ShowAction("nowhere").run(ctx())
        assert shown.error["kind"] == "not_found"
        # given, it is used even where the environment names a file
        monkeypatch.setenv(mistral.CONFIG_FILE_ENV, str(tmp_path / "swflows.conf"))
        assert mistral.instance()[0] is sw
        monkeypatch.delenv(mistral.CONFIG_FILE_ENV)
        mistral.use(None)
        with pytest.raises(exceptions.ValidationError):
            mistral.instance()
    finally:
        mistral.use(None)
        local.close()
