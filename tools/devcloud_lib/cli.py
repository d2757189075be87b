"""``tools/devcloud up|down|status|env``: the dev cloud's command line."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from . import (
    heat,
    httpjson,
    install,
    keystone,
    layout,
    mistral,
    swflowsconf,
    swift,
    zaqar,
    zookeeper,
)
from .context import SERVERS, Cloud
from .procs import (
    DevcloudError,
    Step,
    free_ports,
    free_udp_port,
    load_records,
    rss_kib,
    server_env,
    stop,
    wait_ready,
)
from .small_servers import (
    memcached_version,
    redis_ping,
    start_memcached,
    start_nova,
    start_redis,
)

READY_TIMEOUT = 180.0
#: how long ``status`` waits for a live server that does not answer
STATUS_PATIENCE = 30.0
#: the shape of cloud.json (2: Swift behind Keystone; 3: Swift's access
#: lines sent to swift.access_log); a cloud that another shape's
#: tools/devcloud started is not "up" for this one, and up restarts it
CLOUD_VERSION = 3


# ------------------------------------------------------------------ health


def _answers(path: str, status: int) -> Callable[[int], bool]:
    def check(port: int) -> bool:
        url = f"http://127.0.0.1:{port}{path}"
        return httpjson.call("GET", url, timeout=5).status == status

    return check


# "Is it answering", per server, by port only (no credentials needed).
HEALTH: dict[str, Callable[[int], bool]] = {
    "redis": redis_ping,
    "memcached": memcached_version,
    "zookeeper": zookeeper.ruok,
    "swift-account": _answers("/healthcheck", 200),
    "swift-container": _answers("/healthcheck", 200),
    "swift-object": _answers("/healthcheck", 200),
    "swift-proxy": _answers("/healthcheck", 200),
    "keystone": _answers("/v3", 200),
    "zaqar": _answers("/", 300),  # the multiple-choice version list
    "nova": _answers("/", 200),
}


def health() -> dict[str, str]:
    """Each server's state: "ok", "down" or "not answering"."""
    records = load_records()
    states = {}
    for name in SERVERS:
        rec = records.get(name)
        if rec is None or not rec.alive():
            states[name] = "down"
            continue
        try:
            states[name] = "ok" if HEALTH[name](rec.port) else "not answering"
        except OSError:
            states[name] = "not answering"
    return states


def settled_health(
    patience: float,
    *,
    sleep: Callable[[float], object] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, str]:
    """:func:`health`, asked again for up to ``patience`` seconds while a
    server whose process is alive does not answer and none is down: on a
    loaded machine a server answers late, and that is no reason to restart
    the cloud under every run using it (the restart moves every port)."""
    deadline = clock() + patience
    states = health()
    told = False
    while (
        "not answering" in states.values()
        and "down" not in states.values()
        and clock() < deadline
    ):
        if not told:
            slow = ", ".join(k for k, v in states.items() if v != "ok")
            print(f"waiting up to {patience:.0f} s for {slow} to answer", flush=True)
            told = True
        sleep(2.0)
        states = health()
    return states


