"""Every error carries its key field, in its fields and in its message."""

from __future__ import annotations

import inspect

import pytest

from swflows import exceptions

#: class -> (an instance, the field that identifies what went wrong, its value)
SAMPLES: dict[type[exceptions.SwflowsError], tuple[exceptions.SwflowsError, str]] = {
    exceptions.SwflowsError: (exceptions.SwflowsError("boom"), "boom"),
    exceptions.ValidationError: (
        exceptions.ValidationError("input_values.port", "expected a Number"),
        "input_values.port",
    ),
    exceptions.SignalRejected: (
        exceptions.SignalRejected("signal", "payload is not JSON"),
        "signal",
    ),
    exceptions.NotFound: (exceptions.NotFound("id-1"), "id-1"),
    exceptions.ConfigNotFound: (exceptions.ConfigNotFound("cfg-1"), "cfg-1"),
    exceptions.DeploymentNotFound: (exceptions.DeploymentNotFound("dep-1"), "dep-1"),
    exceptions.ServerNotFound: (exceptions.ServerNotFound("srv-1"), "srv-1"),
    exceptions.FlowNotFound: (exceptions.FlowNotFound("flow-1"), "flow-1"),
    exceptions.GroupNotFound: (exceptions.GroupNotFound("web"), "web"),
    exceptions.GroupBusy: (exceptions.GroupBusy("web", "UPDATE"), "web"),
    exceptions.ConfigInUse: (exceptions.ConfigInUse("cfg-2", ["d2", "d1"]), "cfg-2"),
    exceptions.ServerInUse: (exceptions.ServerInUse("srv-2", ["d3"]), "srv-2"),
    exceptions.InvalidTransition: (
        exceptions.InvalidTransition("dep-2", "COMPLETE", "FAILED"),
        "dep-2",
    ),
    exceptions.ConcurrentUpdate: (
        exceptions.ConcurrentUpdate("server srv-2 metadata changed"),
        "srv-2",
    ),
    exceptions.NotSupported: (exceptions.NotSupported("CFN_SIGNAL"), "CFN_SIGNAL"),
    exceptions.TransportError: (
        exceptions.TransportError("TEMP_URL_SIGNAL", "container gone"),
        "TEMP_URL_SIGNAL",
    ),
    exceptions.CloudError: (
        exceptions.CloudError("swift", "HTTP 503", status=503, retryable=True),
        "swift",
    ),
    exceptions.FlowError: (exceptions.FlowError("flow-2", "cannot rebuild"), "flow-2"),
    exceptions.FlowLocked: (exceptions.FlowLocked("flow-3", "leased"), "flow-3"),
    exceptions.WaitTimeout: (exceptions.WaitTimeout("dep-3", 2.5), "dep-3"),
    exceptions.DeploymentExists: (
        exceptions.DeploymentExists("dep-4", "server srv-9, not srv-1"),
        "dep-4",
    ),
    exceptions.Forbidden: (
        exceptions.Forbidden("swflows:config:delete", "not allowed by policy"),
        "swflows:config:delete",
    ),
}


def _all_classes() -> list[type[exceptions.SwflowsError]]:
    return [
        cls
        for _, cls in inspect.getmembers(exceptions, inspect.isclass)
        if issubclass(cls, exceptions.SwflowsError)
    ]


@pytest.mark.parametrize("cls", _all_classes(), ids=lambda c: c.__name__)
def test_str_names_the_key_field(cls: type[exceptions.SwflowsError]) -> None:
    assert cls in SAMPLES, f"add a sample for {cls.__name__} to this test"
    error, key = SAMPLES[cls]
    assert type(error) is cls
    assert key in str(error)
    assert str(error) == error.message
    for value in error.fields.values():
        if isinstance(value, str) and value == key:
            break
    else:
        assert cls in (
            exceptions.SwflowsError,
            exceptions.ConcurrentUpdate,
            exceptions.NotSupported,
        ), f"{cls.__name__} keeps {key!r} in no field"


def test_validation_error_fields() -> None:
    err = exceptions.ValidationError("name", "must not be empty")
    assert str(err) == "name: must not be empty"
    assert (err.field, err.reason) == ("name", "must not be empty")
    assert isinstance(err, ValueError)
    assert isinstance(exceptions.SignalRejected("signal", "x"), ValueError)


def test_stdlib_bases() -> None:
    assert isinstance(exceptions.NotFound("x"), LookupError)
    assert isinstance(exceptions.DeploymentNotFound("x"), LookupError)
    assert isinstance(exceptions.NotSupported("x"), NotImplementedError)
    assert isinstance(exceptions.WaitTimeout("x", 1), TimeoutError)
    assert not isinstance(exceptions.ConfigInUse("c", []), LookupError)


def test_not_found_kinds() -> None:
    assert str(exceptions.ConfigNotFound("c1")) == "config c1 not found"
    assert str(exceptions.DeploymentNotFound("d1")) == "deployment d1 not found"
    assert exceptions.ServerNotFound("s1").ident == "s1"


def test_retryable() -> None:
    assert exceptions.ConcurrentUpdate("x").retryable
    assert exceptions.FlowLocked("f", "x").retryable
    assert not exceptions.FlowError("f", "x").retryable
    assert not exceptions.TransportError("T", "x").retryable
    assert exceptions.TransportError("T", "x", retryable=True).retryable
    err = exceptions.CloudError("nova", "x", status=500, retryable=True)
    assert err.retryable
    assert (err.service, err.status) == ("nova", 500)


def test_flow_error_without_id_keeps_the_message() -> None:
    assert str(exceptions.FlowError(None, "unknown flow 'x'")) == "unknown flow 'x'"
    assert str(exceptions.FlowError("f1", "flow f1 is gone")) == "flow f1 is gone"


def test_config_in_use_lists_deployments() -> None:
    err = exceptions.ConfigInUse("c", [f"d{i}" for i in range(9, 0, -1)])
    assert "d1, d2, d3, d4, d5)" in str(err)
    assert len(err.deployment_ids) == 9


def test_wait_timeout_message() -> None:
    assert (
        str(exceptions.WaitTimeout("d", 2.5))
        == "deployment d still running after 2.5 s"
    )
    queued = exceptions.WaitTimeout("d", 3, started=False)
    assert str(queued).startswith("deployment d not started after 3 s")
    assert (queued.deployment_id, queued.started) == ("d", False)
    assert exceptions.WaitTimeout("d", 1).started


def test_deployment_exists_is_bad_input_naming_the_deployment() -> None:
    err = exceptions.DeploymentExists("d", "server s2, not s1")
    assert isinstance(err, ValueError)
    assert (err.field, err.deployment_id) == ("deployment_id", "d")
    assert str(err) == "deployment_id: deployment d exists with server s2, not s1"
