"""The small servers: a private Redis (Zaqar's message store and
Keystone's cache), a private memcached (Swift's proxy cache) and the Nova
stand-in."""

from __future__ import annotations

import json
import os
import shutil
import socket

from . import httpjson, install, layout
from .context import Cloud
from .keystone import service_credentials
from .procs import Check, DevcloudError, spawn


def _answers(port: int, request: bytes, reply: bytes) -> bool:
    """Whether a line protocol's server on ``port`` answers ``request``
    with a line starting ``reply``."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(request + b"\r\n")
        return sock.recv(64).startswith(reply)


def redis_ping(port: int) -> bool:
    return _answers(port, b"PING", b"+PONG")


def start_redis(cloud: Cloud) -> Check:
    binary = shutil.which("redis-server")
    if binary is None:
        raise DevcloudError("redis-server is not installed")
    port = cloud.ports["redis"]
    # No persistence, no daemon, log to stdout (our log file).
    argv = [binary, "--bind", "127.0.0.1", "--port", str(port)]
    argv += ["--save", "", "--appendonly", "no", "--daemonize", "no"]
    argv += ["--dir", str(cloud.dir("redis")), "--logfile", ""]
    started = spawn("redis", argv, port=port, records=cloud.records)
    return Check("redis", [started], lambda: redis_ping(port))


def memcached_version(port: int) -> bool:
    return _answers(port, b"version", b"VERSION")


def start_memcached(cloud: Cloud) -> Check:
    """Swift's proxy caches account and container info and tokens here, as
    every Swift does: without it each request costs two more backend
    requests (a HEAD of the account and of the container)."""
    binary = shutil.which("memcached")
    if binary is None:
        raise DevcloudError(
            "memcached is not installed (tools/services start installs it: "
            "apt-get install memcached)"
        )
    port = cloud.ports["memcached"]
    argv = [binary, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "64"]
    if os.getuid() == 0:
        argv += ["-u", "root"]
    started = spawn("memcached", argv, port=port, records=cloud.records)
    return Check("memcached", [started], lambda: memcached_version(port))


def start_nova(cloud: Cloud) -> Check:
    """Start the stand-in; it validates tokens as the ``nova`` service user,
    gives servers made by its control path to the demo tenant, and starts
    booted servers' agents with the Python of ``.devcloud/swflows``, which
    has swflows and every requirement whoever started the cloud."""
    home = cloud.dir("nova")
    auth = home / "keystone.json"
    layout.write_private(auth, json.dumps(service_credentials(cloud, "nova")))
    argv = [str(layout.venv_bin("python")), str(layout.NOVA_STANDIN)]
    argv += ["--port", str(cloud.ports["nova"]), "--data", str(home / "servers.json")]
    argv += ["--keystone-config", str(auth)]
    argv += ["--default-project-id", cloud.ids["demo_project"]]
    argv += ["--default-user-id", cloud.ids["demo_user"]]
    # booted servers' agents poll each second
    argv += ["--agent-python", str(install.swflows_python()), "--agent-interval", "1"]
    # servers booted with Heat's user data run Heat's agents, once heat-up
    # has laid their image out
    argv += ["--heat-image", str(layout.BASE / "heat-image")]
    started = spawn("nova", argv, port=cloud.ports["nova"], records=cloud.records)

    def probe() -> bool:
        resp = httpjson.call(
            "GET",
            cloud.url("nova") + "/v2.1/servers",
            headers={"X-Auth-Token": cloud.demo_token or ""},
            timeout=5,
        )
        httpjson.expect(resp, 200, what="nova list")
        return True

    return Check("nova", [started], probe)
