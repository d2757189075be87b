"""Notifiers: sending a signal where a derived config's ``deploy_*`` inputs say.

By ``deploy_signal_transport`` (or, for configs without it, by which inputs
are present, as Heat's ``heat-config-notify`` decides):

* ``TEMP_URL_SIGNAL`` and ``CFN_SIGNAL``: an HTTP ``deploy_signal_verb``
  (default POST) of the JSON to ``deploy_signal_id``;
* ``ZAQAR_SIGNAL``: a message on ``deploy_queue_id``, with the signed URL
  ``deploy_queue_signed_url`` or as the Keystone user of the
  ``deploy_auth_url``/``deploy_user_id``/... inputs;
* ``HEAT_SIGNAL``: as that user, to Heat's resource-signal API when the
  config names a stack and resource, else to ``heat_signal_url``, the
  embedder's endpoint;
* ``NO_SIGNAL``: nothing.

Every transport retries 5xx answers and dropped connections with backoff
(Heat's agent retries only the HTTP one), and every signal is trimmed to
what its transport accepts: stdout and stderr lose their beginnings first.
Notifiers are pluggable: give :class:`Notifiers` your own, or register one
under the ``swflows.agent_notifiers`` entry points (name = transport).
"""

from __future__ import annotations

import abc
import dataclasses
import importlib.metadata
import json
import logging
import threading
import urllib.parse
import uuid
from collections.abc import Mapping
from typing import Any, Final

import requests

from swflows import derive, exceptions, model, signals
from swflows import transport_names as names
from swflows.agent import collectors, http

LOG = logging.getLogger(__name__)

ENTRY_POINTS: Final = "swflows.agent_notifiers"
#: Zaqar's default ``max_messages_post_size`` (256 KiB) less its envelope
ZAQAR_SIGNAL_BYTES: Final = 256 * 1024 - 1024
#: the TTL of a signal message, as Heat's agent posts it
ZAQAR_SIGNAL_TTL: Final = 600


@dataclasses.dataclass(frozen=True)
class Target:
    """Where one derived config's signals go."""

    config_id: str
    transport: str
    inputs: Mapping[str, Any]

    def __repr__(self) -> str:
        return f"Target({self.config_id!r}, {self.transport})"


def target_of(config_id: str, inputs: Mapping[str, Any]) -> Target:
    """The target named by ``inputs``; ValidationError for an unknown transport."""
    named = inputs.get(derive.DEPLOY_SIGNAL_TRANSPORT)
    if named is not None:
        if not isinstance(named, str):
            raise exceptions.ValidationError(
                derive.DEPLOY_SIGNAL_TRANSPORT, "must be a string"
            )
        transport = names.normalize_signal_transport(named)
    elif inputs.get(derive.DEPLOY_SIGNAL_ID):
        verb = str(inputs.get(derive.DEPLOY_SIGNAL_VERB) or "POST").upper()
        transport = names.TEMP_URL_SIGNAL if verb == "PUT" else names.CFN_SIGNAL
    elif inputs.get(derive.DEPLOY_QUEUE_ID):
        transport = names.ZAQAR_SIGNAL
    elif inputs.get(derive.DEPLOY_AUTH_URL):
        transport = names.HEAT_SIGNAL
    else:
        transport = names.NO_SIGNAL
    return Target(config_id, transport, dict(inputs))


def wants_started(inputs: Mapping[str, Any]) -> bool:
    """Whether the config asks for a "started" progress signal."""
    value = inputs.get(derive.DEPLOY_SIGNAL_STARTED)
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1", "on")
    return value is True


def prepare(payload: Mapping[str, Any], limit: int) -> bytes:
    """The bytes of ``payload`` trimmed to ``limit`` (stdout/stderr first)."""
    try:
        return signals.encode_payload(signals.trim_payload(payload, limit))
    except ValueError:
        code = payload.get(model.DEPLOY_STATUS_CODE)
        return signals.encode_payload(
            {
                model.DEPLOY_STDOUT: "",
                model.DEPLOY_STDERR: "swflows-agent: the signal could not be "
                f"made to fit in {limit} bytes\n",
                model.DEPLOY_STATUS_CODE: code if code is not None else 1,
            }
        )


