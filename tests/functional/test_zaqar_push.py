"""ZAQAR_SIGNAL with push: Zaqar posts each signal to swflows' endpoint
through a subscription made with the queue, so the deployment completes
without a poll; a push lost on the way is caught by polling; the
subscription goes with the queue.

The dev cloud's Zaqar has no notifier in its pipeline (it never calls a
webhook), so these tests run a Zaqar of their own with notifications on
(:mod:`bench.pushzaqar`): the same code, Keystone and Redis.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from bench.push import authtoken, serving
from bench.pushzaqar import notifying_zaqar
from swflows import conf as sw_conf
from swflows import states
from swflows import transport_names as names
from swflows.agent import notify
from swflows.api import Swflows
from swflows.transports import impl_zaqar
from swflows.wsgi.signal import make_app
from tests.functional import flowkit
from tests.functional.test_flows import script_config
from tests.functional.test_runner import signal_inputs, until
from tests.functional.test_wsgi_signal import waiting_flows


def ended(sw: Swflows, deployment_id: str) -> bool:
    return sw.show(deployment_id).status != states.IN_PROGRESS


FINAL = {"deploy_status_code": 0, "deploy_stdout": "ok", "result": "r"}


@pytest.fixture(scope="module")
def zaqar_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with notifying_zaqar(tmp_path_factory.mktemp("zaqar")) as url:
        yield url


class Lossy:
    """The endpoint, losing the pushes of the deployments in ``drop``."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.drop: set[str] = set()
        self.dropped: list[str] = []
        self.pushed: list[str] = []

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO") or "")
        if path.startswith(impl_zaqar.PUSH_PATH):
            queue = path[len(impl_zaqar.PUSH_PATH) :].strip("/")
            self.pushed.append(queue)
            if any(d in queue for d in self.drop):
                self.dropped.append(queue)
                start_response("200 OK", [("Content-Type", "text/plain")])
                return [b""]
        return self.app(environ, start_response)


@pytest.fixture
def pushed(
    devcloud: dict[str, Any], zaqar_url: str, tmp_path: Path
) -> Iterator[tuple[Swflows, Lossy]]:
    """A Swflows whose ZAQAR_SIGNAL queues push to its endpoint, and the
    endpoint (able to lose pushes)."""
    path = tmp_path / "swflows.conf"
    path.touch(mode=0o600)
    path.write_text(
        flowkit.swflowsconf.conf_text(
            devcloud,
            database=f"sqlite:///{tmp_path / 'swflows.sqlite'}",
            extra={
                "messaging": [f"endpoint_override = {zaqar_url}"],
                "watcher": ["poll_interval = 3600", "poll_jitter = 0"],
            },
        )
    )
    sw = Swflows.from_conf(sw_conf.get_conf(config_files=[str(path)]))
    try:
        lossy = Lossy(make_app(sw, authtoken(devcloud)))
        with serving(lossy) as url:
            sw.conf.set_override("zaqar_push_url", url, "watcher")
            yield sw, lossy
    finally:
        sw.close()
        sw.store.close()


def waiting(sw: Swflows, count: int) -> list[str]:
    config = script_config(sw)
    made = [
        sw.deploy(
            str(uuid.uuid4()),
            config.id,
            signal_transport=names.ZAQAR_SIGNAL,
            timeout=300,
            wait=False,
        ).id
        for _ in range(count)
    ]
    for dep_id in made:
        until(functools.partial(waiting_flows, sw, dep_id), timeout=60)
    return made


def send(sw: Swflows, deployment_id: str, body: dict[str, Any]) -> None:
    """Post a signal to the deployment's queue as its agent does."""
    config_id = str(sw.show(deployment_id).config_id)
    target = notify.target_of(config_id, signal_inputs(sw, deployment_id))
    notify.ZaqarSignal(requests.Session()).send(target, json.dumps(body).encode())


def queue_of(sw: Swflows, deployment_id: str) -> str:
    return (
        f"{impl_zaqar.QUEUE_PREFIX}{deployment_id}-{sw.show(deployment_id).generation}"
    )


