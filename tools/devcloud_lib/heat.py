"""A real OpenStack Heat (heat-engine and heat-api) on the dev cloud.

``tools/devcloud heat-up`` installs openstack-heat from ``tools/heat-lock.txt``
into ``.devcloud/heat`` (swflows from this tree beside it, whose plugin
directory is in ``plugin_dirs``), then starts heat-engine and heat-api on
free ports against the dev cloud's Keystone (a ``heat`` service user, the
``orchestration`` endpoint in the catalog), this machine's RabbitMQ (a vhost
of its own) and PostgreSQL (databases of its own, made afresh at each
start).  ``.devcloud/heat.json`` says where everything is.

heat-engine runs one worker, as the tests want it (a test that kills the
engine kills one process); ``SWFLOWS_HEAT_ENGINE_WORKERS`` asks for more
(the bench against Heat runs Heat's own default, 4 on a machine of at most
4 CPUs), whose swflows runners then elect one signal watcher on the dev
cloud's Redis (``[swflows] coordination_url``).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from . import heat_image, httpjson, layout, service_bed
from .procs import (
    Check,
    DevcloudError,
    Record,
    Started,
    free_ports,
    port_in_use,
    start_ticks,
    stop,
    tail,
    wait_ready,
)

#: the environment variable naming heat-engine's workers
ENGINE_WORKERS_ENV = "SWFLOWS_HEAT_ENGINE_WORKERS"
LOCK_FILE = layout.TOOLS / "heat-lock.txt"
VENV = layout.BASE / "heat"
STAMP = VENV / "heat-lock.sha256"
STATE = layout.BASE / "heat-state"
RECORDS = STATE / "servers.json"
HEAT_JSON = layout.BASE / "heat.json"

SERVICE_USER = "heat"
RABBIT = os.environ.get("SWFLOWS_HEAT_RABBIT", "127.0.0.1:5672")
PG = os.environ.get("SWFLOWS_HEAT_PG", "postgresql+psycopg2://postgres@127.0.0.1:5432")
READY_TIMEOUT = 120.0


def python() -> Path:
    return VENV / "bin" / "python"


# ------------------------------------------------------------------ install


def ensure_venv() -> float | None:
    """Install Heat (and swflows from this tree); seconds spent, None if current."""
    return service_bed.ensure_venv(VENV, STAMP, LOCK_FILE, "Heat")


# -------------------------------------------------------------- resources


def databases() -> dict[str, str]:
    """Heat's database and swflows' (the plugin's), by role."""
    tag = layout.clone_tag()
    return {"heat": f"heat_{tag}", "swflows": f"heat_swflows_{tag}"}


def make_databases() -> dict[str, str]:
    return service_bed.make_databases(python(), PG, databases())


def make_vhost() -> str:
    return service_bed.make_vhost("heat")


def register(cloud: dict[str, Any], password: str, api_port: int) -> None:
    """The ``heat`` service user (admin of project ``service``) and the
    orchestration endpoints, replacing those of a previous start."""
    api = service_bed.register(
        cloud,
        user=SERVICE_USER,
        password=password,
        service_type="orchestration",
        service_name="heat",
        url=f"http://127.0.0.1:{api_port}/v1/%(tenant_id)s",
    )
    if not any(r["name"] == "heat_stack_owner" for r in api("GET", "/roles")["roles"]):
        api.create("role", name="heat_stack_owner")


# ----------------------------------------------------------------- config


def plugin_dir() -> str:
    res = subprocess.run(
        [
            str(python()),
            "-c",
            "import swflows.embedding.heat_plugins as p; print(p.PATH)",
        ],
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        raise DevcloudError(f"swflows' Heat plugin directory: {res.stderr[-1500:]}")
    return res.stdout.strip()


#: heat.conf's ``rpc_response_timeout``, seconds
RPC_RESPONSE_TIMEOUT = 300
#: (max_pool_size, max_overflow) of Heat's own database, per process
HEAT_POOL = (5, 5)
#: the same of swflows' store, per heat-engine worker
PLUGIN_POOL = (3, 2)


def heat_conf(
    cloud: dict[str, Any],
    *,
    password: str,
    vhost: str,
    urls: dict[str, str],
    secret_key: str,
    api_port: int,
    engine_workers: int = 1,
) -> str:
    ks = cloud["keystone"]
    auth_url = ks["auth_url"]
    service_auth = (
        f"auth_type = password\nauth_url = {auth_url}\nusername = {SERVICE_USER}\n"
        f"password = {password}\nuser_domain_id = default\n"
    )
    # several workers elect one watcher among their runners, as a deployment
    # of more than one heat-engine would (one alone needs no election)
    coordination = (
        f"coordination_url = redis://127.0.0.1:{cloud['redis']['port']}?db=5\n"
        if engine_workers > 1
        else ""
    )
    return f"""\
[DEFAULT]
transport_url = rabbit://guest:guest@{RABBIT}/{vhost}
host = swflows-heat-{layout.clone_tag()}
plugin_dirs = {plugin_dir()}
num_engine_workers = {engine_workers}
region_name_for_services = {ks["region"]}
stack_user_domain_id = {ks["stack_user_domain_id"]}
stack_domain_admin = {ks["stack_domain_admin"]}
stack_domain_admin_password = {ks["stack_domain_admin_password"]}
heat_metadata_server_url = http://127.0.0.1:{api_port}
heat_waitcondition_server_url = http://127.0.0.1:{api_port}/v1/waitcondition
periodic_interval = 5
use_stderr = true
debug = false
# a stack of a hundred deployments keeps every engine worker busy past
# the 60 s default, and a deployment's own call to its engine then fails
rpc_response_timeout = {RPC_RESPONSE_TIMEOUT}

[database]
connection = {urls["heat"]}
# each heat-engine worker and heat-api: at most 10 connections (oslo.db's
# default allows 55), so Heat's and swflows' pools fit the dev cloud's
# PostgreSQL (max_connections 100) together
max_pool_size = {HEAT_POOL[0]}
max_overflow = {HEAT_POOL[1]}

[paste_deploy]
api_paste_config = {VENV / "etc" / "heat" / "api-paste.ini"}

[oslo_concurrency]
lock_path = {STATE / "locks"}

[keystone_authtoken]
www_authenticate_uri = {auth_url}
{service_auth}project_name = service
project_domain_id = default

[trustee]
{service_auth}
[clients_keystone]
auth_uri = {auth_url.rsplit("/v3", 1)[0]}

[ec2authtoken]
auth_uri = {auth_url}

[swflows]
database_url = {urls["swflows"]}
secret_key = {secret_key}
database_max_pool_size = {PLUGIN_POOL[0]}
database_max_overflow = {PLUGIN_POOL[1]}
{coordination}
"""


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


def spawn(name: str, argv: list[str], port: int, records: dict[str, Record]) -> Started:
    if port_in_use(port):
        raise DevcloudError(f"{name}: port {port} is already in use")
    log = STATE / f"{name}.log"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OS_", "PYTHON", "VIRTUAL_ENV", "SWFLOWS_"))
    }
    env["PYTHONUNBUFFERED"] = "1"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv,
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


def engine_argv() -> list[str]:
    return [
        str(VENV / "bin" / "heat-engine"),
        "--config-file",
        str(STATE / "heat.conf"),
    ]


def start_engine(records: dict[str, Record]) -> Started:
    """heat-engine (again, after a test killed it); ready once it logs that
    its workers started."""
    return spawn("heat-engine", engine_argv(), 0, records)


def _engine_check(engine: Started) -> Check:
    log = Path(engine.record.log)
    since = log.stat().st_size if log.exists() else 0

    def listening() -> bool:
        with open(log, "rb") as f:
            f.seek(since)
            return b"Starting engine_worker" in f.read()

    return Check("heat-engine", [engine], listening)


def start_engine_again() -> bool:
    """Start heat-engine if it is not running (a test killed it); True if
    it had to be started."""
    records = load_records()
    if "heat-api" not in records:
        raise DevcloudError("Heat is not running: run tools/devcloud heat-up")
    old = records.get("heat-engine")
    if old is not None and old.alive():
        return False
    if old is not None:
        stop({"heat-engine": old})  # its workers, if they outlived it
    engine = start_engine(records)
    wait_ready([_engine_check(engine)], READY_TIMEOUT)
    return True


def is_up() -> bool:
    """Heat runs, registered in the running dev cloud's Keystone."""
    try:
        doc = json.loads(HEAT_JSON.read_text())
        cloud = json.loads(layout.CLOUD_JSON.read_text())
    except (OSError, ValueError):
        return False
    if doc.get("auth_url") != cloud["keystone"]["auth_url"]:
        return False
    records = load_records()
    if set(records) != {"heat-engine", "heat-api"}:
        return False
    if not all(r.alive() for r in records.values()):
        return False
    try:
        resp = httpjson.call(
            "GET", f"http://127.0.0.1:{records['heat-api'].port}/", timeout=5
        )
    except OSError:
        return False
    return resp.status in (200, 300)


def down() -> list[str]:
    killed = stop(load_records())
    RECORDS.unlink(missing_ok=True)
    HEAT_JSON.unlink(missing_ok=True)
    return killed


def engine_workers() -> int:
    """heat-engine's workers: ``SWFLOWS_HEAT_ENGINE_WORKERS``, or 1."""
    text = os.environ.get(ENGINE_WORKERS_ENV, "").strip() or "1"
    try:
        workers = int(text)
    except ValueError:
        workers = 0
    if workers < 1:
        raise DevcloudError(f"{ENGINE_WORKERS_ENV}={text!r}: a whole number >= 1")
    return workers


def up(cloud: dict[str, Any]) -> dict[str, Any]:
    """Start Heat from scratch (stopping a previous one); its document."""
    workers = engine_workers()
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    spent = ensure_venv()
    timings["install"] = spent or 0.0
    # the image the Nova stand-in boots for servers with Heat's user data
    timings["agents image"] = heat_image.ensure() or 0.0
    down()
    shutil.rmtree(STATE, ignore_errors=True)
    (STATE / "locks").mkdir(parents=True)
    t1 = time.monotonic()
    (api_port,) = free_ports(1)
    password = secrets.token_urlsafe(18)
    register(cloud, password, api_port)
    vhost = make_vhost()
    urls = make_databases()
    from_key = subprocess.run(
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
    conf = STATE / "heat.conf"
    layout.write_private(
        conf,
        heat_conf(
            cloud,
            password=password,
            vhost=vhost,
            urls=urls,
            secret_key=from_key,
            api_port=api_port,
            engine_workers=workers,
        ),
    )
    sync = subprocess.run(
        [str(VENV / "bin" / "heat-manage"), "--config-file", str(conf), "db_sync"],
        capture_output=True,
        text=True,
    )
    if sync.returncode != 0:
        raise DevcloudError(f"heat-manage db_sync failed:\n{sync.stderr[-2000:]}")
    timings["prepare"] = time.monotonic() - t1
    records: dict[str, Record] = {}
    try:
        log = STATE / "heat-engine.log"
        log.touch()
        engine = start_engine(records)
        check = _engine_check(engine)
        api = spawn(
            "heat-api",
            [
                str(VENV / "bin" / "heat-wsgi-api"),
                "--port",
                str(api_port),
                "--host",
                "127.0.0.1",
                "--",
                "--config-file",
                str(conf),
            ],
            api_port,
            records,
        )

        def probe() -> bool:
            url = f"http://127.0.0.1:{api_port}/"
            return httpjson.call("GET", url, timeout=5).status in (200, 300)

        wait_ready([Check("heat-api", [api], probe), check], READY_TIMEOUT)
    except BaseException:
        stop(records)
        raise
    timings["start"] = time.monotonic() - t0 - sum(timings.values())
    doc = {
        "url": f"http://127.0.0.1:{api_port}/v1",
        "auth_url": cloud["keystone"]["auth_url"],
        "conf": str(conf),
        "service_user": {
            "username": SERVICE_USER,
            "password": password,
            "project_name": "service",
            "user_domain_id": "default",
            "project_domain_id": "default",
        },
        "database_url": urls["swflows"],
        "heat_database_url": urls["heat"],
        "secret_key": from_key,
        "vhost": vhost,
        "engine_argv": engine_argv(),
        "engine_workers": workers,
        "logs": {name: rec.log for name, rec in records.items()},
        "timings": timings,
    }
    layout.write_private_json(HEAT_JSON, doc)
    return doc


__all__ = ["HEAT_JSON", "down", "is_up", "tail", "up"]
