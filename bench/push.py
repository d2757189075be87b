"""Signals pushed to swflows' endpoint: ZAQAR_SIGNAL through a Zaqar
subscription, and HEAT_SIGNAL posted by the server's stack user.

Both run on an instance of their own (its own SQLite store), with the
signal endpoint (:mod:`swflows.wsgi.signal`) served on 127.0.0.1 and a
Zaqar that runs its notifier (:mod:`bench.pushzaqar`: the dev cloud's
does not).  The watcher polls as usual (``poll_interval``) beside the
push, as it would in production.
"""

from __future__ import annotations

import contextlib
import pathlib
import threading
import uuid
import wsgiref.simple_server
from collections.abc import Iterator, Sequence
from typing import Any

import requests
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from bench import cloud as bcloud
from bench import waiting
from bench.proxy import CountingProxy
from bench.pushzaqar import notifying_zaqar
from swflows import signals
from swflows import transport_names as names
from swflows.agent import notify
from swflows.api import Swflows
from swflows.transports import impl_zaqar
from swflows.wsgi.signal import make_app


class _Quiet(wsgiref.simple_server.WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


class _Threaded(wsgiref.simple_server.WSGIServer):
    daemon_threads = True

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._handle, args=(request, client_address), daemon=True
        )
        thread.start()

    def _handle(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        finally:
            self.shutdown_request(request)


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve a WSGI app on 127.0.0.1 (a thread per request); its URL."""
    server = wsgiref.simple_server.make_server(
        "127.0.0.1", 0, app, server_class=_Threaded, handler_class=_Quiet
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def authtoken(cloud: dict[str, Any]) -> dict[str, Any]:
    """auth_token's options: Keystone's admin validates the tokens."""
    ks = cloud["keystone"]
    admin = ks["admin"]
    return {
        "www_authenticate_uri": ks["auth_url"],
        "auth_type": "password",
        "auth_url": ks["auth_url"],
        "username": admin["username"],
        "password": admin["password"],
        "project_name": admin["project_name"],
        "user_domain_id": admin["user_domain_id"],
        "project_domain_id": admin["project_domain_id"],
    }


class EndpointSignal(notify.Notifier):
    """Posts a HEAT_SIGNAL to the endpoint as the agent does, with the stack
    user's token fetched beforehand (its time is Keystone's, not swflows')."""

    max_bytes = signals.AGENT_SIGNAL_BYTES

    def __init__(self, url: str) -> None:
        self.url = url
        self.session = requests.Session()
        self.tokens: dict[str, str] = {}

    def log_in(self, targets: Sequence[notify.Target]) -> None:
        for target in targets:
            inputs = target.inputs
            auth = v3.Password(
                auth_url=inputs["deploy_auth_url"],
                user_id=inputs["deploy_user_id"],
                password=inputs["deploy_password"],
                project_id=inputs["deploy_project_id"],
            )
            token = ks_session.Session(auth=auth).get_token()
            self.tokens[target.config_id] = str(token)

    def send(self, target: notify.Target, body: bytes) -> None:
        resp = self.session.post(
            f"{self.url}/v1/signal/{target.config_id}",
            data=body,
            headers={
                "X-Auth-Token": self.tokens[target.config_id],
                "Content-Type": "application/json",
            },
            timeout=30,
        )
        resp.raise_for_status()


def run(
    cloud: dict[str, Any],
    proxy: CountingProxy,
    workdir: pathlib.Path,
    sizes: waiting.Sizes,
    log: Any = print,
) -> dict[str, Any]:
    """ZAQAR_SIGNAL with push, and HEAT_SIGNAL through the endpoint."""
    container = f"bench-{uuid.uuid4().hex[:10]}"
    results: dict[str, Any] = {"poll_interval_s": sizes.poll_interval}
    made: list[str] = []
    with notifying_zaqar(workdir / "zaqar") as zaqar_url:
        conf_path = workdir / "push.conf"
        bcloud.write_private(
            conf_path,
            bcloud.conf_text(
                cloud,
                database=f"sqlite:///{workdir / 'push.sqlite'}",
                swift_url=proxy.url,
                container=container,
                zaqar_url=zaqar_url,
            ),
        )
        with bcloud.instance(
            conf_path,
            delivery_timeout=0,
            watcher__poll_interval=sizes.poll_interval,
            watcher__sweep_interval=3600.0,
        ) as sw:
            try:
                with serving(make_app(sw, authtoken(cloud))) as url:
                    sw.conf.set_override("zaqar_push_url", url, "watcher")
                    results.update(_measure(sw, url, sizes, made, log))
            finally:
                left = _clean(sw, made, container)
    if any(left.values()):
        raise RuntimeError(f"the bench left cloud resources behind: {left}")
    return results


def _measure(
    sw: Swflows, url: str, sizes: waiting.Sizes, made: list[str], log: Any
) -> dict[str, Any]:
    config = sw.create_config(
        "bench", "#!/bin/sh\necho ok\n", group="script", outputs=[{"name": "result"}]
    )
    population = waiting.Population(sw, config.id)
    out: dict[str, Any] = {}
    log(f"latency: {sizes.sample} ZAQAR_SIGNAL signals, pushed")
    zaqar_ids = population.grow(sizes.sample, names.ZAQAR_SIGNAL)
    made.extend(zaqar_ids)
    out[names.ZAQAR_SIGNAL] = waiting.latency(
        sw, zaqar_ids, notify.ZaqarSignal(requests.Session()), sizes.spacing
    )
    log(f"latency: {sizes.heat_sample} HEAT_SIGNAL signals, through the endpoint")
    heat_ids = population.grow(sizes.heat_sample, names.HEAT_SIGNAL)
    made.extend(heat_ids)
    sender = EndpointSignal(url)
    sender.log_in([waiting.signal_target(sw, d) for d in heat_ids])
    out[names.HEAT_SIGNAL] = waiting.latency(sw, heat_ids, sender, sizes.spacing)
    return out


def _clean(sw: Swflows, made: list[str], container: str) -> dict[str, Any]:
    """Undeploy what was made (stack users, queues and subscriptions go with
    it); what is left."""
    queues = []
    for dep_id in made:
        with contextlib.suppress(Exception):
            generation = sw.show(dep_id).generation
            queues.append(f"{impl_zaqar.QUEUE_PREFIX}{dep_id}-{generation}")
        with contextlib.suppress(Exception):
            sw.undeploy(dep_id)
    swift = sw.services.clients.object_store
    swift.delete_container(container, force=True)
    messaging = sw.services.clients.messaging
    existing = set(messaging.list_queues())
    users = sw.services.clients.stack_users
    return {
        "container": swift.container_exists(container),
        "queues": [q for q in queues if q in existing],
        "subscriptions": [s for q in queues for s in messaging.subscriptions(q)],
        "users": [u.name for u in users.list_users() if any(d in u.name for d in made)],
    }


__all__ = ["run"]
