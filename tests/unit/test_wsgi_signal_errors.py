"""The signal application never answers a bare 500: an unexpected error is a
JSON answer naming the error's class, an outage a 503 to try again."""

from __future__ import annotations

import logging
import uuid

import pytest
import sqlalchemy as sa

from swflows.api import Swflows
from swflows.wsgi.signal import SignalApp
from tests.unit.test_wsgi_signal import call, sw

__all__ = ["sw"]


@pytest.fixture
def signalled(sw: Swflows, monkeypatch: pytest.MonkeyPatch) -> str:
    """A deployment whose stack user is ``u1`` (``call``'s user)."""
    deployment_id = str(uuid.uuid4())
    monkeypatch.setattr(
        SignalApp, "_find", lambda self, kind, ident: (deployment_id, "u1")
    )
    return f"/v1/deployments/{deployment_id}/signal"


def failing(exc: BaseException) -> object:
    def signal(*args: object, **kwargs: object) -> bool:
        raise exc

    return signal


def test_an_unexpected_error_is_a_json_500_naming_it(
    sw: Swflows,
    signalled: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setattr(sw, "signal", failing(KeyError("secret-in-message")))
    response = call(SignalApp(sw), signalled)
    assert response.status_int == 500
    assert response.json == {
        "error": "the signal was not recorded: internal error KeyError"
    }
    assert "secret-in-message" not in response.text
    assert "KeyError" in caplog.text


def test_a_database_outage_is_a_503(
    sw: Swflows, signalled: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    down = sa.exc.OperationalError("SELECT 1", {}, Exception("connection refused"))
    monkeypatch.setattr(sw, "signal", failing(down))
    response = call(SignalApp(sw), signalled)
    assert response.status_int == 503
    assert "OperationalError" in response.json["error"]
    assert "try again" in response.json["error"]


def test_an_error_outside_the_handler_is_json_too(
    sw: Swflows, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: SignalApp, request: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(SignalApp, "handle", broken)
    response = call(SignalApp(sw), "/v1/signal/x")
    assert response.status_int == 500
    assert response.json["error"].endswith("RuntimeError")
