"""A small WSGI application receiving HEAT_SIGNAL posts, for standalone use.

An embedder with an API of its own passes signals to
:meth:`swflows.api.Swflows.signal` itself; swflows used alone can serve this
instead.  Servers post their signal as the deployment's stack user, with a
Keystone token that keystonemiddleware's ``auth_token`` validates::

    POST /v1/deployments/<deployment id>/signal
    POST /v1/signal/<derived config id>

The second is what swflows' agent posts to when its ``heat_signal_url`` is
``http://<host>:<port>/v1/signal/{config_id}``.  The token's user must be
the deployment's stack user (the ``deploy_user_id`` of its current derived
config); any other user gets 403, no token or a bad one 401.  Answers are
JSON: 200 ``{"deployment_id": ..., "accepted": true}`` (false when the
deployment was not waiting: the signal is ignored, as Heat ignores it; a
payload swflows cannot use ends the deployment FAILED, kind
``signal_rejected``), 400 for a payload refused outright, 404 for an
unknown deployment or config, 413 for a body over ``max_signal_bytes``,
503 (try again: the store or the cloud could not be reached) or 500 when
they failed otherwise, its ``error`` naming the error's class.
Tokens, passwords and payloads are never logged.

With ``[watcher] zaqar_push_url`` set, Zaqar pushes ZAQAR_SIGNAL messages
here too, without a Keystone token::

    POST /v1/push/<queue>

Such a request is authenticated by the queue's own push token, in the
``X-Swflows-Push-Token`` header that Zaqar's subscription adds (401
without it or with a wrong one); its body is Zaqar's notification (the
message's ``body`` and its ``queue_name``).  The signal is applied to the
action that queue belongs to only (``accepted`` false otherwise).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

import webob
from oslo_config import cfg

from swflows import derive, exceptions
from swflows.engine import faults
from swflows.transports import impl_zaqar

if TYPE_CHECKING:
    from swflows.api import Swflows

LOG = logging.getLogger(__name__)

_PUSH: Final = re.compile(r"^/v1/push/([^/]+)/?$")
_ROUTES: Final = (
    (re.compile(r"^/v1/deployments/([^/]+)/signal/?$"), "deployment"),
    (re.compile(r"^/v1/signal/([^/]+)/?$"), "config"),
)

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _answer(status: int, **body: Any) -> webob.Response:
    return webob.Response(
        status=status,
        content_type="application/json",
        charset="utf-8",
        body=json.dumps(body).encode(),
    )


def _error(status: int, message: str) -> webob.Response:
    return _answer(status, error=message)


class SignalApp:
    """The application itself, behind ``auth_token`` (see :func:`make_app`)."""

    def __init__(self, sw: Swflows, *, max_bytes: int | None = None) -> None:
        self.sw = sw
        self.max_bytes = int(max_bytes or sw.conf.max_signal_bytes)

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        request = webob.Request(environ)
        try:
            response = self.handle(request)
        except Exception as exc:  # never a bare 500: say what failed
            response = _failed(f"{request.method} {request.path_info}", exc)
        return response(environ, start_response)  # type: ignore[no-any-return]

    def handle(self, request: webob.Request) -> webob.Response:
        route = _route(request.path_info)
        if route is None:
            return _error(404, "no such resource")
        kind, ident = route
        if request.method != "POST":
            response = _error(405, "only POST is allowed")
            response.allow = ("POST",)
            return response
        user_id = request.headers.get("X-User-Id")
        if request.headers.get("X-Identity-Status") != "Confirmed" or not user_id:
            return _error(401, "a valid Keystone token is required")
        try:
            deployment_id, stack_user = self._find(kind, ident)
        except exceptions.NotFound as exc:
            return _error(404, exc.message)
        except Exception as exc:
            return _failed(f"signal to {kind} {ident}", exc)
        if stack_user is None or stack_user != user_id:
            LOG.warning(
                "signal for deployment %s refused: user %s is not its stack user",
                deployment_id,
                user_id,
            )
            return _error(403, "this user may not signal this deployment")
        length = request.content_length
        if length is not None and length > self.max_bytes:
            return _error(413, f"a signal is at most {self.max_bytes} bytes")
        body = request.body_file.read(self.max_bytes + 1)
        if len(body) > self.max_bytes:
            return _error(413, f"a signal is at most {self.max_bytes} bytes")
        from oslo_context import context as oslo_context

        context = oslo_context.RequestContext.from_environ(request.environ)
        return _deliver(self.sw, "signal", deployment_id, body, context=context)

    def _find(self, kind: str, ident: str) -> tuple[str, str | None]:
        """The deployment a request is for, and its stack user's id."""
        if kind == "deployment":
            deployment = self.sw.show(ident)
            if deployment.config_id is None:
                return deployment.id, None
            config = self.sw.get_config(deployment.config_id)
            return deployment.id, _input(config, derive.DEPLOY_USER_ID)
        config = self.sw.get_config(ident)
        server_id = _input(config, derive.DEPLOY_SERVER_ID)
        if server_id:
            for deployment in self.sw.list_deployments(server_id=server_id):
                if deployment.config_id == config.id:
                    return deployment.id, _input(config, derive.DEPLOY_USER_ID)
        raise exceptions.DeploymentNotFound(
            ident, f"no deployment runs config {ident} now"
        )


