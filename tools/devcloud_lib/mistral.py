"""A real OpenStack Mistral (mistral-api, -engine and -executor) on the dev cloud.

``tools/devcloud mistral-up`` installs mistral from ``tools/mistral-lock.txt``
into ``.devcloud/mistral`` (swflows from this tree beside it: its actions are
``mistral.actions`` entry points, which Mistral's legacy action provider
loads), then starts mistral-api, mistral-engine and mistral-executor against
the dev cloud's Keystone (a ``mistral`` service user, the ``workflowv2``
endpoint in the catalog), this machine's RabbitMQ (a vhost of its own) and
PostgreSQL (Mistral's database and swflows', made afresh at each start).
The executor's swflows reads ``$SWFLOWS_CONFIG_FILE``: the dev cloud as the
demo user, its store on PostgreSQL.  ``.devcloud/mistral.json`` says where
everything is.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from . import httpjson, keystone, layout, service_bed, swflowsconf
from .procs import (
    Check,
    DevcloudError,
    Record,
    Started,
    free_ports,
    port_in_use,
    start_ticks,
    stop,
    wait_ready,
)

LOCK_FILE = layout.TOOLS / "mistral-lock.txt"
VENV = layout.BASE / "mistral"
STAMP = VENV / "mistral-lock.sha256"
STATE = layout.BASE / "mistral-state"
RECORDS = STATE / "servers.json"
MISTRAL_JSON = layout.BASE / "mistral.json"
CONF = STATE / "mistral.conf"
#: the executor's swflows ($SWFLOWS_CONFIG_FILE), and the one a workflow
#: picks with ``config_file`` (in $SWFLOWS_CONFIG_DIRS): the same store
#: under other tables, its deferred work (and results) through trusts
SWFLOWS_CONF = STATE / "swflows.conf"
TRUSTS_CONF = STATE / "swflows-trusts.conf"
TRUSTS_TABLE_PREFIX = "trusts_"
#: seconds a result's trust is kept after the result was sent, in the
#: trusts' configuration: long enough for the next action to start with a
#: token of it, short enough for a test to see it go
TRUST_KEEP = 30
#: and one whose flows are jobs on a Redis jobboard, run by conductors the
#: tests start (under tables, and a board namespace, of its own)
CONDUCTED_CONF = STATE / "swflows-conducted.conf"
CONDUCTED_TABLE_PREFIX = "conducted_"

SERVICE_USER = "mistral"
SERVICE_TYPE = "workflowv2"
#: the servers, each a ``mistral-server --server <role>``, in start order
ROLES = ("engine", "executor", "api")
RABBIT = os.environ.get("SWFLOWS_MISTRAL_RABBIT", "127.0.0.1:5672")
PG = os.environ.get(
    "SWFLOWS_MISTRAL_PG", "postgresql+psycopg2://postgres@127.0.0.1:5432"
)
READY_TIMEOUT = 120.0
#: what each server logs once it serves (the API answers instead)
STARTED_LINE = {
    "engine": b"Engine server started.",
    "executor": b"Executor server started.",
}


def python() -> Path:
    return VENV / "bin" / "python"


# ------------------------------------------------------------------ install


def ensure_venv() -> float | None:
    """Install Mistral (and swflows from this tree); seconds spent, None if
    current.  swflows goes in without dependencies: the lock holds them, and
    its ``mistral.actions`` entry points are what Mistral loads."""
    return service_bed.ensure_venv(VENV, STAMP, LOCK_FILE, "Mistral")


def code_digest() -> str:
    """swflows' code as this tree has it.  Mistral runs it from the tree
    (installed editable) as it was when Mistral started: a Mistral started
    before the code changed is not "up" (tests would run the old code)."""
    digest = hashlib.sha256()
    root = layout.REPO / "swflows"
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


# -------------------------------------------------------------- resources


def databases() -> dict[str, str]:
    """Mistral's database and swflows' (the executor's actions'), by role."""
    tag = layout.clone_tag()
    return {"mistral": f"mistral_{tag}", "swflows": f"mistral_swflows_{tag}"}


def make_databases() -> dict[str, str]:
    return service_bed.make_databases(python(), PG, databases())


def make_vhost() -> str:
    return service_bed.make_vhost("mistral")


def register(cloud: dict[str, Any], password: str, api_port: int) -> None:
    """The ``mistral`` service user (admin of project ``service``) and the
    workflowv2 endpoints, replacing those of a previous start."""
    service_bed.register(
        cloud,
        user=SERVICE_USER,
        password=password,
        service_type=SERVICE_TYPE,
        service_name="mistral",
        url=f"http://127.0.0.1:{api_port}/v2",
    )


# ----------------------------------------------------------------- config


def mistral_conf(
    cloud: dict[str, Any],
    *,
    password: str,
    vhost: str,
    database_url: str,
    api_port: int,
) -> str:
    ks = cloud["keystone"]
    auth_url = ks["auth_url"]
    host = f"swflows-mistral-{layout.clone_tag()}"
    return f"""\
