"""The two small servers: a private Redis (Zaqar's message store) and the
Nova stand-in."""

from __future__ import annotations

import json
import os
import shutil
import socket

from . import httpjson, layout
from .context import Cloud
from .keystone import service_credentials
from .procs import Check, DevcloudError, spawn


def redis_ping(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(b"PING\r\n")
        return sock.recv(64).startswith(b"+PONG")


def start_redis(cloud: Cloud) -> Check:
    binary = shutil.which("redis-server")
    if binary is None:
        raise DevcloudError("redis-server is not installed "
                            "(apt-get install redis-server)")
    port = cloud.ports["redis"]
    argv = [binary, "--bind", "127.0.0.1", "--port", str(port),
            "--save", "", "--appendonly", "no", "--daemonize", "no",
            "--dir", str(cloud.dir("redis")), "--logfile", ""]
    started = spawn("redis", argv, port=port, records=cloud.records)
    cloud.started["redis"] = started
    return Check("redis", [started], lambda: redis_ping(port))


def start_nova(cloud: Cloud) -> Check:
    """Start the stand-in; it validates tokens as the ``nova`` service user
    and gives servers made by its control path to the demo tenant."""
    home = cloud.dir("nova")
    auth = home / "keystone.json"
    fd = os.open(auth, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(service_credentials(cloud, "nova"), f)
    argv = [str(layout.venv_bin("python")), str(layout.NOVA_STANDIN),
            "--port", str(cloud.ports["nova"]),
            "--data", str(home / "servers.json"),
            "--keystone-config", str(auth),
            "--default-project-id", cloud.ids["demo_project"],
            "--default-user-id", cloud.ids["demo_user"]]
    started = spawn("nova", argv, port=cloud.ports["nova"],
                    records=cloud.records)
    cloud.started["nova"] = started

    def probe() -> bool:
        resp = httpjson.call("GET", cloud.url("nova") + "/v2.1/servers",
                             headers={"X-Auth-Token": cloud.demo_token},
                             timeout=5)
        return httpjson.expect(resp, 200, what="nova list").status == 200
    return Check("nova", [started], probe)
