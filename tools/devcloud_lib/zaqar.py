"""Zaqar v2 under gunicorn: messages in Redis, queue catalogue in SQLite,
Keystone authentication and signed URLs."""

from __future__ import annotations

import uuid

from . import httpjson, layout
from .context import Cloud
from .keystone import service_credentials
from .procs import Check, access_log, server_env, spawn

CONF = """\
[DEFAULT]
auth_strategy = keystone
# Redis is an "unreliable" store in Zaqar's terms; it refuses it otherwise.
unreliable = true
use_stderr = true

[drivers]
transport = wsgi
message_store = redis
management_store = sqlalchemy

[drivers:message_store:redis]
uri = redis://127.0.0.1:{redis_port}/?dbid=0

[drivers:management_store:sqlalchemy]
uri = {db_uri}

[signed_url]
secret_key = {signed_url_key}

[profiler]
# Zaqar always sets up osprofiler, by default over oslo.messaging, which is
# absent here and logs a traceback; point it at our Redis instead.
connection_string = redis://127.0.0.1:{redis_port}

[keystone_authtoken]
www_authenticate_uri = {auth_url}
auth_url = {auth_url}
auth_type = password
username = {username}
password = {password}
user_domain_id = {user_domain_id}
project_name = {project_name}
project_domain_id = {project_domain_id}
# keystonemiddleware caches a validated token for 300 s by default, so a
# deleted stack user could keep using Zaqar for five minutes. 5 s keeps
# revocation visible to tests and most of the cache's speed (-1, no cache,
# costs about 3x in throughput).
token_cache_time = 5
"""


def db_uri(cloud: Cloud) -> str:
    return f"sqlite:///{cloud.dir('zaqar')}/zaqar-management.db"


def configure(cloud: Cloud) -> None:
    """Write the config; the tables are created by in_venv/prepare.py."""
    text = CONF.format(
        redis_port=cloud.ports["redis"],
        db_uri=db_uri(cloud),
        signed_url_key=cloud.password("zaqar-signed-url"),
        **service_credentials(cloud, "zaqar"),
    )
    layout.write_private(cloud.dir("zaqar") / "zaqar.conf", text)


def start(cloud: Cloud) -> Check:
    port = cloud.ports["zaqar"]
    argv = [str(layout.venv_bin("gunicorn")), "--bind", f"127.0.0.1:{port}"]
    argv += ["--workers", "2", "--worker-class", "sync"]
    argv += access_log("zaqar")
    argv += ["--timeout", "120", "--graceful-timeout", "5", "--no-control-socket"]
    argv += ["--pythonpath", str(layout.IN_VENV), "--chdir", str(cloud.dir("zaqar"))]
    argv += ["zaqar_app:application"]
    env = server_env(ZAQAR_CONFIG_FILE=str(cloud.dir("zaqar") / "zaqar.conf"))
    started = spawn("zaqar", argv, port=port, records=cloud.records, env=env)
    return Check("zaqar", [started], lambda: probe(cloud))


def probe(cloud: Cloud) -> bool:
    """Ready when the demo user can post to a queue (Keystone + Redis +
    SQLite) and delete it."""
    if cloud.demo_token is None:
        return False
    headers = {"X-Auth-Token": cloud.demo_token, "Client-ID": str(uuid.uuid4())}
    queue = cloud.url("zaqar") + "/v2/queues/devcloud-probe"
    message = {"messages": [{"ttl": 60, "body": "probe"}]}
    resp = httpjson.call(
        "POST", queue + "/messages", body=message, headers=headers, timeout=15
    )
    httpjson.expect(resp, 201, what="zaqar post")
    resp = httpjson.call("DELETE", queue, headers=headers, timeout=15)
    httpjson.expect(resp, 204, what="zaqar delete")
    return True
