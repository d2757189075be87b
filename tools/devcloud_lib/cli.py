"""``tools/devcloud up|down|status|env``: the dev cloud's command line."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterator

from . import httpjson, install, keystone, layout, swift, zaqar
from .context import SERVERS, Cloud
from .procs import (DevcloudError, Step, free_ports, load_records, rss_kib,
                    server_env, stop, wait_ready)
from .small_servers import redis_ping, start_nova, start_redis

READY_TIMEOUT = 180.0


# ------------------------------------------------------------------ health

def _answers(path: str, status: int) -> Callable[[int], bool]:
    def check(port: int) -> bool:
        return httpjson.call("GET", "http://127.0.0.1:%d%s" % (port, path),
                             timeout=5).status == status
    return check


# A quick "is it answering" per server, by port only (no credentials).
HEALTH: dict[str, Callable[[int], bool]] = {
    "redis": redis_ping,
    "swift-account": _answers("/healthcheck", 200),
    "swift-container": _answers("/healthcheck", 200),
    "swift-object": _answers("/healthcheck", 200),
    "swift-proxy": _answers("/healthcheck", 200),
    "keystone": _answers("/v3", 200),
    "zaqar": _answers("/", 300),        # the multiple-choice version list
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


def print_status(states: dict[str, str]) -> None:
    records = load_records()
    for name, state in states.items():
        rec = records.get(name)
        if rec is None:
            print("  %-16s %s" % (name, state))
            continue
        print("  %-16s %-14s pid %-7d 127.0.0.1:%-5d rss %4d MiB" % (
            name, state, rec.pid, rec.port,
            rss_kib(rec.pid) // 1024 if state != "down" else 0))


# ------------------------------------------------------------------ start

def start_cloud(timings: dict[str, float]) -> Cloud:
    """Start every server on fresh ports from a wiped state directory and
    return what cloud.json is made of. Stops what it started on failure."""
    shutil.rmtree(layout.STATE, ignore_errors=True)
    layout.LOGS.mkdir(parents=True)
    cloud = Cloud(dict(zip(SERVERS, free_ports(len(SERVERS)))), records={})
    t0 = time.monotonic()
    steps: list[Step] = []
    try:
        checks = [start_redis(cloud)]
        for service in (swift, zaqar, keystone):
            service.configure(cloud)
        prepare = Step("prepare-rings-and-tables", [
            str(layout.venv_bin("python")), str(layout.PREPARE),
            str(swift.etc_dir(cloud)),
            *(str(cloud.ports["swift-" + k]) for k in swift.BACKENDS),
            zaqar.db_uri(cloud)], server_env())
        steps.append(prepare)
        steps.append(Step("keystone-init", *keystone.init_command(cloud)))
        prepare.finish()
        checks += [swift.start(cloud), zaqar.start(cloud)]
        steps[-1].finish()
        timings["keystone init"] = time.monotonic() - t0
        # Keystone's server refuses to start without its key repositories.
        wait_ready([keystone.start(cloud)], READY_TIMEOUT)
        keystone.register(cloud)
        timings["keystone ready"] = time.monotonic() - t0
        checks.append(start_nova(cloud))
        wait_ready(checks, READY_TIMEOUT)
    except BaseException:
        for step in steps:
            step.kill()
        stop(cloud.records)
        layout.RECORDS.unlink(missing_ok=True)
        raise
    return cloud


def cloud_document(cloud: Cloud) -> dict:
    def user(name: str) -> dict[str, str]:
        return {"username": name, "password": cloud.password(name),
                "project_name": name, "user_domain_id": "default",
                "project_domain_id": "default"}

    proxy = cloud.url("swift-proxy")
    (user1, key1), (user2, key2) = swift.USERS.items()
    return {
        "keystone": {
            "auth_url": cloud.auth_url, "region": keystone.REGION,
            "admin": user("admin"), "demo": user("demo"),
            "stack_user_domain_id": cloud.ids["stack_user_domain"],
            "stack_user_domain_name": keystone.STACK_DOMAIN,
            "stack_domain_admin": keystone.STACK_DOMAIN_ADMIN,
            "stack_domain_admin_password":
                cloud.password(keystone.STACK_DOMAIN_ADMIN),
            "stack_user_role": keystone.STACK_USER_ROLE},
        "swift": {"auth_url": proxy + "/auth/v1.0", "user": user1,
                  "key": key1, "user2": user2, "key2": key2,
                  "proxy_url": proxy},
        "zaqar": {"url": cloud.url("zaqar")},
        "nova": {"url": cloud.url("nova") + "/v2.1",
                 "control_url": cloud.url("nova") + "/_standin"},
        "redis": {"host": "127.0.0.1", "port": cloud.ports["redis"]},
        "logs": {name: cloud.log(name) for name in SERVERS},
    }


def write_private_json(path: os.PathLike, doc: dict) -> None:
    tmp = "%s.tmp" % path
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


# --------------------------------------------------------------- commands

@contextlib.contextmanager
def exclusive() -> Iterator[None]:
    """One up or down at a time (tests may call up from several workers)."""
    layout.BASE.mkdir(exist_ok=True)
    with open(layout.LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def cmd_up() -> int:
    with exclusive():
        if load_records():
            states = health()
            if set(states.values()) == {"ok"} and layout.CLOUD_JSON.exists():
                print("dev cloud already up (%s)" % layout.CLOUD_JSON)
                print_status(states)
                return 0
            print("dev cloud partly down; restarting it cleanly")
            print_status(states)
            stop(load_records())
            layout.RECORDS.unlink(missing_ok=True)
        layout.CLOUD_JSON.unlink(missing_ok=True)

        spent = install.ensure()
        print("install: %s" % ("%.1f s" % spent if spent is not None
                               else "up to date (%s)" % layout.VENV))
        timings: dict[str, float] = {}
        t0 = time.monotonic()
        cloud = start_cloud(timings)
        write_private_json(layout.CLOUD_JSON, cloud_document(cloud))
        timings["all ready"] = time.monotonic() - t0
        print("start: " + ", ".join("%s %.1f s" % kv for kv in timings.items()))
        doc = json.loads(layout.CLOUD_JSON.read_text())
        print("keystone  %s" % doc["keystone"]["auth_url"])
        print("swift     %s" % doc["swift"]["auth_url"])
        print("zaqar     %s" % doc["zaqar"]["url"])
        print("nova      %s (stand-in)" % doc["nova"]["url"])
        print("redis     127.0.0.1:%d" % doc["redis"]["port"])
        print("SWFLOWS_DEVCLOUD=%s" % layout.CLOUD_JSON)
    return 0


def cmd_down() -> int:
    with exclusive():
        records = load_records()
        t0 = time.monotonic()
        killed = stop(records)
        layout.RECORDS.unlink(missing_ok=True)
        layout.CLOUD_JSON.unlink(missing_ok=True)
    if records:
        print("dev cloud stopped in %.1f s%s" % (
            time.monotonic() - t0,
            "; killed after timeout: " + ", ".join(killed) if killed else ""))
    else:
        print("dev cloud was not running")
    return 0


def cmd_status() -> int:
    states = health()
    healthy = set(states.values()) == {"ok"} and layout.CLOUD_JSON.exists()
    print("dev cloud %s" % ("up (%s)" % layout.CLOUD_JSON if healthy else
                            "NOT healthy" if load_records() else "down"))
    if load_records():
        print_status(states)
    return 0 if healthy else 1


def cmd_env() -> int:
    print("SWFLOWS_DEVCLOUD=%s" % shlex.quote(str(layout.CLOUD_JSON)))
    return 0


COMMANDS = {
    "up": (cmd_up, "install if needed, then start every server (a no-op "
                   "when all are up)"),
    "down": (cmd_down, "stop every recorded server"),
    "status": (cmd_status, "show each server; exit 0 only if all healthy"),
    "env": (cmd_env, "print SWFLOWS_DEVCLOUD=<path of cloud.json>"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/devcloud",
        description="Keystone, Swift, Zaqar, Redis and a Nova stand-in on "
                    "127.0.0.1 for swflows' functional tests. Files live in "
                    "%s; endpoints and credentials in %s."
                    % (layout.BASE, layout.CLOUD_JSON))
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (_, text) in COMMANDS.items():
        sub.add_parser(name, help=text, description=text)
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)
    try:
        return COMMANDS[args.command][0]()
    except DevcloudError as err:
        print("devcloud: error: %s" % err, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("devcloud: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:     # e.g. "tools/devcloud status | head -1"
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