def is_current() -> bool:
    """Whether cloud.json is of this tools/devcloud's shape."""
    try:
        doc = json.loads(layout.CLOUD_JSON.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("version") == CLOUD_VERSION


def is_up(states: dict[str, str]) -> bool:
    return set(states.values()) == {"ok"} and is_current()


def print_status(states: dict[str, str]) -> None:
    records = load_records()
    for name, state in states.items():
        rec = records.get(name)
        if rec is None:
            print(f"  {name:16} {state}")
            continue
        rss = rss_kib(rec.pid) // 1024 if state != "down" else 0
        print(
            f"  {name:16} {state:14} pid {rec.pid:<7} 127.0.0.1:{rec.port:<5}"
            f" rss {rss:4} MiB"
        )


# ------------------------------------------------------------------- start


def start_cloud(timings: dict[str, float]) -> Cloud:
    """Start every server on fresh ports from a wiped state directory.
    Stops what it started if anything fails."""
    shutil.rmtree(layout.STATE, ignore_errors=True)
    layout.LOGS.mkdir(parents=True)
    cloud = Cloud(dict(zip(SERVERS, free_ports(len(SERVERS)), strict=True)))
    cloud.access_log_port = free_udp_port()
    t0 = time.monotonic()
    steps: list[Step] = []
    try:
        checks = [start_redis(cloud), start_memcached(cloud), zookeeper.start(cloud)]
        for service in (swift, zaqar, keystone):
            service.configure(cloud)
        backend_ports = [str(cloud.ports["swift-" + k]) for k in swift.BACKENDS]
        prepare = Step(
            "prepare-rings-and-tables",
            [
                str(layout.venv_bin("python")),
                str(layout.PREPARE),
                str(swift.etc_dir(cloud)),
                *backend_ports,
                zaqar.db_uri(cloud),
            ],
            server_env(),
        )
        keystone_init = Step("keystone-init", *keystone.init_command(cloud))
        steps += [prepare, keystone_init]
        prepare.finish()
        checks += [swift.start(cloud), zaqar.start(cloud)]
        keystone_init.finish()
        timings["keystone init"] = time.monotonic() - t0
        # Keystone's server refuses to start without its key repositories.
        wait_ready([keystone.start(cloud)], READY_TIMEOUT)
        keystone.register(cloud)
        timings["keystone ready"] = time.monotonic() - t0
        checks.append(start_nova(cloud))
        ready_at: dict[str, float] = {}
        wait_ready(checks, READY_TIMEOUT, ready_at)
        for name in ("swift", "zaqar", "nova"):
            timings[f"{name} ready"] = ready_at[name] - t0
    except BaseException:
        for step in steps:
            step.kill()
        stop(cloud.records)
        layout.RECORDS.unlink(missing_ok=True)
        raise
    return cloud


def cloud_document(cloud: Cloud) -> dict[str, Any]:
    """The contents of cloud.json: every endpoint and credential."""

    def user(name: str) -> dict[str, str]:
        return {
            "username": name,
            "password": cloud.password(name),
            "project_name": name,
            "user_domain_id": "default",
            "project_domain_id": "default",
        }

    proxy = cloud.url("swift-proxy")
    return {
        "version": CLOUD_VERSION,
        "keystone": {
            "auth_url": cloud.auth_url,
            "region": keystone.REGION,
            "admin": user("admin"),
            "demo": user("demo"),
            # a second project with its own member user (project scoping)
            "demo2": user("demo2"),
            # swflows' own user, trustee of callers' trusts (no project)
            "trustee": {
                "username": keystone.TRUSTEE,
                "password": keystone.trustee_password(cloud.password("admin")),
                "user_domain_id": "default",
            },
            "stack_user_domain_id": cloud.ids["stack_user_domain"],
            "stack_user_domain_name": keystone.STACK_DOMAIN,
            "stack_domain_admin": keystone.STACK_DOMAIN_ADMIN,
            "stack_domain_admin_password": cloud.password(keystone.STACK_DOMAIN_ADMIN),
            "stack_user_role": keystone.STACK_USER_ROLE,
        },
        "swift": {
            "proxy_url": proxy,
            # in the catalog; each Keystone project's account, by user
            "service_type": "object-store",
            # the proxy's access lines, one syslog datagram per request
            # (method, path, status, user agent, start and end times)
            "access_log": {"host": "127.0.0.1", "port": cloud.access_log_port},
            "accounts": {
                "demo": swift.account_url(cloud, cloud.ids["demo_project"]),
                "admin": swift.account_url(cloud, cloud.ids["admin_project"]),
            },
            # Swift's own auth, for tests of [object_store] auth_version = v1
            "tempauth": {
                "auth_url": proxy + "/auth/v1.0",
                "user": swift.TEMPAUTH_USER,
                "key": cloud.password(swift.TEMPAUTH_USER),
            },
        },
        "zaqar": {"url": cloud.url("zaqar")},
        "nova": {
            "url": cloud.url("nova") + "/v2.1",
            "control_url": cloud.url("nova") + "/_standin",
        },
        "redis": {"host": "127.0.0.1", "port": cloud.ports["redis"]},
        "zookeeper": {"host": "127.0.0.1", "port": cloud.ports["zookeeper"]},
        "logs": {name: cloud.records[name].log for name in SERVERS},
    }


# ---------------------------------------------------------------- commands


@contextlib.contextmanager
def exclusive() -> Iterator[None]:
    """One up or down at a time (tests may run up from several workers)."""
    layout.BASE.mkdir(exist_ok=True)
    with open(layout.LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def cmd_up() -> int:
    with exclusive():
        if load_records():
            states = settled_health(READY_TIMEOUT)
            if is_up(states):
                print(f"dev cloud already up ({layout.CLOUD_JSON})")
                print_status(states)
                ensure_swflows()
                swflowsconf.write_shell_files(json.loads(layout.CLOUD_JSON.read_text()))
                return 0
            if set(states.values()) == {"ok"}:
                print("dev cloud started by another version; restarting it")
            else:
                print("dev cloud partly down; restarting it cleanly")
            print_status(states)
            stop(load_records())
            layout.RECORDS.unlink(missing_ok=True)
        layout.CLOUD_JSON.unlink(missing_ok=True)
        heat.down()  # its service user and endpoint go with the old Keystone
        mistral.down()

        spent = install.ensure()
        state = "up to date" if spent is None else f"installed in {spent:.1f} s"
        print(f"install: {state} ({layout.VENV})")
        spent = zookeeper.ensure()
        state = "present" if spent is None else f"installed in {spent:.1f} s"
        print(f"zookeeper: {state} ({zookeeper.JAR})")
        ensure_swflows()
        timings: dict[str, float] = {}
        t0 = time.monotonic()
        cloud = start_cloud(timings)
        doc = cloud_document(cloud)
        layout.write_private_json(layout.CLOUD_JSON, doc)
        swflowsconf.write_shell_files(doc)
        timings["all ready"] = time.monotonic() - t0
        print("start: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
        print(f"keystone  {doc['keystone']['auth_url']}")
        print(f"swift     {doc['swift']['proxy_url']} (object-store in the catalog)")
        print(f"zaqar     {doc['zaqar']['url']}")
        print(f"nova      {doc['nova']['url']} (stand-in)")
        print(f"redis     127.0.0.1:{doc['redis']['port']}")
        print(f"zookeeper 127.0.0.1:{doc['zookeeper']['port']}")
        print(f"SWFLOWS_DEVCLOUD={layout.CLOUD_JSON}")
        print(f'a shell for it: eval "$(tools/devcloud env)" ({layout.ENV_SH})')
    return 0


def ensure_swflows() -> None:
    spent = install.ensure_swflows()
    state = "up to date" if spent is None else f"installed in {spent:.1f} s"
    print(f"swflows: {state} ({layout.SWFLOWS_VENV})")


def cmd_heat_up() -> int:
    """Start Heat (afresh) on the running dev cloud."""
    with exclusive():
        if not is_up(settled_health(READY_TIMEOUT)):
            raise DevcloudError("the dev cloud is not up: run tools/devcloud up")
        cloud = json.loads(layout.CLOUD_JSON.read_text())
        doc = heat.up(cloud)
    print("heat: " + ", ".join(f"{k} {v:.1f} s" for k, v in doc["timings"].items()))
    print(f"heat-api  {doc['url']} ({heat.HEAT_JSON})")
    return 0


def cmd_heat_down() -> int:
    with exclusive():
        heat.down()
    print("heat stopped")
    return 0


def cmd_heat_engine_start() -> int:
    with exclusive():
        started = heat.start_engine_again()
    print("heat-engine started" if started else "heat-engine was running")
    return 0


def cmd_heat_status() -> int:
    up = heat.is_up()
    print("heat up" if up else "heat down")
    return 0 if up else 1


def cmd_mistral_up() -> int:
    """Start Mistral (afresh) on the running dev cloud."""
    with exclusive():
        if not is_up(settled_health(READY_TIMEOUT)):
            raise DevcloudError("the dev cloud is not up: run tools/devcloud up")
        cloud = json.loads(layout.CLOUD_JSON.read_text())
        doc = mistral.up(cloud)
    print("mistral: " + ", ".join(f"{k} {v:.1f} s" for k, v in doc["timings"].items()))
    print(f"mistral-api  {doc['url']} ({mistral.MISTRAL_JSON})")
    return 0


def cmd_mistral_down() -> int:
    with exclusive():
        mistral.down()
    print("mistral stopped")
    return 0


def cmd_mistral_executor_start() -> int:
    with exclusive():
        started = mistral.start_executor_again()
    print("mistral-executor started" if started else "mistral-executor was running")
    return 0


def cmd_mistral_status() -> int:
    up = mistral.is_up()
    print("mistral up" if up else "mistral down")
    return 0 if up else 1


def cmd_down() -> int:
    with exclusive():
        heat.down()
        mistral.down()
        records = load_records()
        t0 = time.monotonic()
        killed = stop(records)
        layout.RECORDS.unlink(missing_ok=True)
        layout.CLOUD_JSON.unlink(missing_ok=True)
        failed = keystone.drop_database() if records else None
    if failed:
        print(f"Keystone's database was not dropped: {failed}")
    if not records:
        print("dev cloud was not running")
        return 0
    print(f"dev cloud stopped in {time.monotonic() - t0:.1f} s")
    if killed:
        print("killed after the timeout: " + ", ".join(killed))
    return 0


def cmd_status() -> int:
    states = settled_health(STATUS_PATIENCE)
    if is_up(states):
        print(f"dev cloud up ({layout.CLOUD_JSON})")
    elif set(states.values()) == {"ok"}:
        print("dev cloud up, but started by another version of tools/devcloud:")
        print("run tools/devcloud up to restart it")
    else:
        print("dev cloud NOT healthy" if load_records() else "dev cloud down")
    if load_records():
        print_status(states)
    return 0 if is_up(states) else 1


def cmd_env() -> int:
    """What to source for a shell whose ``swflows`` works against the cloud."""
    if not layout.ENV_SH.exists() or not install.swflows_is_current():
        raise DevcloudError(
            "the dev cloud was never started here: run tools/devcloud up"
        )
    for line in swflowsconf.env_lines():
        print(line)
    if not is_up(health()):
        print(
            "devcloud: warning: the dev cloud is not up: run tools/devcloud up",
            file=sys.stderr,
        )
    return 0


COMMANDS = {
    "up": (cmd_up, "install if needed, then start every server (no-op if up)"),
    "down": (cmd_down, "stop every recorded server"),
    "status": (cmd_status, "show each server; exit 0 only if all are healthy"),
    "heat-up": (
        cmd_heat_up,
        "install Heat (first time), then start heat-engine and heat-api "
        "afresh on the running cloud; writes .devcloud/heat.json",
    ),
    "heat-down": (cmd_heat_down, "stop heat-engine and heat-api"),
    "heat-status": (cmd_heat_status, "exit 0 only if Heat answers"),
    "heat-engine-start": (
        cmd_heat_engine_start,
        "start heat-engine again if it is not running (after a crash)",
    ),
    "mistral-up": (
        cmd_mistral_up,
        "install Mistral (first time), then start mistral-engine, "
        "mistral-executor and mistral-api afresh on the running cloud; "
        "writes .devcloud/mistral.json",
    ),
    "mistral-down": (cmd_mistral_down, "stop Mistral's servers"),
    "mistral-status": (cmd_mistral_status, "exit 0 only if Mistral answers"),
    "mistral-executor-start": (
        cmd_mistral_executor_start,
        "start mistral-executor again if it is not running (after a crash)",
    ),
    "env": (
        cmd_env,
        "print the exports of a shell where swflows and swflows-agent work "
        'against the dev cloud: eval "$(tools/devcloud env)"',
    ),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/devcloud",
        description="Keystone, Swift, Zaqar, Redis, ZooKeeper and a Nova stand-in on "
        "127.0.0.1 for swflows' functional tests. Endpoints and credentials: "
        f"{layout.CLOUD_JSON}.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (_, text) in COMMANDS.items():
        sub.add_parser(name, help=text, description=text)
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    try:
        return COMMANDS[args.command][0]()
    except DevcloudError as err:
        print(f"devcloud: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("devcloud: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. "tools/devcloud status | head -1"
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
