"""swflows on the dev cloud for the benchmarks: configuration, instances, probes.

Swift is reached as on a real cloud (the demo user's Keystone login, the
object-store endpoint of its catalog, the demo project's account), through
the bench's counting proxy where requests are counted; Keystone and Zaqar
directly.  The configuration logs in as the dev cloud's demo user and uses
the bench's own signal container, so every object the bench makes is in a
container it removes at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from swflows import conf as sw_conf
from swflows.api import Swflows

REPO = pathlib.Path(__file__).resolve().parents[1]
CLOUD_JSON = REPO / ".devcloud" / "cloud.json"


def process_env() -> dict[str, str]:
    """The environment of a Python process the bench starts (a conductor,
    a command): this checkout on its path, and its bytecode cached, as an
    installed package has it (a shell or a CI may turn the cache off with
    ``PYTHONDONTWRITEBYTECODE``: each process would then compile every
    module it imports, and a conductor the engine TaskFlow imports at its
    first job)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def load_cloud(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The dev cloud's cloud.json (``$SWFLOWS_DEVCLOUD`` or .devcloud/)."""
    where = pathlib.Path(path or os.environ.get("SWFLOWS_DEVCLOUD") or CLOUD_JSON)
    if not where.is_file():
        raise SystemExit(
            f"no dev cloud description at {where}: run tools/devcloud up first"
        )
    return dict(json.loads(where.read_text()))


def swift_account(cloud: dict[str, Any], via: str | None = None) -> tuple[str, str]:
    """``(account URL, token)`` of the demo user: its Keystone token and the
    object-store endpoint of that token's catalog, as Heat's engine and
    swflows find them; with ``via`` (``http://host:port``, the counting
    proxy) in place of Swift's own host and port."""
    ks = cloud["keystone"]
    auth = v3.Password(auth_url=ks["auth_url"], **ks["demo"])
    session = ks_session.Session(auth=auth)
    url = str(session.get_endpoint(service_type="object-store", interface="public"))
    if via is not None:
        netloc = urllib.parse.urlsplit(via).netloc
        url = urllib.parse.urlsplit(url)._replace(netloc=netloc).geturl()
    return url, str(session.get_token())


def write_private(path: pathlib.Path, text: str) -> pathlib.Path:
    """Write ``text`` (a configuration with passwords) readable by its owner
    alone: the file is made 0600 before anything is written to it."""
    path.touch(mode=0o600)
    path.write_text(text)
    return path


def conf_text(
    cloud: dict[str, Any],
    *,
    database: str,
    container: str,
    swift_url: str | None = None,
    zaqar_url: str | None = None,
) -> str:
    """A swflows configuration for the dev cloud; signals go to
    ``container``, metadata objects to ``<container>-metadata``.

    Swift is found in the catalog; with ``swift_url`` (the counting proxy)
    its account is reached there instead (``endpoint_override``, as an
    operator puts a proxy in front of Swift).  Zaqar is at ``zaqar_url``,
    if given, else in the catalog.
    """
    ks = cloud["keystone"]
    demo = ks["demo"]
    sections: dict[str, list[str]] = {
        "DEFAULT": [
            f"signal_container = {container}",
            f"metadata_container = {container}-metadata",
        ],
        "database": [f"connection = {database}"],
        "identity": [
            "auth_type = password",
            f"auth_url = {ks['auth_url']}",
            f"username = {demo['username']}",
            f"password = {demo['password']}",
            f"project_name = {demo['project_name']}",
            f"user_domain_id = {demo['user_domain_id']}",
            f"project_domain_id = {demo['project_domain_id']}",
        ],
        "stack_user": [
            f"stack_user_domain_id = {ks['stack_user_domain_id']}",
            f"stack_domain_admin = {ks['stack_domain_admin']}",
            f"stack_domain_admin_password = {ks['stack_domain_admin_password']}",
            f"stack_user_role = {ks['stack_user_role']}",
        ],
        "object_store": ["auth_section = identity"],
        "messaging": ["auth_section = identity"],
        "compute": ["auth_section = identity"],
    }
    if swift_url:
        account, _ = swift_account(cloud, via=swift_url)
        sections["object_store"].append(f"endpoint_override = {account}")
    if zaqar_url:
        sections["messaging"].append(f"endpoint_override = {zaqar_url}")
    return "".join(
        f"[{name}]\n" + "".join(f"{line}\n" for line in lines) + "\n"
        for name, lines in sections.items()
    )


@contextlib.contextmanager
def instance(conf_path: pathlib.Path, **overrides: Any) -> Iterator[Swflows]:
    """A Swflows from ``conf_path``; ``group__name=value`` overrides options."""
    conf = sw_conf.get_conf(config_files=[str(conf_path)])
    for key, value in overrides.items():
        group, _, name = key.rpartition("__")
        conf.set_override(name, value, group or None)
    made = Swflows.from_conf(conf)
    try:
        yield made
    finally:
        made.close()


def remove_containers(sw: Swflows, container: str) -> None:
    """Remove the bench's signal ``container`` and its metadata one (as
    :func:`conf_text` names them); RuntimeError if either is left."""
    swift = sw.services.clients.object_store
    made = (container, f"{container}-metadata")
    for one in made:
        swift.delete_container(one, force=True)
    left = [c for c in made if swift.container_exists(c)]
    if left:
        raise RuntimeError(f"the bench left containers behind: {left}")


def until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """``check()``'s first truthy value; RuntimeError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def rss_kib() -> dict[str, int]:
    """This process's resident set now and at its peak, in KiB."""
    found = {}
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    return {"rss": found["VmRSS"], "peak": found["VmHWM"]}


def threads() -> dict[str, int]:
    """Threads of this process: all of them, and the runner's own."""
    alive = threading.enumerate()
    return {
        "total": len(alive),
        "runner": sum(1 for t in alive if t.name.startswith("swflows-")),
    }


def report(
    results: dict[str, Any], table: str, json_path: str | None, tail: str = ""
) -> None:
    """Print a bench's table and its load averages (``tail`` after them),
    and write its figures as JSON to ``json_path``, if given."""
    print()
    print(table)
    print(
        f"\nload average {results['load_before']} before, "
        f"{results['load_after']} after; {results['seconds']:.0f} s{tail}"
    )
    if json_path:
        pathlib.Path(json_path).write_text(json.dumps(results, indent=2) + "\n")
        print(f"figures written to {json_path}")


def load_average() -> list[float]:
    return [float(x) for x in pathlib.Path("/proc/loadavg").read_text().split()[:3]]


__all__ = [
    "conf_text",
    "instance",
    "load_average",
    "load_cloud",
    "report",
    "rss_kib",
    "swift_account",
    "threads",
    "until",
]
