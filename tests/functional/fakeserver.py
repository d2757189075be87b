"""A test "server": reads its metadata as an agent would and signals back.

It reaches swflows only over the wire: the metadata through the server's
config transport (a GET TempURL or a signed Zaqar URL), signals through the
``deploy_*`` inputs of each derived config (a PUT TempURL, a signed queue
URL, Zaqar as the stack user in credentials mode) or, for HEAT_SIGNAL,
through the embedder's API.  The outputs it sends come from a responder the
test gives it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any, Self

import requests
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from swflows import exceptions, metadata
from swflows.clients.messaging import Messaging, SignedUrlClient

Responder = Callable[[dict[str, Any]], dict[str, Any] | None]
#: consecutive failed polls after which the server gives up
MAX_FAILED_POLLS = 10


def _transient(exc: BaseException) -> bool:
    """A failure the next poll may not meet: a 5xx or a dropped connection."""
    if isinstance(exc, requests.HTTPError):
        return exc.response is not None and exc.response.status_code >= 500
    if isinstance(exc, requests.ConnectionError | requests.Timeout):
        return True
    return isinstance(exc, exceptions.CloudError) and exc.retryable


def ok_responder(item: dict[str, Any]) -> dict[str, Any]:
    """Every non-error output is ``out-<foo>``; exit 0."""
    values = {i["name"]: i.get("value") for i in item["inputs"]}
    outputs = {
        o["name"]: f"out-{values.get('foo', '')}"
        for o in item["outputs"]
        if not o.get("error_output")
    }
    return {
        **outputs,
        "deploy_stdout": f"ran {values.get('deploy_action')}",
        "deploy_stderr": "",
        "deploy_status_code": 0,
    }


class FakeServer:
    """Polls one server's metadata and answers each new derived config once."""

    def __init__(
        self,
        sw: Any,
        server_id: str,
        responder: Responder = ok_responder,
        interval: float = 0.2,
    ) -> None:
        self.sw = sw
        self.server_id = server_id
        self.responder = responder
        self.interval = interval
        self.handled: dict[str, dict[str, Any]] = {}
        self.errors: list[BaseException] = []
        #: failed polls that were tried again
        self.transient_errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        #: held while answering; :meth:`pause` takes it to stop answers
        self._answering = threading.Lock()
        self._paused = False

    def pause(self) -> None:
        """Answer nothing more until :meth:`resume`; an answer being sent
        is finished first, so none lands after this returns."""
        with self._answering:
            self._paused = True

    def resume(self) -> None:
        with self._answering:
            self._paused = False

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        if self.errors:
            raise self.errors[0]

    def read_metadata(self) -> dict[str, Any]:
        server = metadata.find_server(self.sw.services, self.server_id)
        if server is None or server.channel is None:
            return {}
        collect = server.channel.get("os-collect-config", {})
        if "request" in collect:
            resp = requests.get(collect["request"]["metadata_url"], timeout=10)
            resp.raise_for_status()
            return dict(resp.json())
        if "zaqar" in collect:
            client = SignedUrlClient(collect["zaqar"]["signed_url"])
            messages = client.list_messages()
            return dict(messages[-1].body) if messages else {}
        # POLL_SERVER_HEAT: the embedder serves it from the store
        return {"deployments": self.sw.server_metadata(self.server_id)}

    def _loop(self) -> None:
        failed_polls = 0
        while not self._stop.is_set():
            try:
                self.step()
                failed_polls = 0
            except Exception as exc:
                # as an agent does, a poll the cloud fails is tried again
                # (the dev cloud's Swift answers a rare GET with 503 under load)
                failed_polls += 1
                if not _transient(exc) or failed_polls >= MAX_FAILED_POLLS:
                    self.errors.append(exc)  # the first, for the test to see
                    return
                self.transient_errors.append(exc)
            self._stop.wait(self.interval)

    def step(self) -> None:
        for item in self.read_metadata().get("deployments", []):
            with self._answering:
                if self._paused or item["id"] in self.handled:
                    continue
                answer = self.responder(item)
                if answer is not None:
                    self.send(item, answer)
                # only once sent: a send that failed is made again next poll
                self.handled[item["id"]] = {"item": item, "answer": answer}

    def send(self, item: dict[str, Any], answer: dict[str, Any]) -> None:
        inputs = {i["name"]: i.get("value") for i in item["inputs"]}
        transport = inputs.get("deploy_signal_transport")
        body = json.dumps(answer)
        if transport == "TEMP_URL_SIGNAL":
            resp = requests.request(
                inputs.get("deploy_signal_verb", "POST"),
                inputs["deploy_signal_id"],
                data=body,
                headers={"content-type": "application/json"},
                timeout=10,
            )
            resp.raise_for_status()
        elif transport == "ZAQAR_SIGNAL":
            signed = inputs.get("deploy_queue_signed_url")
            if signed:
                if isinstance(signed, str):
                    signed = json.loads(signed)
                SignedUrlClient(signed).post(answer, ttl=600)
            else:  # credentials mode: as the stack user, Zaqar from its catalog
                self.as_stack_user(inputs).post(
                    inputs["deploy_queue_id"], answer, ttl=600
                )
        elif transport == "HEAT_SIGNAL":
            # as an embedder's API would answer 404, a deployment removed
            # meanwhile (a reverted flow) just drops the signal
            try:
                self.sw.signal(self._deployment_for(item["id"]), body)
            except LookupError:
                pass

    @staticmethod
    def as_stack_user(inputs: dict[str, Any]) -> Messaging:
        """Zaqar as the agent reaches it with Heat's ``deploy_*`` credentials."""
        auth = v3.Password(
            auth_url=inputs["deploy_auth_url"],
            user_id=inputs["deploy_user_id"],
            password=inputs["deploy_password"],
            project_id=inputs["deploy_project_id"],
        )
        return Messaging.from_session(ks_session.Session(auth=auth, timeout=30))

    def _deployment_for(self, config_id: str) -> str:
        for deployment in self.sw.list_deployments(server_id=self.server_id):
            if deployment.config_id == config_id:
                return str(deployment.id)
        raise LookupError(config_id)

    def wait_handled(self, count: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while len(self.handled) < count and time.monotonic() < deadline:
            time.sleep(0.05)
