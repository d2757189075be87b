"""Plain HTTP for the agent: errors, retries, and a small Keystone v3 login.

The agent talks to Swift, Zaqar and Keystone with ``requests`` alone, so a
server needs no OpenStack client library.  Errors are
:class:`~swflows.exceptions.CloudError` with ``retryable`` set for what a
later attempt may fix (5xx, 408, 429, a dropped connection, a timeout).
Messages never carry a URL's query string: TempURL and signed-URL
signatures are credentials.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

import requests
import tenacity

from swflows import exceptions

LOG = logging.getLogger(__name__)

T = TypeVar("T")

#: statuses worth another attempt
RETRYABLE_STATUSES: Final = frozenset({408, 429, 500, 502, 503, 504})
#: seconds before a token's expiry when it is renewed
TOKEN_MARGIN: Final = 60.0


def user_agent() -> str:
    try:
        import importlib.metadata

        version = importlib.metadata.version("swflows")
    except Exception:
        version = "unknown"
    return f"swflows-agent/{version}"


def safe_url(url: str) -> str:
    """``url`` without its query string and credentials, fit for logs."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    shown = urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))
    return shown + ("?..." if parts.query else "")


def is_transient(exc: BaseException) -> bool:
    """Whether another attempt may succeed."""
    if isinstance(exc, exceptions.SwflowsError):
        return bool(exc.retryable)
    return isinstance(exc, requests.ConnectionError | requests.Timeout)


def request(
    session: requests.Session,
    method: str,
    url: str,
    *,
    service: str,
    what: str,
    ok: Callable[[int], bool] = lambda status: status < 400,
    **kwargs: Any,
) -> requests.Response:
    """One HTTP call; CloudError unless ``ok(status)``."""
    try:
        resp = session.request(method, url, **kwargs)
    except requests.RequestException as exc:
        transient = isinstance(exc, requests.ConnectionError | requests.Timeout)
        raise exceptions.CloudError(
            service,
            f"{what}: {method} {safe_url(url)} failed: {type(exc).__name__}",
            retryable=transient,
        ) from None
    if not ok(resp.status_code):
        raise exceptions.CloudError(
            service,
            f"{what}: {method} {safe_url(url)} answered {resp.status_code} "
            f"{resp.reason or ''}: {_excerpt(resp)}".rstrip(": "),
            status=resp.status_code,
            retryable=resp.status_code in RETRYABLE_STATUSES,
        )
    return resp


def retrying(
    attempts: int,
    backoff: float,
    *,
    max_wait: float = 30.0,
    stop: threading.Event | None = None,
) -> tenacity.Retrying:
    """Retries of transient failures: ``attempts`` in all, randomised
    exponential waits from ``backoff`` seconds, cut short when ``stop`` is set."""

    class Stopping(tenacity.stop.stop_base):
        def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
            return stop is not None and stop.is_set()

    def sleep(seconds: float) -> None:
        if stop is None:
            time.sleep(seconds)
        else:
            stop.wait(seconds)

    return tenacity.Retrying(
        retry=tenacity.retry_if_exception(is_transient),
        stop=tenacity.stop_any(
            tenacity.stop_after_attempt(max(1, attempts)), Stopping()
        ),
        wait=tenacity.wait_random_exponential(multiplier=backoff, max=max_wait),
        sleep=sleep,
        before_sleep=_log_retry,
        reraise=True,
    )


def backoff(wait: tenacity.wait.wait_base, failures: int) -> float:
    """The seconds tenacity's ``wait`` gives after ``failures`` failed
    attempts in a row, for loops that wait between rounds themselves."""
    state = tenacity.RetryCallState(tenacity.Retrying(), None, (), {})
    state.attempt_number = max(1, failures)
    return float(wait(state))


def doubling(first: float, top: float) -> tenacity.wait.wait_base:
    """``first`` after one failure, doubling at each further one, at most
    ``top``."""
    return tenacity.wait_exponential(multiplier=first, exp_base=2, max=top)


def with_fresh_token(keystone: Keystone, call: Callable[[], T]) -> T:
    """``call()``, made once more with a new token if its token was refused
    (401): a token can be revoked or expire before the time it announced."""

    def refused(exc: BaseException) -> bool:
        return isinstance(exc, exceptions.CloudError) and exc.status == 401

    def renew(state: tenacity.RetryCallState) -> None:
        keystone.invalidate()

    fresh = tenacity.Retrying(
        retry=tenacity.retry_if_exception(refused),
        stop=tenacity.stop_after_attempt(2),
        before_sleep=renew,
        reraise=True,
    )
    return fresh(call)


