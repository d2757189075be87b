"""What the dev cloud's Heat and Mistral (``heat.py``, ``mistral.py``)
share: a service installed from a hashed lock into a venv of its own, with
swflows from this tree beside it; its PostgreSQL databases made afresh at
each start; a RabbitMQ vhost of this checkout's; and a Keystone service
user with the service's catalog endpoints."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from . import install, keystone, layout
from .procs import DevcloudError, run_sql


def _digest(lock_file: Path) -> str:
    digest = hashlib.sha256(lock_file.read_bytes())
    digest.update((layout.REPO / "setup.cfg").read_bytes())
    return digest.hexdigest()


def ensure_venv(venv: Path, stamp: Path, lock_file: Path, label: str) -> float | None:
    """Install ``label`` from ``lock_file`` into ``venv`` (and swflows from
    this tree, without dependencies: the lock holds them); seconds spent,
    None if current."""
    python = venv / "bin" / "python"
    if (
        python.exists()
        and stamp.exists()
        and stamp.read_text().strip() == _digest(lock_file)
    ):
        return None
    t0 = time.monotonic()
    uv = install._bootstrap_uv(install.server_python())
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VIRTUAL_ENV", "PYTHON"))
    }
    env["UV_PYTHON_DOWNLOADS"] = "never"
    env.setdefault("PBR_VERSION", "0.1.0")
    stamp.unlink(missing_ok=True)
    if not python.exists():
        install._run(
            [uv, "venv", "-q", "--clear", "--python", install.server_python(), venv],
            f"creating the {label} venv",
            env,
        )
    # builds are allowed: some of a service's packages have no wheel
    sync = [uv, "pip", "sync", "-q", "--python", python, "--require-hashes"]
    install._run([*sync, "--compile-bytecode", lock_file], f"installing {label}", env)
    pkg = [uv, "pip", "install", "-q", "--python", python, "--no-deps"]
    install._run([*pkg, "-e", layout.REPO], f"installing swflows beside {label}", env)
    stamp.write_text(_digest(lock_file) + "\n")
    return time.monotonic() - t0


def make_databases(python: Path, pg: str, names: dict[str, str]) -> dict[str, str]:
    """Each database of ``names`` (role -> name) dropped and made again on
    the PostgreSQL at ``pg``; role -> its URL."""
    urls = {}
    for role, name in names.items():
        statements = [
            f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)',
            f'CREATE DATABASE "{name}"',
        ]
        refused = run_sql(python, f"{pg}/postgres", statements)
        if refused is not None:
            raise DevcloudError(f"PostgreSQL at {pg} refused {statements}:\n{refused}")
        urls[role] = f"{pg}/{name}"
    return urls


def make_vhost(service: str) -> str:
    """A RabbitMQ vhost of this checkout's ``service`` (an OpenStack
    service's topics are fixed names: two on one vhost would take each
    other's messages)."""
    vhost = f"swflows-{service}-{layout.clone_tag()}"
    ctl = shutil.which("rabbitmqctl") or "/usr/sbin/rabbitmqctl"
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    for argv in (
        ["add_vhost", vhost],
        ["set_permissions", "-p", vhost, "guest", ".*", ".*", ".*"],
    ):
        res = subprocess.run(
            [*sudo, ctl, *argv], capture_output=True, text=True, timeout=60
        )
        if res.returncode != 0 and "already_exists" not in res.stderr + res.stdout:
            raise DevcloudError(
                f"rabbitmqctl {' '.join(argv)} failed (exit {res.returncode}): "
                f"{(res.stderr or res.stdout)[-800:]}"
            )
    return vhost


def register(
    cloud: dict[str, Any],
    *,
    user: str,
    password: str,
    service_type: str,
    service_name: str,
    url: str,
) -> keystone.Api:
    """The service user ``user`` (admin of project ``service``) and the
    ``service_type`` endpoints at ``url``, replacing those of a previous
    start; the admin's API, for what a service needs besides."""
    ks = cloud["keystone"]
    admin = ks["admin"]
    api = keystone.Api(
        ks["auth_url"],
        keystone.password_token(
            ks["auth_url"], admin["username"], admin["password"], "admin"
        ),
    )
    projects = {p["name"]: p["id"] for p in api("GET", "/projects")["projects"]}
    roles = {r["name"]: r["id"] for r in api("GET", "/roles")["roles"]}
    service_project = projects["service"]
    found = api("GET", f"/users?name={user}&domain_id=default")["users"]
    if found:
        user_id = found[0]["id"]
        api("PATCH", f"/users/{user_id}", {"user": {"password": password}})
    else:
        user_id = api.create(
            "user",
            name=user,
            password=password,
            domain_id="default",
            default_project_id=service_project,
        )
    for role in ("admin", "service"):
        api("PUT", f"/projects/{service_project}/users/{user_id}/roles/{roles[role]}")
    for service in api("GET", f"/services?type={service_type}")["services"]:
        for endpoint in api("GET", f"/endpoints?service_id={service['id']}")[
            "endpoints"
        ]:
            api("DELETE", f"/endpoints/{endpoint['id']}")
        api("DELETE", f"/services/{service['id']}")
    service_id = api.create("service", type=service_type, name=service_name)
    for interface in ("public", "internal", "admin"):
        api.create(
            "endpoint",
            service_id=service_id,
            interface=interface,
            url=url,
            region_id=ks["region"],
        )
    return api
