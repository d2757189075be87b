"""The HEAT_SIGNAL endpoint behind keystonemiddleware, served by wsgiref,
against the dev cloud's Keystone: the stack user's token is accepted, any
other user's refused, and no secret reaches the logs."""

from __future__ import annotations

import functools
import json
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from bench.push import authtoken, serving
from swflows import states
from swflows.agent import notify
from swflows.api import Swflows
from swflows.persistence.flow_registry import FlowRow
from swflows.wsgi.signal import make_app
from tests.functional import conftest, flowkit
from tests.functional.test_flows import script_config
from tests.functional.test_runner import signal_inputs, until

sw = flowkit.sw


@pytest.fixture
def endpoint(sw: Swflows, devcloud: dict[str, Any]) -> Iterator[str]:
    with serving(make_app(sw, authtoken(devcloud))) as url:
        yield url


def stack_user_token(inputs: dict[str, Any]) -> str:
    """The token a server gets with its deployment's ``deploy_*`` inputs."""
    session = ks_session.Session(
        auth=v3.Password(
            auth_url=inputs["deploy_auth_url"],
            user_id=inputs["deploy_user_id"],
            password=inputs["deploy_password"],
            project_id=inputs["deploy_project_id"],
        )
    )
    return str(session.get_token())


def waiting(sw: Swflows) -> tuple[str, dict[str, Any]]:
    """A HEAT_SIGNAL deployment waiting for its signal, and its inputs."""
    dep = sw.deploy(
        str(uuid.uuid4()),
        script_config(sw).id,
        signal_transport="HEAT_SIGNAL",
        timeout=120,
        wait=False,
    )
    return dep.id, signal_inputs(sw, dep.id)


def waiting_flows(sw: Swflows, deployment_id: str) -> list[FlowRow]:
    """The deployment's flows parked at their wait."""
    return [
        r for r in sw.runner.registry.find(deployment_id=deployment_id) if r.waiting
    ]


def post(url: str, token: str | None, body: Any) -> requests.Response:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["X-Auth-Token"] = token
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return requests.post(url, data=data, headers=headers, timeout=30)


def test_the_stack_user_signals_and_others_are_refused(
    sw: Swflows,
    devcloud: dict[str, Any],
    endpoint: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    first, first_inputs = waiting(sw)
    second, second_inputs = waiting(sw)
    url = f"{endpoint}/v1/deployments/{first}/signal"
    final = {"deploy_status_code": 0, "deploy_stdout": "ok", "result": "r"}
    owner = stack_user_token(first_inputs)
    other_stack_user = stack_user_token(second_inputs)
    demo = str(conftest.keystone_session(devcloud, "demo").get_token())

    assert post(url, None, final).status_code == 401
    assert post(url, "not-a-token", final).status_code == 401
    for token in (demo, other_stack_user):
        refused = post(url, token, final)
        assert refused.status_code == 403, refused.text
        assert sw.show(first).status == states.IN_PROGRESS
    missing = post(f"{endpoint}/v1/deployments/{uuid.uuid4()}/signal", owner, final)
    assert missing.status_code == 404
    assert post(url, owner, b"x" * (sw.conf.max_signal_bytes + 1)).status_code == 413
    assert (
        requests.get(url, headers={"X-Auth-Token": owner}, timeout=30).status_code
        == 405
    )

    accepted = post(url, owner, final)
    assert accepted.status_code == 200, accepted.text
    assert accepted.json() == {"deployment_id": first, "accepted": True}
    done = sw.wait(first, timeout=60)
    assert done.status == states.COMPLETE and done.output_values["result"] == "r"
    late = post(url, owner, {"deploy_status_code": 1})
    assert late.json() == {"deployment_id": first, "accepted": False}
    assert sw.show(first).status == states.COMPLETE

    # an unusable signal is a result: the deployment ends FAILED
    unusable = post(
        f"{endpoint}/v1/deployments/{second}/signal", other_stack_user, b"[1]"
    )
    assert unusable.json() == {"deployment_id": second, "accepted": True}
    ended = sw.wait(second, timeout=60)
    assert ended.status == states.FAILED
    assert ended.reason is not None and ended.reason["kind"] == "signal_rejected"
    for deployment_id in (first, second):
        sw.undeploy(deployment_id)
    assert flowkit.leftovers(sw, first, second) == {}  # stack users included
    secrets = [
        owner,
        other_stack_user,
        demo,
        first_inputs["deploy_password"],
        second_inputs["deploy_password"],
        devcloud["keystone"]["admin"]["password"],
    ]
    logged = caplog.text
    assert "signal for deployment" in logged  # the app did log
    for secret in secrets:
        assert secret not in logged


def test_the_swflows_agent_signals_through_heat_signal_url(
    sw: Swflows, endpoint: str
) -> None:
    deployment_id, inputs = waiting(sw)
    config_id = sw.show(deployment_id).config_id
    assert config_id is not None
    notifier = notify.HeatSignal(
        requests.Session(), 30, f"{endpoint}/v1/signal/{{config_id}}"
    )
    body = json.dumps({"deploy_status_code": 0, "result": "from the agent"})
    notifier.send(notify.target_of(config_id, inputs), body.encode())
    done = sw.wait(deployment_id, timeout=60)
    assert done.status == states.COMPLETE
    assert done.output_values["result"] == "from the agent"
    sw.undeploy(deployment_id)
    assert flowkit.leftovers(sw, deployment_id) == {}


def test_a_signal_through_the_endpoint_resumes_its_flow_without_a_poll(
    sw: Swflows, endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flow goes on from the request itself: the watcher, which would
    otherwise resume it at its next look, looks no more here."""
    made = [waiting(sw) for _ in range(5)]
    flows = {}
    for deployment_id, _ in made:
        until(functools.partial(waiting_flows, sw, deployment_id), timeout=60)
        (row,) = sw.runner.registry.find(deployment_id=deployment_id)
        flows[deployment_id] = row.id
    monkeypatch.setattr(sw.runner.watcher, "cycle", lambda only=None: [])
    final = {"deploy_status_code": 0, "result": "r"}
    delays = []
    for deployment_id, inputs in made:
        url = f"{endpoint}/v1/deployments/{deployment_id}/signal"
        token = stack_user_token(inputs)
        sent = time.perf_counter()
        assert post(url, token, final).json()["accepted"] is True
        sw.runner.wait(flows[deployment_id], timeout=10)
        delays.append(time.perf_counter() - sent)
        assert sw.show(deployment_id).status == states.COMPLETE
    delays.sort()
    print(f"signal posted -> flow ended: p50 {delays[2] * 1000:.0f} ms")
    assert delays[2] < 1.0, delays
    for deployment_id, _ in made:
        sw.undeploy(deployment_id)
    assert flowkit.leftovers(sw, *flows) == {}
