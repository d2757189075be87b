"""What one start of the dev cloud knows: ports, secrets, ids, pid records."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path

from . import layout
from .procs import Record

# Every server (one port each), in start order.
SERVERS = (
    "redis",
    "memcached",
    "zookeeper",
    "swift-account",
    "swift-container",
    "swift-object",
    "swift-proxy",
    "keystone",
    "zaqar",
    "nova",
)


@dataclass
class Cloud:
    ports: dict[str, int]
    records: dict[str, Record] = field(default_factory=dict)
    passwords: dict[str, str] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)
    demo_token: str | None = None
    #: the UDP port Swift's proxy sends its access lines to
    access_log_port: int = 0

    def url(self, server: str) -> str:
        return f"http://127.0.0.1:{self.ports[server]}"

    @property
    def auth_url(self) -> str:
        return self.url("keystone") + "/v3"

    def password(self, user: str) -> str:
        """The password of a user (or a secret), made at first use."""
        if user not in self.passwords:
            self.passwords[user] = secrets.token_urlsafe(18)
        return self.passwords[user]

    @staticmethod
    def dir(name: str) -> Path:
        path = layout.STATE / name
        path.mkdir(parents=True, exist_ok=True)
        return path
