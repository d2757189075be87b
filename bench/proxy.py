"""A counting HTTP proxy put in front of Swift.

Every request swflows and the Heat-style baseline make to Swift goes
through it, so the requests per poll cycle are counted by a third party,
not by either side's own counters.  Both reach the account the Keystone
catalog names with the proxy's host and port in its URL (swflows through
``endpoint_override``), so TempURLs built from it come back through the
proxy too.
"""

from __future__ import annotations

import collections
import contextlib
import http.client
import http.server
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any

#: headers that belong to one hop, never forwarded
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


def kind_of(path: str) -> str:
    """What a Swift request path addresses: auth, account, container or object."""
    parts = urllib.parse.urlsplit(path).path.strip("/").split("/", 3)
    if parts[0] != "v1":
        return "auth"
    return ("account", "account", "container", "object")[len(parts) - 1]


class CountingProxy:
    """A threaded proxy to ``upstream`` (``http://host:port``), counting requests."""

    def __init__(self, upstream: str) -> None:
        split = urllib.parse.urlsplit(upstream)
        if split.scheme != "http" or not split.hostname:
            raise ValueError(f"upstream must be an http:// URL, not {upstream!r}")
        self.upstream = f"http://{split.netloc}"
        self._target = (split.hostname, split.port or 80)
        self._lock = threading.Lock()
        self.counts: collections.Counter[tuple[str, str]] = collections.Counter()
        self._server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), self._handler_class()
        )
        self._server.daemon_threads = True
        host, port = self._server.server_address[:2]
        self.url = f"http://{host!s}:{port}"
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------
    def start(self) -> CountingProxy:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="bench-proxy", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> CountingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- counting -------------------------------------------------------------
    def total(self) -> collections.Counter[tuple[str, str]]:
        with self._lock:
            return collections.Counter(self.counts)

    @contextlib.contextmanager
    def window(self) -> Iterator[collections.Counter[tuple[str, str]]]:
        """The requests seen while the block runs, by (method, kind)."""
        seen: collections.Counter[tuple[str, str]] = collections.Counter()
        before = self.total()
        try:
            yield seen
        finally:
            seen.update(self.total())
            seen.subtract(before)
            for key in [k for k, v in seen.items() if v <= 0]:
                del seen[key]

    def _count(self, method: str, path: str) -> None:
        with self._lock:
            self.counts[(method, kind_of(path))] += 1

    # -- the handler ----------------------------------------------------------
    def _handler_class(self) -> type[http.server.BaseHTTPRequestHandler]:
        proxy = self
        local = threading.local()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _upstream(self, fresh: bool = False) -> http.client.HTTPConnection:
                conn = getattr(local, "conn", None)
                if conn is None or fresh:
                    if conn is not None:
                        conn.close()
                    conn = http.client.HTTPConnection(*proxy._target, timeout=60)
                    local.conn = conn
                return conn

            def _relay(self) -> None:
                proxy._count(self.command, self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP
                }
                if body is not None or self.command in ("PUT", "POST"):
                    headers["Content-Length"] = str(len(body or b""))
                for attempt in (1, 2):
                    conn = self._upstream(fresh=attempt == 2)
                    try:
                        conn.request(
                            self.command, self.path, body=body, headers=headers
                        )
                        resp = conn.getresponse()
                        data = resp.read()
                        break
                    except (http.client.HTTPException, OSError):
                        if attempt == 2:
                            self.send_error(502, "upstream unreachable")
                            return
                self.send_response(resp.status, resp.reason)
                for key, value in resp.getheaders():
                    if key.lower() in HOP_BY_HOP:
                        continue
                    self.send_header(key, value)
                if self.command == "HEAD":
                    self.send_header(
                        "Content-Length", resp.getheader("Content-Length") or "0"
                    )
                    self.end_headers()
                    return
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_HEAD = do_PUT = do_POST = _relay  # noqa: N815
            do_DELETE = do_COPY = _relay  # noqa: N815

        return Handler


__all__ = ["CountingProxy", "kind_of"]
