"""The shared retry policy and error helpers of the cloud adapters."""

from __future__ import annotations

import pytest

from swflows.clients import base
from swflows.exceptions import CloudError

FAST = base.RetryPolicy(attempts=3, initial=0.001, maximum=0.001)


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (500, True),
        (503, True),
        (408, True),
        (429, True),
        (404, False),
        (409, False),
        (401, False),
        (None, False),
    ],
)
def test_retryable_statuses(status: int | None, retryable: bool) -> None:
    assert base.is_retryable_status(status) is retryable
    assert base.http_error("identity", "x", status).retryable is retryable


def test_http_error_shape() -> None:
    err = base.http_error("object-store", "read object c/o", 503, "Service Unavailable")
    assert (
        str(err)
        == "object-store: read object c/o failed: HTTP 503: Service Unavailable"
    )
    assert (err.service, err.status, err.retryable) == ("object-store", 503, True)


def test_unreachable_keeps_only_the_class_name() -> None:
    exc = ConnectionError("http://h/v1/AUTH_x/c/o?temp_url_sig=deadbeef refused")
    err = base.unreachable("object-store", "read", exc)
    assert "deadbeef" not in str(err)
    assert err.retryable and err.status is None


def test_redact() -> None:
    assert (
        base.redact("pw hunter2 and hunter2", ["hunter2", "", None]) == "pw *** and ***"
    )


class Flaky:
    retry_policy = FAST

    def __init__(self, errors: list[Exception]) -> None:
        self.errors = errors
        self.calls = 0

    @base.retried
    def run(self, value: int) -> int:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return value * 2


def test_retries_retryable_errors_then_succeeds() -> None:
    flaky = Flaky([CloudError("s", "boom", status=503, retryable=True)] * 2)
    assert flaky.run(21) == 42
    assert flaky.calls == 3


def test_gives_up_after_the_attempts_with_the_last_error() -> None:
    flaky = Flaky([CloudError("s", f"boom {i}", retryable=True) for i in range(5)])
    with pytest.raises(CloudError, match="boom 2"):
        flaky.run(1)
    assert flaky.calls == 3


@pytest.mark.parametrize(
    "error", [CloudError("s", "no", status=404), ValueError("bad"), KeyError("k")]
)
def test_never_retries_other_errors(error: Exception) -> None:
    flaky = Flaky([error])
    with pytest.raises(type(error)):
        flaky.run(1)
    assert flaky.calls == 1


def test_no_retry_policy_tries_once() -> None:
    calls = []

    def fail() -> None:
        calls.append(1)
        raise CloudError("s", "down", retryable=True)

    with pytest.raises(CloudError):
        base.NO_RETRY.call(fail)
    assert len(calls) == 1


def test_keystone_refusals_are_identity_errors_not_missing_objects() -> None:
    from keystoneauth1 import exceptions as ksa_exc

    err = base.ksa_error("compute", "show server s1", ksa_exc.NotFound())
    assert (err.service, err.status, err.retryable) == ("identity", 404, False)
    assert not base.is_missing(err, "compute")
    assert base.is_missing(base.http_error("compute", "show", 404), "compute")


def test_keystoneauth_connection_failures_are_retryable() -> None:
    from keystoneauth1 import exceptions as ksa_exc

    err = base.ksa_error("object-store", "list", ksa_exc.ConnectFailure("refused"))
    assert (err.service, err.retryable) == ("object-store", True)
