"""The signal application's answers that need no Keystone: routes, methods,
who may signal (the identity headers auth_token would set)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import webob

from swflows import Swflows, exceptions
from swflows.fixture import LocalSwflows
from swflows.wsgi.signal import SignalApp


@pytest.fixture
def sw(tmp_path: Path) -> Iterator[Swflows]:
    overrides = {
        "runner": {"resume_on_start": False},
        "default_software_config_transport": "POLL_SERVER_HEAT",
    }
    with LocalSwflows(tmp_path, overrides=overrides) as local:
        yield local.sw


def call(
    app: SignalApp, path: str, method: str = "POST", user: str | None = "u1"
) -> webob.Response:
    request = webob.Request.blank(path, method=method, body=b"{}")
    if user is not None:
        request.headers["X-Identity-Status"] = "Confirmed"
        request.headers["X-User-Id"] = user
    response = request.get_response(app)
    assert response.content_type == "application/json"
    json.loads(response.body)
    return response


def test_answers(sw: Swflows) -> None:
    app = SignalApp(sw)
    dep = sw.deploy(
        str(uuid.uuid4()),
        sw.create_config("c", "#!/bin/sh\n", group="script").id,
        signal_transport="NO_SIGNAL",
    )
    url = f"/v1/deployments/{dep.id}/signal"
    assert call(app, "/v1/elsewhere").status_int == 404
    assert call(app, url, method="GET").status_int == 405
    assert call(app, url, user=None).status_int == 401
    assert call(app, f"/v1/deployments/{uuid.uuid4()}/signal").status_int == 404
    assert call(app, f"/v1/signal/{uuid.uuid4()}").status_int == 404
    # a NO_SIGNAL deployment has no stack user: nobody may signal it
    assert call(app, url).status_int == 403
    assert call(app, f"/v1/signal/{dep.config_id}").status_int == 403
    sw.undeploy(dep.id)


def test_a_store_that_fails_finding_the_deployment_is_a_json_answer(
    sw: Swflows, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(*args: object, **kwargs: object) -> None:
        raise exceptions.CloudError("database", "down for the test", retryable=True)

    monkeypatch.setattr(sw, "show", down)
    monkeypatch.setattr(sw, "get_config", down)
    app = SignalApp(sw)
    for path in (
        f"/v1/deployments/{uuid.uuid4()}/signal",
        f"/v1/signal/{uuid.uuid4()}",
    ):
        response = call(app, path)
        assert response.status_int == 503
        assert "down for the test" not in response.text
