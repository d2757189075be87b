"""A TCP relay that makes the network faults a service restart or a
partition makes: every connection reset at once, or nothing passing for a
while (a blackhole: what was sent arrives when it lifts, as TCP's
retransmissions would deliver it), or every chunk late.

The soak puts one in front of the store and one in front of the jobboard
for its conductors and standbys; the process posting the operations and
checking the invariants goes straight to them.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from collections.abc import Iterator

#: how long a pump waits for data before looking at the gate again
POLL = 0.2


class FaultProxy:
    """Relays ``127.0.0.1:<port>`` of its own to ``host:port``."""

    def __init__(self, host: str, port: int, name: str, listen: int = 0) -> None:
        self.target = (host, port)
        self.name = name
        self.listener = socket.create_server(("127.0.0.1", listen))
        self.port: int = self.listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        #: set while data may pass (cleared by a blackhole)
        self._open = threading.Event()
        self._open.set()
        self._delay = 0.0
        self._closed = False
        #: connections made and reset, faults made
        self.connections = 0
        self.resets = 0
        threading.Thread(
            target=self._accept, name=f"fault-proxy-{name}", daemon=True
        ).start()

    # ----------------------------------------------------------- relaying
    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        # a blackhole holds a new connection too: its handshake would not
        # complete before it lifts
        self._open.wait()
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self._lock:
            if self._closed:
                client.close()
                upstream.close()
                return
            self._pairs.append((client, upstream))
            self.connections += 1
        for src, dst in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                self._open.wait()
                if self._delay:
                    time.sleep(self._delay)
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_RDWR)
        self._forget(src, dst)

    def _forget(self, a: socket.socket, b: socket.socket) -> None:
        with self._lock:
            self._pairs = [p for p in self._pairs if a not in p and b not in p]

    # ------------------------------------------------------------- faults
    def reset(self) -> int:
        """Cut every connection now (a restart of the service); new ones
        are taken at once.  Returns how many were cut."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
            self.resets += len(pairs)
        for pair in pairs:
            for sock in pair:
                with contextlib.suppress(OSError):
                    # RST, not FIN: what a dead server's kernel answers
                    sock.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0"
                    )
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
        return len(pairs)

    @contextlib.contextmanager
    def blackhole(self) -> Iterator[None]:
        """Nothing passes while the block runs, in either direction."""
        self._open.clear()
        try:
            yield
        finally:
            self._open.set()

    @contextlib.contextmanager
    def slow(self, seconds: float) -> Iterator[None]:
        """Every chunk ``seconds`` late while the block runs."""
        self._delay = seconds
        try:
            yield
        finally:
            self._delay = 0.0

    def close(self) -> None:
        self._open.set()
        with self._lock:
            self._closed = True
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.reset()


#: ``host:port`` after a URL's scheme and any ``user@``
NETLOC = re.compile(r"(?P<head>://(?:[^@/?]*@)?)(?P<host>[^:/?@]+):(?P<port>\d+)")


def address(url: str) -> tuple[str, int]:
    """The first ``host:port`` of ``url``."""
    match = NETLOC.search(url)
    if match is None:
        raise ValueError(f"no host:port in {url!r}")
    return match["host"], int(match["port"])


def on_port(url: str, port: int) -> str:
    """``url`` with its first ``host:port`` replaced by 127.0.0.1:``port``."""
    match = NETLOC.search(url)
    if match is None:
        raise ValueError(f"no host:port in {url!r}")
    start, end = match.span("host")[0], match.span("port")[1]
    return f"{url[:start]}127.0.0.1:{port}{url[end:]}"


def through(url: str, name: str) -> tuple[str, FaultProxy]:
    """``url`` with its first ``host:port`` replaced by a new proxy's."""
    proxy = FaultProxy(*address(url), name)
    return on_port(url, proxy.port), proxy