class Notifier(abc.ABC):
    """Sends one signal body to one target, once (retries are the caller's)."""

    #: the largest body this notifier can deliver
    max_bytes: int = signals.AGENT_SIGNAL_BYTES

    @abc.abstractmethod
    def send(self, target: Target, body: bytes) -> None:
        """Deliver ``body`` (JSON); CloudError, ``retryable`` when worth it."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class HttpSignal(Notifier):
    """TEMP_URL_SIGNAL and CFN_SIGNAL: one request to a pre-signed URL."""

    def __init__(self, session: requests.Session, timeout: float = 10.0) -> None:
        self.session = session
        self.timeout = timeout

    def send(self, target: Target, body: bytes) -> None:
        url = target.inputs.get(derive.DEPLOY_SIGNAL_ID)
        if not isinstance(url, str) or not url:
            raise exceptions.ValidationError(
                derive.DEPLOY_SIGNAL_ID, f"missing for {target.transport}"
            )
        verb = str(target.inputs.get(derive.DEPLOY_SIGNAL_VERB) or "POST").upper()
        if verb not in ("PUT", "POST"):
            raise exceptions.ValidationError(
                derive.DEPLOY_SIGNAL_VERB, f"must be PUT or POST, not {verb[:20]}"
            )
        http.request(
            self.session,
            verb,
            url,
            service="signal",
            what=f"signal {target.config_id}",
            data=body,
            headers={"Content-Type": "application/json"},
            timeout=self.timeout,
        )


class _Authenticated(Notifier):
    """A notifier that logs in as the config's stack user when it must."""

    def __init__(self, session: requests.Session, timeout: float = 10.0) -> None:
        self.session = session
        self.timeout = timeout
        self._logins: dict[tuple[str, str, str], http.Keystone] = {}
        self._lock = threading.Lock()

    def keystone(self, inputs: Mapping[str, Any]) -> http.Keystone:
        made = http.Keystone.from_inputs(self.session, inputs, self.timeout)
        with self._lock:
            kept = self._logins.get(made.key)
            if kept is None or kept.password != made.password:
                if len(self._logins) > 64:
                    self._logins.clear()
                self._logins[made.key] = kept = made
            return kept

    def post_with_token(
        self, keystone: http.Keystone, url: str, body: bytes, what: str, **extra: Any
    ) -> None:
        def post() -> None:
            headers = {
                "Content-Type": "application/json",
                "X-Auth-Token": keystone.token(),
                **extra,
            }
            http.request(
                self.session,
                "POST",
                url,
                service=self.service,
                what=what,
                data=body,
                headers=headers,
                timeout=self.timeout,
            )

        http.with_fresh_token(keystone, post)

    service = "signal"


class ZaqarSignal(_Authenticated):
    """ZAQAR_SIGNAL: a message posted to the config's queue."""

    service = "zaqar"

    def __init__(
        self,
        session: requests.Session,
        timeout: float = 10.0,
        max_bytes: int = ZAQAR_SIGNAL_BYTES,
    ) -> None:
        super().__init__(session, timeout)
        self.max_bytes = max_bytes
        self.client_id = str(uuid.uuid4())

    def send(self, target: Target, body: bytes) -> None:
        envelope = (
            b'{"messages": [{"body": ' + body + b', "ttl": %d}]}' % ZAQAR_SIGNAL_TTL
        )
        what = f"signal {target.config_id}"
        signed = target.inputs.get(derive.DEPLOY_QUEUE_SIGNED_URL)
        if signed:
            signed = collectors.signed_url_value(signed)
            url = str(signed["url"]).rstrip("/") + collectors.messages_path(signed)
            headers = {
                "Content-Type": "application/json",
                "Client-ID": self.client_id,
                **collectors.signed_headers(signed),
            }
            http.request(
                self.session,
                "POST",
                url,
                service=self.service,
                what=what,
                data=envelope,
                headers=headers,
                timeout=self.timeout,
            )
            return
        queue = target.inputs.get(derive.DEPLOY_QUEUE_ID)
        if not isinstance(queue, str) or not queue:
            raise exceptions.ValidationError(derive.DEPLOY_QUEUE_ID, "missing")
        keystone = self.keystone(target.inputs)
        root = collectors.api_root(keystone.endpoint("messaging"))
        url = f"{root}{collectors.ZAQAR_API}/queues/{_quote(queue)}/messages"
        self.post_with_token(
            keystone, url, envelope, what, **{"Client-ID": self.client_id}
        )


