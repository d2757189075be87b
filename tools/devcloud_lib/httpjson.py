"""A minimal HTTP client over urllib: never raises on an HTTP status."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from email.message import Message
from typing import Any


@dataclass
class Response:
    status: int
    headers: Message
    data: bytes

    def json(self) -> Any:
        return json.loads(self.data)


def call(
    method: str,
    url: str,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> Response:
    """Send one request; a JSON ``body`` is encoded, bytes are sent as is."""
    headers = dict(headers or {})
    data = body
    if body is not None and not isinstance(body, bytes):
        data = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    if not url.startswith("http://"):
        raise ValueError(f"not an http URL: {url}")
    req = urllib.request.Request(url, data=data, method=method, headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310
            return Response(resp.status, resp.headers, resp.read())
    except urllib.error.HTTPError as err:
        return Response(err.code, err.headers, err.read())


def expect(resp: Response, *codes: int, what: str) -> Response:
    """Return ``resp`` if its status is one of ``codes``, else raise."""
    if resp.status not in codes:
        text = resp.data[:300].decode(errors="replace")
        raise RuntimeError(f"{what}: HTTP {resp.status} {text}")
    return resp