def test_a_pushed_signal_completes_its_deployment_without_a_poll(
    pushed: tuple[Swflows, Lossy],
) -> None:
    sw, lossy = pushed
    made = waiting(sw, 5)
    queues = {d: queue_of(sw, d) for d in made}
    messaging = sw.services.clients.messaging
    for queue in queues.values():
        assert len(messaging.subscriptions(queue)) == 1
    cycles = sw.runner.watcher.cycles
    delays = []
    for dep_id in made:
        sent = time.perf_counter()
        send(sw, dep_id, FINAL)
        until(functools.partial(ended, sw, dep_id), timeout=10)
        delays.append(time.perf_counter() - sent)
        done = sw.wait(dep_id, timeout=30)
        assert done.status == states.COMPLETE and done.output_values["result"] == "r"
    # woken, not polling: a look per push, and the one the last parks asked
    # for (within 0.1 s), which may come after the count began
    assert sw.runner.watcher.cycles - cycles <= len(made) + 1
    assert sorted(lossy.pushed) == sorted(queues.values())
    delays.sort()
    print(f"signal posted -> COMPLETE by push: p50 {delays[2] * 1000:.0f} ms")
    assert delays[2] < 2.0, delays
    for dep_id in made:
        sw.undeploy(dep_id)
    # the subscription went with the queue
    for queue in queues.values():
        assert messaging.subscriptions(queue) == []
    assert flowkit.leftovers(sw, *made) == {}


def test_a_lost_push_is_caught_by_polling(pushed: tuple[Swflows, Lossy]) -> None:
    sw, lossy = pushed
    (lost,) = waiting(sw, 1)
    lossy.drop.add(lost)
    send(sw, lost, FINAL)
    until(lambda: lossy.dropped, timeout=10, what="the push to be lost")
    # the endpoint never saw it: only a look at the queue can end the
    # deployment (the look its parking woke may come after the post, on a
    # loaded machine: that one catches it as well)
    assert lossy.dropped == [queue_of(sw, lost)]
    sw.conf.set_override("poll_interval", 0.2, "watcher")
    sw.runner.wake()
    done = sw.wait(lost, timeout=30)
    assert done.status == states.COMPLETE and done.output_values["result"] == "r"
    queue = queue_of(sw, lost)
    sw.undeploy(lost)
    assert sw.services.clients.messaging.subscriptions(queue) == []
    assert flowkit.leftovers(sw, lost) == {}


def test_a_push_needs_its_queue_token(pushed: tuple[Swflows, Lossy]) -> None:
    sw, _ = pushed
    (dep_id,) = waiting(sw, 1)
    queue = queue_of(sw, dep_id)
    url = f"{sw.conf.watcher.zaqar_push_url}{impl_zaqar.PUSH_PATH}{queue}"
    note = json.dumps({"body": FINAL, "queue_name": queue})
    header = impl_zaqar.PUSH_HEADER
    other = impl_zaqar.push_token(sw.services, f"{queue}x")
    for headers in ({}, {header: "nope"}, {header: other}):
        assert (
            requests.post(url, data=note, headers=headers, timeout=10).status_code
            == 401
        )
    assert sw.show(dep_id).status == states.IN_PROGRESS
    token = {header: impl_zaqar.push_token(sw.services, queue)}
    # another action's queue (an earlier generation) is not this one's
    stale = queue.rsplit("-", 1)[0] + "-999"
    answer = requests.post(
        url.replace(queue, stale),
        data=json.dumps({"body": FINAL, "queue_name": stale}),
        headers={header: impl_zaqar.push_token(sw.services, stale)},
        timeout=10,
    )
    assert answer.json()["accepted"] is False
    assert requests.post(url, data="x", headers=token, timeout=10).status_code == 400
    answer = requests.post(url, data=note, headers=token, timeout=10)
    assert answer.json() == {"deployment_id": dep_id, "accepted": True}
    assert sw.wait(dep_id, timeout=30).status == states.COMPLETE
    sw.undeploy(dep_id)
    assert flowkit.leftovers(sw, dep_id) == {}
