"""The PUT of a result to whoever waits for it outside swflows (a Mistral
action execution): no catalog, no session, only the URL and a token."""

from __future__ import annotations

from typing import Any, Final

import requests

from swflows.clients import base

#: the service named in errors
SERVICE: Final = "callback"
#: seconds one PUT may take
PUT_TIMEOUT: Final = 10.0


def put_result(
    url: str,
    body: dict[str, Any],
    token: str | None,
    *,
    retry: base.RetryPolicy = base.DEFAULT_RETRY,
) -> int:
    """PUT ``body`` (JSON) to ``url`` with ``token``; the HTTP status when
    it was answered (2xx: taken; 4xx: refused, which trying again cannot
    change).  A dropped connection, a timeout and 5xx, 408 and 429 are
    tried again under ``retry``, then raised as a retryable
    :class:`~swflows.exceptions.CloudError` (no URL or token in it)."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["X-Auth-Token"] = token

    def once() -> int:
        try:
            resp = requests.put(url, json=body, headers=headers, timeout=PUT_TIMEOUT)
        except requests.RequestException as exc:
            raise base.unreachable(SERVICE, "send result", exc) from None
        if base.is_retryable_status(resp.status_code):
            raise base.http_error(SERVICE, "send result", resp.status_code)
        return resp.status_code

    return retry.call(once)


__all__ = ["PUT_TIMEOUT", "SERVICE", "put_result"]