[DEFAULT]
transport_url = rabbit://guest:guest@{RABBIT}/{vhost}
auth_type = keystone
use_stderr = true
debug = false

[api]
host = 127.0.0.1
port = {api_port}

[database]
connection = {database_url}

[pecan]
auth_enable = true

[keystone_authtoken]
www_authenticate_uri = {auth_url}
auth_type = password
auth_url = {auth_url}
username = {SERVICE_USER}
password = {password}
user_domain_id = default
project_name = service
project_domain_id = default
region_name = {ks["region"]}

[engine]
host = {host}

[executor]
type = remote
host = {host}

[cron_trigger]
enabled = false

[action_heartbeat]
# a synchronous action whose executor died is failed after 10 s, not 300
# (60 s, not an hour, when it died before its first heartbeat)
check_interval = 2
max_missed_heartbeats = 5
first_heartbeat_timeout = 60

[oslo_concurrency]
lock_path = {STATE / "locks"}
"""


def swflows_conf(
    cloud: dict[str, Any],
    database_url: str,
    secret_key: str,
    trustee: dict[str, str] | None = None,
    *,
    conducted: bool = False,
) -> str:
    """The executor's swflows: the dev cloud as its demo user, the store on
    PostgreSQL (tests read it too, with this same file); with ``trustee``,
    under tables of its own, its deferred work done through trusts; with
    ``conducted``, under tables of its own, its flows jobs on Redis."""
    extra: dict[str, list[str]] = {"database": [f"secret_key = {secret_key}"]}
    if trustee is not None:
        extra["database"].append(f"table_prefix = {TRUSTS_TABLE_PREFIX}")
        extra["DEFAULT"] = ["deferred_auth_method = trusts"]
        extra["trustee"] = [
            "auth_type = password",
            f"result_trust_keep = {TRUST_KEEP}",
            *(f"{key} = {value}" for key, value in trustee.items()),
        ]
        extra["watcher"] = ["sweep_interval = 5"]
    if conducted:
        extra["database"].append(f"table_prefix = {CONDUCTED_TABLE_PREFIX}")
        extra["jobboard"] = [
            "enabled = true",
            f"backend_url = redis://127.0.0.1:6379/0?namespace="
            f"swflows-mistral-{layout.clone_tag()}",
            "claim_expiry = 10",
        ]
    return swflowsconf.conf_text(cloud, database=database_url, extra=extra)


# ------------------------------------------------------------- processes


def load_records() -> dict[str, Record]:
    try:
        raw = json.loads(RECORDS.read_text())
    except (OSError, ValueError):
        return {}
    return {name: Record(**rec) for name, rec in raw.items()}


def _save(records: dict[str, Record]) -> None:
    RECORDS.write_text(
        json.dumps({n: r.__dict__ for n, r in records.items()}, indent=1)
    )


def server_argv(role: str) -> list[str]:
    return [
        str(VENV / "bin" / "mistral-server"),
        "--server",
        role,
        "--config-file",
        str(CONF),
    ]


def spawn(role: str, port: int, records: dict[str, Record]) -> Started:
    """Start ``mistral-<role>`` in a process group of its own (oslo.service
    forks its worker there)."""
    name = f"mistral-{role}"
    if port and port_in_use(port):
        raise DevcloudError(f"{name}: port {port} is already in use")
    log = STATE / f"{name}.log"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OS_", "PYTHON", "VIRTUAL_ENV", "SWFLOWS_"))
    }
    env["PYTHONUNBUFFERED"] = "1"
    if role == "executor":
        env["SWFLOWS_CONFIG_FILE"] = str(SWFLOWS_CONF)
        env["SWFLOWS_CONFIG_DIRS"] = str(STATE)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            server_argv(role),
            cwd=STATE,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    records[name] = Record(name, proc.pid, start_ticks(proc.pid) or 0, port, str(log))
    _save(records)
    return Started(records[name], proc)


def _logged_start(role: str, records: dict[str, Record]) -> Check:
    """Start a server that has no port; ready once it logs that it serves."""
    log = STATE / f"mistral-{role}.log"
    since = log.stat().st_size if log.exists() else 0
    started = spawn(role, 0, records)

    def serving() -> bool:
        with open(log, "rb") as f:
            f.seek(since)
            return STARTED_LINE[role] in f.read()

    return Check(f"mistral-{role}", [started], serving)


def start_executor_again() -> bool:
    """Start mistral-executor if it is not running (a test killed it); True
    if it had to be started."""
    records = load_records()
    if "mistral-api" not in records:
        raise DevcloudError("Mistral is not running: run tools/devcloud mistral-up")
    old = records.get("mistral-executor")
    if old is not None and old.alive():
        return False
    if old is not None:
        stop({"mistral-executor": old})  # its worker, if it outlived it
    wait_ready([_logged_start("executor", records)], READY_TIMEOUT)
    return True


def _api_answers(port: int) -> bool:
    # the version list is public (no token needed)
    return httpjson.call("GET", f"http://127.0.0.1:{port}/", timeout=5).status == 200


def is_up() -> bool:
    """Mistral runs, registered in the running dev cloud's Keystone, on
    swflows' code as it is now."""
    try:
        doc = json.loads(MISTRAL_JSON.read_text())
        cloud = json.loads(layout.CLOUD_JSON.read_text())
    except (OSError, ValueError):
        return False
    if doc.get("auth_url") != cloud["keystone"]["auth_url"]:
        return False
    if doc.get("swflows_digest") != code_digest():
        return False
    records = load_records()
    if set(records) != {f"mistral-{role}" for role in ROLES}:
        return False
    if not all(r.alive() for r in records.values()):
        return False
    try:
        return _api_answers(records["mistral-api"].port)
    except OSError:
        return False


