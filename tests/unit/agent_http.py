"""A scripted HTTP server on 127.0.0.1 for the agent's unit tests.

Answers are taken in order from ``answers`` (status, headers, body), or made
by a callable given the request; when none are left, 200 with no body.
Every request is recorded.
"""

from __future__ import annotations

import dataclasses
import http.server
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest


@dataclasses.dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Answer = tuple[int, dict[str, str], bytes]


class FakeHttp:
    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.answers: list[Answer | Callable[[Seen], Answer]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                seen = Seen(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length) if length else b"",
                )
                outer.seen.append(seen)
                answer: Any = outer.answers.pop(0) if outer.answers else (200, {}, b"")
                if callable(answer):
                    answer = answer(seen)
                status, headers, body = answer
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if body and self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _serve  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, args=(0.05,), daemon=True
        )

    def start(self) -> FakeHttp:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_http() -> Iterator[FakeHttp]:
    server = FakeHttp().start()
    try:
        yield server
    finally:
        server.stop()