def _log_retry(state: tenacity.RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    LOG.warning(
        "attempt %d failed (%s); trying again in %.1f s",
        state.attempt_number,
        exc,
        state.upcoming_sleep,
    )


def _excerpt(resp: requests.Response) -> str:
    try:
        text = resp.text
    except Exception:
        return ""
    return " ".join(text.split())[:200]


class Keystone:
    """A Keystone v3 password login: a project-scoped token and its catalog.

    The token is kept until a minute before it expires, or until
    :meth:`invalidate` (after a 401 from a service).
    """

    def __init__(
        self,
        session: requests.Session,
        auth_url: str,
        *,
        password: str,
        project_id: str,
        user_id: str | None = None,
        username: str | None = None,
        user_domain_id: str | None = None,
        user_domain_name: str | None = None,
        region_name: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        if not user_id and not username:
            raise exceptions.ValidationError("user_id", "a user id or name is needed")
        self.session = session
        self.auth_url = auth_url.rstrip("/")
        self.password = password
        self.project_id = project_id
        self.user_id = user_id
        self.username = username
        self.user_domain_id = user_domain_id
        self.user_domain_name = user_domain_name
        self.region_name = region_name
        self.timeout = timeout
        self._token: str | None = None
        self._catalog: list[Any] = []
        self._expires = 0.0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        who = self.user_id or self.username
        return f"Keystone({safe_url(self.auth_url)!r}, user={who!r})"

    @classmethod
    def from_inputs(
        cls, session: requests.Session, inputs: Mapping[str, Any], timeout: float
    ) -> Keystone:
        """From Heat's ``deploy_auth_url``, ``deploy_user_id``, ... inputs."""
        missing = [
            n
            for n in ("deploy_auth_url", "deploy_password", "deploy_project_id")
            if not inputs.get(n)
        ]
        if not inputs.get("deploy_user_id") and not inputs.get("deploy_username"):
            missing.append("deploy_user_id")
        if missing:
            raise exceptions.ValidationError(
                "inputs", f"missing credentials: {', '.join(missing)}"
            )
        return cls(
            session,
            str(inputs["deploy_auth_url"]),
            password=str(inputs["deploy_password"]),
            project_id=str(inputs["deploy_project_id"]),
            user_id=_opt(inputs.get("deploy_user_id")),
            username=_opt(inputs.get("deploy_username")),
            region_name=_opt(inputs.get("deploy_region_name")),
            timeout=timeout,
        )

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.auth_url, self.user_id or self.username or "", self.project_id)

    def token(self) -> str:
        with self._lock:
            if self._token is None or time.time() >= self._expires:
                self._login()
            assert self._token is not None
            return self._token

    def invalidate(self) -> None:
        with self._lock:
            self._token = None

    def endpoint(self, service_type: str, interface: str = "public") -> str:
        """The catalog's URL for ``service_type`` (in ``region_name`` if set)."""
        self.token()
        for service in self._catalog:
            if not isinstance(service, Mapping) or service.get("type") != service_type:
                continue
            for ep in service.get("endpoints") or ():
                if not isinstance(ep, Mapping) or ep.get("interface") != interface:
                    continue
                region = ep.get("region_id") or ep.get("region")
                if self.region_name and region != self.region_name:
                    continue
                if ep.get("url"):
                    return str(ep["url"]).rstrip("/")
        raise exceptions.CloudError(
            "keystone",
            f"no {interface} {service_type} endpoint in the catalog"
            + (f" for region {self.region_name}" if self.region_name else ""),
        )

    def _login(self) -> None:
        user: dict[str, Any] = {"password": self.password}
        if self.user_id:
            user["id"] = self.user_id
        else:
            user["name"] = self.username
            if self.user_domain_id:
                user["domain"] = {"id": self.user_domain_id}
            else:
                user["domain"] = {"name": self.user_domain_name or "Default"}
        body = {
            "auth": {
                "identity": {"methods": ["password"], "password": {"user": user}},
                "scope": {"project": {"id": self.project_id}},
            }
        }
        resp = request(
            self.session,
            "POST",
            f"{_v3(self.auth_url)}/auth/tokens",
            service="keystone",
            what="log in",
            json=body,
            timeout=self.timeout,
        )
        token = resp.headers.get("X-Subject-Token")
        try:
            data = resp.json()["token"]
        except (ValueError, KeyError, TypeError):
            data = None
        if not token or not isinstance(data, Mapping):
            raise exceptions.CloudError("keystone", "log in: no token in the answer")
        self._token = token
        self._catalog = list(data.get("catalog") or [])
        self._expires = time.time() + _lifetime(data.get("expires_at"))


def _v3(url: str) -> str:
    return url if url.rstrip("/").endswith("/v3") else f"{url.rstrip('/')}/v3"


def _lifetime(expires_at: Any) -> float:
    """Seconds to keep a token: until a minute before it expires."""
    import datetime as _dt

    if isinstance(expires_at, str):
        try:
            when = _dt.datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
            if when.tzinfo is None:
                when = when.replace(tzinfo=_dt.UTC)
            left = when.timestamp() - time.time()
            return max(0.0, left - TOKEN_MARGIN)
        except ValueError:
            pass
    return 300.0


def _opt(value: Any) -> str | None:
    return str(value) if value else None
