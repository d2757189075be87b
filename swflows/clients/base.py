"""What every cloud adapter shares: the retry policy and safe error messages."""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Iterable
from typing import Concatenate, ParamSpec, Protocol, TypeVar

import tenacity
from keystoneauth1 import exceptions as ksa_exc

from swflows.exceptions import CloudError

LOG = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

#: HTTP statuses where the same request may succeed if made again later.
RETRYABLE_STATUSES = frozenset({408, 429})


def is_retryable_status(status: int | None) -> bool:
    """True for 5xx, 408 and 429; False for anything else (None included)."""
    return status is not None and (status >= 500 or status in RETRYABLE_STATUSES)


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """Replace every occurrence of each non-empty secret in ``text``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def http_error(
    service: str, what: str, status: int | None, detail: str = ""
) -> CloudError:
    """A :class:`CloudError` for an HTTP answer; ``detail`` must be secret-free."""
    message = f"{what} failed: HTTP {status}"
    if detail:
        message = f"{message}: {detail}"
    return CloudError(
        service, message, status=status, retryable=is_retryable_status(status)
    )


def unreachable(service: str, what: str, exc: BaseException) -> CloudError:
    """A retryable :class:`CloudError` for a connection failure or timeout.

    Only the exception's class name is kept: connection errors can carry URLs
    with signatures in their text.
    """
    return CloudError(
        service,
        f"{what} failed: unreachable or no answer in time ({type(exc).__name__})",
        retryable=True,
    )


def ksa_error(service: str, what: str, exc: ksa_exc.ClientException) -> CloudError:
    """Translate a keystoneauth1 failure (auth, catalog, connection, HTTP).

    The adapters ask keystoneauth1 not to raise on their own requests, so an
    HTTP error from it is Keystone refusing to authenticate: it is reported
    as the identity service's, never as a 404 of ``service`` (which the
    adapters read as "missing").
    """
    if isinstance(exc, ksa_exc.ConnectionError):
        return unreachable(service, what, exc)
    if isinstance(exc, ksa_exc.HttpError):
        return http_error(
            "identity",
            f"authentication for {service} ({what})",
            exc.http_status,
            type(exc).__name__,
        )
    return CloudError(service, f"{what} failed: {type(exc).__name__}")


def is_missing(exc: CloudError, service: str) -> bool:
    """Whether ``service`` itself answered 404."""
    return exc.service == service and exc.status == 404


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, CloudError) and exc.retryable


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """A few attempts with jittered exponential backoff, on retryable errors only.

    Retries wrap whole adapter methods, which are idempotent, so a repeated
    attempt finds what an interrupted one made.
    """

    #: Total attempts, the first one included.
    attempts: int = 4
    #: First wait in seconds; each further wait doubles, plus jitter.
    initial: float = 0.25
    #: Longest single wait in seconds.
    maximum: float = 4.0

    def call(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.attempts),
            wait=tenacity.wait_exponential_jitter(
                initial=self.initial, max=self.maximum, jitter=self.initial
            ),
            retry=tenacity.retry_if_exception(_retryable),
            before_sleep=tenacity.before_sleep_log(LOG, logging.INFO),
            reraise=True,
        )
        return retrying(fn, *args, **kwargs)


DEFAULT_RETRY = RetryPolicy()
#: One attempt only: for tests and for callers that retry at a higher level.
NO_RETRY = RetryPolicy(attempts=1)


class Retried(Protocol):
    retry_policy: RetryPolicy


S = TypeVar("S", bound=Retried)


def retried(
    method: Callable[Concatenate[S, P], T],
) -> Callable[Concatenate[S, P], T]:
    """Run an adapter method under its instance's :class:`RetryPolicy`."""

    @functools.wraps(method)
    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.retry_policy.call(method, self, *args, **kwargs)

    return wrapper
