"""What one start of the dev cloud knows: ports, secrets, ids, processes."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path

from . import layout
from .procs import Record, Started

# Every server and the port it listens on, in start order.
SERVERS = ("redis", "swift-account", "swift-container", "swift-object",
           "swift-proxy", "keystone", "zaqar", "nova")


def new_password() -> str:
    return secrets.token_urlsafe(18)


@dataclass
class Cloud:
    ports: dict[str, int]
    records: dict[str, Record]
    started: dict[str, Started] = field(default_factory=dict)
    passwords: dict[str, str] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)
    demo_token: str | None = None

    def url(self, server: str) -> str:
        return "http://127.0.0.1:%d" % self.ports[server]

    @property
    def auth_url(self) -> str:
        return self.url("keystone") + "/v3"

    def password(self, user: str) -> str:
        if user not in self.passwords:
            self.passwords[user] = new_password()
        return self.passwords[user]

    @staticmethod
    def dir(name: str) -> Path:
        path = layout.STATE / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def log(self, server: str) -> str:
        return self.records[server].log
