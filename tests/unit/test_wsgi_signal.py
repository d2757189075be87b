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
from swflows.transports import impl_zaqar
from swflows.wsgi.signal import PushApp, SignalApp


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


def push(
    app: PushApp, path: str, token: str | None, body: object, method: str = "POST"
) -> webob.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = webob.Request.blank(path, method=method, body=data)
    if token is not None:
        request.headers[impl_zaqar.PUSH_HEADER] = token
    return request.get_response(app)


def test_a_push_is_authenticated_by_its_queue_token(sw: Swflows) -> None:
    app = PushApp(sw)
    queue = f"sws-{uuid.uuid4()}-1"
    token = impl_zaqar.push_token(sw.services, queue)
    assert token != impl_zaqar.push_token(sw.services, f"{queue}0")
    note = {"body": {"deploy_status_code": 0}, "queue_name": queue}
    path = f"/v1/push/{queue}"
    assert push(app, path, None, note).status_int == 401
    assert push(app, path, "0" * len(token), note).status_int == 401
    assert push(app, path, token, note, method="GET").status_int == 405
    assert push(app, "/v1/push/", token, note).status_int == 404
    assert push(app, path, token, b"not json").status_int == 400
    other = {**note, "queue_name": "sws-other-1"}
    assert push(app, path, token, other).status_int == 400
    # a well-formed push for a deployment this store does not hold
    assert push(app, path, token, note).status_int == 404
    odd = "not-a-signal-queue"
    odd_token = impl_zaqar.push_token(sw.services, odd)
    assert push(app, f"/v1/push/{odd}", odd_token, note).status_int == 404


def test_a_push_nested_too_deeply_is_refused(sw: Swflows) -> None:
    """One the parser reads goes on as a signal (refused as any malformed
    one: ``signal_rejected``; here no deployment holds the queue: 404);
    one it cannot read is no notification (400); never a 500."""
    app = PushApp(sw)
    queue = f"sws-{uuid.uuid4()}-1"
    token = impl_zaqar.push_token(sw.services, queue)
    path = f"/v1/push/{queue}"
    for depth, status in ((900, 404), (5000, 400)):
        nested = b"[" * depth + b"]" * depth
        for inner in (b'{"a": ' + nested + b"}", nested):
            body = b'{"queue_name": "%s", "body": %s}' % (queue.encode(), inner)
            response = push(app, path, token, body)
            assert response.status_int == status, response.text