class HeatSignal(_Authenticated):
    """HEAT_SIGNAL: a POST as the config's stack user.

    To Heat's ``/stacks/<stack>/resources/<resource>/signal`` (from the
    catalog's orchestration endpoint) when the config has
    ``deploy_stack_id`` and ``deploy_resource_name``, as Heat's agent does;
    else to ``url``, a template that may use ``{config_id}``,
    ``{server_id}`` and ``{action}``: the endpoint of an embedder that
    receives signals and calls ``Swflows.signal()``.
    """

    def __init__(
        self, session: requests.Session, timeout: float = 10.0, url: str | None = None
    ) -> None:
        super().__init__(session, timeout)
        self.url = url

    def send(self, target: Target, body: bytes) -> None:
        inputs = target.inputs
        keystone = self.keystone(inputs)
        stack = inputs.get(derive.DEPLOY_STACK_ID)
        resource = inputs.get(derive.DEPLOY_RESOURCE_NAME)
        if self.url:
            url = self.url.format(
                config_id=_quote(target.config_id),
                server_id=_quote(str(inputs.get(derive.DEPLOY_SERVER_ID) or "")),
                action=_quote(str(inputs.get(derive.DEPLOY_ACTION) or "")),
            )
        elif (
            isinstance(stack, str) and stack and isinstance(resource, str) and resource
        ):
            base = keystone.endpoint("orchestration")
            stack_path = "/".join(_quote(part) for part in stack.split("/"))
            url = f"{base}/stacks/{stack_path}/resources/{_quote(resource)}/signal"
        else:
            # a configuration problem of this agent: retried, so that fixing
            # the configuration and restarting the agent delivers it
            raise exceptions.CloudError(
                "signal",
                f"signal {target.config_id}: HEAT_SIGNAL needs heat_signal_url "
                "in the agent's configuration (the config names no stack)",
                retryable=True,
            )
        self.post_with_token(keystone, url, body, f"signal {target.config_id}")


class Notifiers:
    """The notifier of each transport, built-in or plugged in."""

    def __init__(
        self,
        notifiers: Mapping[str, Notifier | None] | None = None,
        *,
        session: requests.Session | None = None,
        timeout: float = 10.0,
        heat_signal_url: str | None = None,
        zaqar_signal_bytes: int = ZAQAR_SIGNAL_BYTES,
        entry_points: bool = True,
    ) -> None:
        session = session or requests.Session()
        http_signal = HttpSignal(session, timeout)
        self.builtin: dict[str, Notifier | None] = {
            names.TEMP_URL_SIGNAL: http_signal,
            names.CFN_SIGNAL: http_signal,
            names.ZAQAR_SIGNAL: ZaqarSignal(session, timeout, zaqar_signal_bytes),
            names.HEAT_SIGNAL: HeatSignal(session, timeout, heat_signal_url),
            names.NO_SIGNAL: None,
        }
        self.given = dict(notifiers or {})
        self._entry_points = entry_points
        self._loaded: dict[str, Notifier | None] = {}

    def __repr__(self) -> str:
        return f"Notifiers(given={sorted(self.given)})"

    def find(self, transport: str) -> Notifier | None:
        """The notifier for ``transport``; None when nothing is to be sent."""
        if transport in self.given:
            return self.given[transport]
        plugin = self._plugin(transport)
        if plugin is not None:
            return plugin
        if transport in self.builtin:
            return self.builtin[transport]
        raise exceptions.NotSupported(f"no notifier for signal transport {transport}")

    def deliver(
        self,
        target: Target,
        payload: Mapping[str, Any],
        *,
        attempts: int,
        backoff: float,
        stop: threading.Event | None = None,
    ) -> bool:
        """Send ``payload`` to ``target`` with retries; False if nothing to send."""
        notifier = self.find(target.transport)
        if notifier is None:
            return False
        body = prepare(payload, notifier.max_bytes)
        for attempt in http.retrying(attempts, backoff, stop=stop):
            with attempt:
                notifier.send(target, body)
        return True

    def _plugin(self, transport: str) -> Notifier | None:
        if not self._entry_points:
            return None
        if transport not in self._loaded:
            found: Notifier | None = None
            for ep in importlib.metadata.entry_points(group=ENTRY_POINTS):
                if ep.name == transport:
                    obj = ep.load()
                    found = obj() if isinstance(obj, type) else obj
                    if not isinstance(found, Notifier):
                        raise TypeError(
                            f"entry point {ep.name} = {ep.value} is not a Notifier"
                        )
                    break
            self._loaded[transport] = found
        return self._loaded[transport]


def _quote(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def describe(payload: Mapping[str, Any]) -> str:
    """A short, secret-free description of a signal for logs."""
    if signals.is_progress(payload):
        return "started"
    return f"status {json.dumps(payload.get(model.DEPLOY_STATUS_CODE))}"