class PushApp:
    """Signals Zaqar pushes (``POST /v1/push/<queue>``), each authenticated
    by its queue's push token rather than a Keystone token."""

    def __init__(self, sw: Swflows, *, max_bytes: int | None = None) -> None:
        self.sw = sw
        # Zaqar's notification wraps the message body
        self.max_bytes = int(max_bytes or sw.conf.max_signal_bytes) + 4096

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        request = webob.Request(environ)
        try:
            response = self.handle(request)
        except Exception as exc:
            response = _failed(f"{request.method} {request.path_info}", exc)
        return response(environ, start_response)  # type: ignore[no-any-return]

    def handle(self, request: webob.Request) -> webob.Response:
        matched = _PUSH.match(request.path_info)
        if matched is None:
            return _error(404, "no such resource")
        if request.method != "POST":
            response = _error(405, "only POST is allowed")
            response.allow = ("POST",)
            return response
        queue = matched.group(1)
        token = request.headers.get(impl_zaqar.PUSH_HEADER)
        if not impl_zaqar.push_token_ok(self.sw.services, queue, token):
            LOG.warning("push for queue %s refused: no valid push token", queue)
            return _error(401, "a valid push token is required")
        ref = impl_zaqar.parse_queue_name(queue)
        if ref is None:
            return _error(404, f"{queue} is not a signal queue")
        body = request.body_file.read(self.max_bytes + 1)
        if len(body) > self.max_bytes:
            return _error(413, f"a signal is at most {self.max_bytes} bytes")
        try:
            notification = json.loads(body)
        except (ValueError, RecursionError):  # not JSON, or nested past reading
            notification = None
        if not isinstance(notification, dict) or "body" not in notification:
            return _error(400, "not a Zaqar notification")
        if notification.get("queue_name", queue) != queue:
            return _error(400, "the notification is for another queue")
        message = notification["body"]
        if isinstance(message, str | bytes | dict):
            payload = message  # an object is checked as an embedder's mapping
        else:  # refused as not an object: its JSON, if it has one
            try:
                payload = json.dumps(message)
            except RecursionError:
                return _error(400, "signal: payload must be a JSON object")
        deployment_id, generation = ref
        return _deliver(self.sw, "pushed signal", deployment_id, payload, generation)


def _deliver(
    sw: Any,
    what: str,
    deployment_id: str,
    payload: bytes | str | Mapping[str, Any],
    generation: int | None = None,
    context: Any = None,
) -> webob.Response:
    """Hand ``payload`` to :meth:`Swflows.signal` and answer as it went
    (the rule ``swflows:deployment:signal`` checks ``context``)."""
    try:
        extra = {} if context is None else {"context": context}
        if generation is None:
            accepted = sw.signal(deployment_id, payload, **extra)
        else:
            accepted = sw.signal(deployment_id, payload, generation=generation, **extra)
    except exceptions.SignalRejected as exc:
        return _error(400, exc.message)
    except exceptions.DeploymentNotFound as exc:
        return _error(404, exc.message)
    except exceptions.Forbidden as exc:
        return _error(403, exc.message)
    except Exception as exc:
        return _failed(f"{what} for deployment {deployment_id}", exc)
    LOG.info(
        "%s for deployment %s %s",
        what,
        deployment_id,
        "accepted" if accepted else "ignored: it is not waiting",
    )
    return _answer(200, deployment_id=deployment_id, accepted=accepted)


def _failed(what: str, exc: BaseException) -> webob.Response:
    """503 (try again) for an outage, 500 otherwise, naming the error's class
    (its message may hold what the server sent: it is logged, on one line)."""
    LOG.error("%s failed: %s", what, faults.describe(exc))
    name = type(exc).__name__
    if faults.is_outage(exc):
        return _error(
            503,
            f"the signal was not recorded: {name}: the store or the cloud "
            "could not be reached; try again",
        )
    return _error(500, f"the signal was not recorded: internal error {name}")


def _route(path: str) -> tuple[str, str] | None:
    """(``deployment`` or ``config``, its id) of a request path."""
    for pattern, kind in _ROUTES:
        matched = pattern.match(path)
        if matched:
            return kind, matched.group(1)
    return None


def _input(config: Any, name: str) -> str | None:
    for item in config.inputs:
        if item.name == name and item.value:
            return str(item.value)
    return None


def make_app(sw: Swflows, authtoken: Mapping[str, Any]) -> WsgiApp:
    """:class:`SignalApp` behind keystonemiddleware's ``auth_token``, and
    :class:`PushApp` beside it for ``/v1/push/`` (no Keystone token).

    ``authtoken`` holds ``auth_token``'s options as a paste file would
    (``www_authenticate_uri``, ``auth_type``, ``auth_url``, ``username``,
    ``password``...: the service user that validates tokens); they are read
    from it alone, never from the process' global configuration.
    """
    from keystonemiddleware import auth_token

    options = {
        "delay_auth_decision": False,
        "include_service_catalog": False,
        **dict(authtoken),
        # a configuration of its own: nothing is read from, or registered
        # on, the process' global cfg.CONF
        "oslo_config_config": cfg.ConfigOpts(),
    }
    keystone: WsgiApp = auth_token.AuthProtocol(SignalApp(sw), options)
    push = PushApp(sw)

    def app(
        environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO") or "")
        if path.startswith(impl_zaqar.PUSH_PATH):
            return push(environ, start_response)
        return keystone(environ, start_response)

    return app


__all__ = ["PushApp", "SignalApp", "make_app"]