def down() -> list[str]:
    killed = stop(load_records())
    RECORDS.unlink(missing_ok=True)
    MISTRAL_JSON.unlink(missing_ok=True)
    return killed


def up(cloud: dict[str, Any]) -> dict[str, Any]:
    """Start Mistral from scratch (stopping a previous one); its document."""
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    timings["install"] = ensure_venv() or 0.0
    down()
    shutil.rmtree(STATE, ignore_errors=True)
    (STATE / "locks").mkdir(parents=True)
    t1 = time.monotonic()
    (api_port,) = free_ports(1)
    password = secrets.token_urlsafe(18)
    register(cloud, password, api_port)
    vhost = make_vhost()
    urls = make_databases()
    secret_key = subprocess.run(
        [
            str(python()),
            "-c",
            "from cryptography import fernet;"
            " print(fernet.Fernet.generate_key().decode())",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    layout.write_private(
        CONF,
        mistral_conf(
            cloud,
            password=password,
            vhost=vhost,
            database_url=urls["mistral"],
            api_port=api_port,
        ),
    )
    layout.write_private(SWFLOWS_CONF, swflows_conf(cloud, urls["swflows"], secret_key))
    ks = cloud["keystone"]
    trustee = keystone.ensure_trustee(ks["auth_url"], ks["admin"]["password"])
    layout.write_private(
        TRUSTS_CONF, swflows_conf(cloud, urls["swflows"], secret_key, trustee)
    )
    layout.write_private(
        CONDUCTED_CONF,
        swflows_conf(cloud, urls["swflows"], secret_key, conducted=True),
    )
    manage = [str(VENV / "bin" / "mistral-db-manage"), "--config-file", str(CONF)]
    for command in (["upgrade", "head"], ["populate"]):
        res = subprocess.run([*manage, *command], capture_output=True, text=True)
        if res.returncode != 0:
            raise DevcloudError(
                f"mistral-db-manage {' '.join(command)} failed:\n{res.stderr[-2000:]}"
            )
    timings["prepare"] = time.monotonic() - t1
    digest = code_digest()  # before the servers import it
    records: dict[str, Record] = {}
    try:
        checks = [_logged_start(role, records) for role in ("engine", "executor")]
        api = spawn("api", api_port, records)
        checks.append(Check("mistral-api", [api], lambda: _api_answers(api_port)))
        wait_ready(checks, READY_TIMEOUT)
    except BaseException:
        stop(records)
        raise
    timings["start"] = time.monotonic() - t0 - timings["install"] - timings["prepare"]
    doc = {
        "url": f"http://127.0.0.1:{api_port}/v2",
        "auth_url": cloud["keystone"]["auth_url"],
        "conf": str(CONF),
        "swflows_conf": str(SWFLOWS_CONF),
        "swflows_trusts_conf": str(TRUSTS_CONF),
        "swflows_conducted_conf": str(CONDUCTED_CONF),
        "service_user": {
            "username": SERVICE_USER,
            "password": password,
            "project_name": "service",
            "user_domain_id": "default",
            "project_domain_id": "default",
        },
        "database_url": urls["swflows"],
        "mistral_database_url": urls["mistral"],
        "vhost": vhost,
        "executor_argv": server_argv("executor"),
        "swflows_digest": digest,
        "logs": {name: rec.log for name, rec in records.items()},
        "timings": timings,
    }
    layout.write_private_json(MISTRAL_JSON, doc)
    return doc


__all__ = ["MISTRAL_JSON", "down", "is_up", "start_executor_again", "up"]
