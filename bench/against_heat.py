"""Heat's own ``OS::Heat::SoftwareDeployment`` against swflows, in one run.

    python -m bench.against_heat [--sizes 10,100] [--servers 10] [--json PATH]

The real heat-engine of ``tools/devcloud heat-up`` runs one template three
ways, each on servers running Heat's own agents (os-collect-config with
heat-agents' hooks, polling every second, as the Nova stand-in boots them)
with ``POLL_TEMP_URL`` metadata and ``TEMP_URL_SIGNAL`` signals:

- **heat**: the template as written, Heat's own SoftwareDeployment;
- **plugin**: the same template with swflows' environment file, so the
  same resources run through swflows inside heat-engine;
- **library**: swflows used directly (its own runner in this process),
  booting its servers for Heat's agents (``agent="heat"``) and deploying
  to them, from a few threads.

For each size N (deployments, spread over the servers), two phases:

1. **complete**: the script answers at once; the time from the stack's
   create (the first server boot, for the library) until every deployment
   is COMPLETE, and from the last signal the agents PUT (Swift's own access
   line) until then; CPU seconds of heat-engine (all its processes) or of
   this process (library), per deployment.
2. **waiting**: the script sleeps for an hour; once every deployment is
   waiting, nothing of the bench runs for :data:`WINDOW` seconds while
   Swift's, Keystone's and heat-api's requests are counted, from their own
   access lines, and the engine's CPU: per waiting deployment per minute.
   The agents run the sleeping hook meanwhile, so they ask nothing: what
   is counted is the waiting side's own cost.

Every stack, server, config and container the bench makes is removed.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import pathlib
import socket
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import yaml
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from bench import cloud as bcloud
from swflows import bootdata, exceptions
from swflows import transport_names as names
from swflows.api import Swflows
from swflows.embedding import heat_plugins

REPO = pathlib.Path(__file__).resolve().parents[1]
HEAT_JSON = REPO / ".devcloud" / "heat.json"
HEAT_RECORDS = REPO / ".devcloud" / "heat-state" / "servers.json"
DEFAULT_JSON = pathlib.Path(__file__).resolve().parent / "results-heat.json"
TEMPLATE_VERSION = "2021-04-16"
#: seconds of the waiting phase's count
WINDOW = 30.0
#: how long a side may take to complete, per deployment, at least 120 s
SECONDS_PER_DEPLOYMENT = 6.0
#: how often the stack (or the library's deployments) is looked at
LOOK = 0.1
SIDES = ("heat", "plugin", "library")
#: threads the library side deploys from
SUBMITTERS = 4
Log = Callable[[str], None]


# -- what the servers are asked -----------------------------------------
def script(sleep: float) -> str:
    wait = f"sleep {sleep:g}\n" if sleep else ""
    return f'#!/bin/sh\n{wait}echo "done $name" > "$heat_outputs_path.result"\n'


def template(count: int, servers: int, sleep: float) -> dict[str, Any]:
    """``servers`` servers with Heat's agents and ``count`` deployments of
    one script config, spread over them, as a Heat user writes it."""
    resources: dict[str, Any] = {
        "config": {
            "type": "OS::Heat::SoftwareConfig",
            "properties": {
                "group": "script",
                "inputs": [{"name": "name"}],
                "outputs": [{"name": "result"}],
                "config": script(sleep),
            },
        }
    }
    for s in range(servers):
        resources[f"server{s}"] = {
            "type": "OS::Nova::Server",
            "properties": {
                "image": "cirros",
                "flavor": "m1.tiny",
                "user_data_format": "SOFTWARE_CONFIG",
                "software_config_transport": names.POLL_TEMP_URL,
            },
        }
    for d in range(count):
        resources[f"deploy{d}"] = {
            "type": "OS::Heat::SoftwareDeployment",
            "properties": {
                "config": {"get_resource": "config"},
                "server": {"get_resource": f"server{d % servers}"},
                "input_values": {"name": f"d{d}"},
                "signal_transport": names.TEMP_URL_SIGNAL,
            },
        }
    return {"heat_template_version": TEMPLATE_VERSION, "resources": resources}


def environment() -> dict[str, Any]:
    """swflows' environment file: Heat's deployment types mapped to swflows'."""
    found: dict[str, Any] = yaml.safe_load(
        pathlib.Path(heat_plugins.ENVIRONMENT).read_text()
    )
    return found


# -- what the servers answer: the services' own access lines ---------------
class SwiftLines:
    """Swift's proxy access lines, received as the syslog datagrams the dev
    cloud's proxy sends to ``cloud.json``'s ``swift.access_log``."""

    def __init__(self, where: dict[str, Any]) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind((where["host"], int(where["port"])))
        self.sock.settimeout(0.2)
        self.lines: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65535)
            except TimeoutError:
                continue
            line = parse_swift_line(data.decode("utf-8", "replace"))
            if line is not None:
                with self._lock:
                    self.lines.append(line)

    def since(self, start: float) -> list[dict[str, Any]]:
        """The requests that began at ``start`` (``time.time()``) or later."""
        with self._lock:
            return [line for line in self.lines if line["start"] >= start]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


def parse_swift_line(text: str) -> dict[str, Any] | None:
    """One access line of Swift's proxy (its default format), or None for
    a subrequest or another message."""
    _, _, rest = text.partition("proxy-server: ")
    fields = rest.split(" ")
    if len(fields) < 20 or fields[16] != "-":  # a subrequest has a source
        return None
    path = urllib.parse.unquote(fields[4]).partition("?")[0]
    parts = path.strip("/").split("/", 3)
    kind = ("auth", "account", "container", "object")[min(len(parts), 4) - 1]
    if parts[0] != "v1":
        kind = "auth"
    return {
        "method": fields[3],
        "kind": kind,
        "path": path,
        "status": fields[6],
        "agent": urllib.parse.unquote(fields[8]),
        "start": float(fields[18]),
        "end": float(fields[19]),
    }


class LogTail:
    """The lines appended to a log file since :meth:`mark`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = pathlib.Path(path)
        self.offset = 0

    def mark(self) -> None:
        self.offset = self.path.stat().st_size

    def lines(self) -> list[str]:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            return f.read().decode("utf-8", "replace").splitlines()


#: the user agent of Heat's agents' requests (os-collect-config, and
#: heat-config-notify's signal): python-requests' own
AGENTS_UA = "python-requests/"


def agents_read(lines: list[dict[str, Any]]) -> set[str]:
    """The objects the agents read: the servers' metadata."""
    return {
        line["path"]
        for line in lines
        if line["method"] in ("GET", "HEAD") and line["agent"].startswith(AGENTS_UA)
    }


def metadata_puts(lines: list[dict[str, Any]]) -> list[float]:
    """When each write of a server's metadata object ended: a PUT of an
    object the agents read (they only read it: the writer is Heat or
    swflows, whichever client it uses)."""
    read = agents_read(lines)
    return [
        line["end"]
        for line in lines
        if line["method"] == "PUT"
        and line["path"] in read
        and line["status"].startswith("2")
    ]


def signal_puts(lines: list[dict[str, Any]]) -> list[float]:
    """When each signal landed: the end of each PUT of an object by the
    agents (heat-config-notify), except to an object they also read (the
    server's metadata, which the Heat plugin writes with the same client
    and os-collect-config polls)."""
    read = agents_read(lines)
    return [
        line["end"]
        for line in lines
        if line["method"] == "PUT"
        and line["kind"] == "object"
        and line["status"].startswith("2")
        and line["agent"].startswith(AGENTS_UA)
        and line["path"] not in read
    ]


@dataclasses.dataclass(frozen=True)
class AccessLines:
    """The services' own access lines the bench counts by."""

    swift: SwiftLines
    keystone: LogTail
    heat_api: LogTail


def heat_api_requests(lines: list[str]) -> int:
    """Requests heat-api answered, by its own request log lines."""
    return sum(1 for line in lines if '"' in line and " HTTP/1." in line)


def engine_cpu() -> float:
    """CPU seconds (user and system) of heat-engine and its workers: the
    processes of its process group."""
    group = json.loads(HEAT_RECORDS.read_text())["heat-engine"]["pid"]
    ticks = 0
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == group:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    return time.process_time()


# -- driving heat-api ------------------------------------------------------
#: how many times a GET heat-api answers 5xx is asked
GET_ATTEMPTS = 3


class Heat:
    """heat-api as the dev cloud's demo user (keystoneauth only)."""

    def __init__(self, cloud: dict[str, Any]) -> None:
        ks = cloud["keystone"]
        self.session = ks_session.Session(
            auth=v3.Password(auth_url=ks["auth_url"], **ks["demo"])
        )
        self.filter = {"service_type": "orchestration", "interface": "public"}

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """heat-api's answer; a GET answered 5xx (an engine too busy to
        answer heat-api's call in time) is asked again, up to
        :data:`GET_ATTEMPTS` times: the bench's look is not the stack's
        outcome."""
        attempts = GET_ATTEMPTS if method == "GET" else 1
        for attempt in range(1, attempts + 1):
            resp = self.session.request(
                path, method, endpoint_filter=self.filter, raise_exc=False, **kwargs
            )
            if resp.status_code < 500 or attempt == attempts:
                break
            print(f"... heat-api {method} {path}: {resp.status_code}, asked again")
            time.sleep(1.0)
        if resp.status_code >= 400:
            raise RuntimeError(
                f"heat-api {method} {path}: {resp.status_code} {resp.text}"
            )
        try:
            return resp.json()
        except ValueError:
            return None

    def create(self, template: dict[str, Any], env: dict[str, Any] | None) -> str:
        name = f"bench-{uuid.uuid4().hex[:8]}"
        body: dict[str, Any] = {"stack_name": name, "template": template}
        if env is not None:
            body["environment"] = env
        stack_id = self.call("POST", "/stacks", json=body)["stack"]["id"]
        return f"{name}/{stack_id}"

    def status(self, ref: str) -> tuple[str, str]:
        stack = self.call("GET", f"/stacks/{ref}")["stack"]
        return str(stack["stack_status"]), str(stack.get("stack_status_reason"))

    def resources(self, ref: str) -> dict[str, str]:
        listed = self.call("GET", f"/stacks/{ref}/resources")["resources"]
        return {r["resource_name"]: r["resource_status"] for r in listed}

    def delete(self, ref: str, timeout: float) -> None:
        self.call("DELETE", f"/stacks/{ref}")
        deadline = time.monotonic() + timeout
        while True:
            resp = self.session.get(
                f"/stacks/{ref}", endpoint_filter=self.filter, raise_exc=False
            )
            if resp.status_code == 404:
                return
            status = resp.json()["stack"]["stack_status"]
            if status == "DELETE_COMPLETE":
                return
            if status == "DELETE_FAILED" or time.monotonic() > deadline:
                raise RuntimeError(f"stack {ref} not deleted: {status}")
            time.sleep(0.5)


# -- one side --------------------------------------------------------------
class Side:
    """How one side starts N deployments, sees them, and removes them."""

    name = ""

    def cpu(self) -> float:
        return engine_cpu()

    def start(self, count: int, sleep: float) -> None:
        raise NotImplementedError

    def statuses(self) -> dict[str, str]:
        """Each deployment's status: COMPLETE, FAILED or IN_PROGRESS."""
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


class StackSide(Side):
    def __init__(self, heat: Heat, servers: int, swflows_env: bool) -> None:
        self.heat = heat
        self.servers = servers
        self.env = environment() if swflows_env else None
        self.name = "plugin" if swflows_env else "heat"
        self.ref: str | None = None
        self.count = 0

    def start(self, count: int, sleep: float) -> None:
        self.count = count
        self.ref = self.heat.create(template(count, self.servers, sleep), self.env)

    def statuses(self) -> dict[str, str]:
        assert self.ref is not None
        status, reason = self.heat.status(self.ref)
        if status == "CREATE_COMPLETE":
            return {f"deploy{d}": "COMPLETE" for d in range(self.count)}
        if status.endswith("_FAILED"):
            raise RuntimeError(f"{self.name}: stack {status}: {reason}")
        shown = self.heat.resources(self.ref)
        return {
            name: "IN_PROGRESS" if status.endswith("IN_PROGRESS") else status
            for name, status in shown.items()
            if name.startswith("deploy")
        }

    def complete(self) -> bool:
        assert self.ref is not None
        status, reason = self.heat.status(self.ref)
        if status.endswith("_FAILED"):
            raise RuntimeError(f"{self.name}: stack {status}: {reason}")
        return status == "CREATE_COMPLETE"

    def stop(self) -> None:
        if self.ref is not None:
            self.heat.delete(self.ref, timeout=300)
            self.ref = None


class LibrarySide(Side):
    """swflows used directly: its servers booted (through Nova, with Heat's
    agents, enrolled) and deployed to, as the stack's are, inside the clock."""

    name = "library"

    def __init__(self, sw: Swflows, servers: int) -> None:
        self.sw = sw
        self.server_count = servers
        self.servers: list[str] = []
        self.configs: list[str] = []
        self.deployments: list[str] = []

    def cpu(self) -> float:
        return own_cpu()

    def start(self, count: int, sleep: float) -> None:
        config = self.sw.create_config(
            f"bench-{uuid.uuid4().hex[:8]}",
            script(sleep),
            group="script",
            inputs=[{"name": "name"}],
            outputs=[{"name": "result"}],
        )
        self.configs.append(config.id)

        def boot(s: int) -> str:
            return str(
                self.sw.create_server(
                    f"bench-{s}",
                    "cirros",
                    "m1.tiny",
                    config_transport=names.POLL_TEMP_URL,
                    agent=bootdata.HEAT_AGENTS,
                )["server_id"]
            )

        def deploy(d: int) -> str:
            return self.sw.deploy(
                self.servers[d % len(self.servers)],
                config.id,
                input_values={"name": f"d{d}"},
                signal_transport=names.TEMP_URL_SIGNAL,
                wait=False,
            ).id

        # from a few threads, as Heat creates resources side by side
        with concurrent.futures.ThreadPoolExecutor(SUBMITTERS) as pool:
            self.servers = list(pool.map(boot, range(self.server_count)))
            self.deployments = list(pool.map(deploy, range(count)))

    def statuses(self) -> dict[str, str]:
        return {d: self.sw.show(d).status for d in self.deployments}

    def complete(self) -> bool:
        return all(s == "COMPLETE" for s in self.statuses().values())

    def stop(self) -> None:
        for deployment in self.deployments:
            with contextlib.suppress(exceptions.InvalidTransition):
                self.sw.cancel(deployment)
        for deployment in self.deployments:
            self.sw.undeploy(deployment, wait=False)
        for deployment in self.deployments:
            bcloud.until(self._gone(deployment), 300, f"{deployment} gone")
        self.deployments = []
        for server in self.servers:
            self.sw.delete_server(server)
        self.servers = []
        for config in self.configs:
            self.sw.delete_config(config)
        self.configs = []

    def _gone(self, deployment: str) -> Callable[[], bool]:
        def gone() -> bool:
            try:
                self.sw.show(deployment)
            except exceptions.NotFound:
                return True
            return False

        return gone


def run_complete(
    side: Any, count: int, swift: SwiftLines, timeout: float
) -> dict[str, Any]:
    """Phase 1: until every deployment is COMPLETE."""
    cpu0 = side.cpu()
    wall0 = time.time()
    started = time.monotonic()
    side.start(count, 0)
    try:
        while not side.complete():
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"{side.name}: not complete after {timeout:.0f} s")
            time.sleep(LOOK)
        seconds = time.monotonic() - started
        done_at = time.time()
        cpu = side.cpu() - cpu0
        lines = swift.since(wall0)
        signals = signal_puts(lines)
        published = [t for t in metadata_puts(lines) if not signals or t < max(signals)]
    finally:
        side.stop()
    return {
        "seconds": seconds,
        "per_s": count / seconds,
        # the phases, from the create: the servers' metadata written (the
        # first and the last write before the last signal), the agents'
        # first and last signals
        "first_metadata_put_s": min(published) - wall0 if published else None,
        "last_metadata_put_s": max(published) - wall0 if published else None,
        "first_signal_s": min(signals) - wall0 if signals else None,
        "last_signal_s": max(signals) - wall0 if signals else None,
        "last_signal_to_complete_s": done_at - max(signals) if signals else None,
        "signals_seen": len(signals),
        "cpu_s": cpu,
        "cpu_ms_per_deployment": 1000 * cpu / count,
    }


def run_waiting(
    side: Any,
    count: int,
    access: AccessLines,
    timeout: float,
    window: float,
) -> dict[str, Any]:
    """Phase 2: every deployment waiting; the requests of ``window`` s."""
    side.start(count, 3600)
    try:
        started = time.monotonic()
        while True:
            shown = side.statuses()
            if len(shown) == count and all(s == "IN_PROGRESS" for s in shown.values()):
                break
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"{side.name}: not all waiting: {shown}")
            time.sleep(0.5)
        time.sleep(2)  # the last deployments' own start settles
        access.keystone.mark()
        access.heat_api.mark()
        cpu0 = side.cpu()
        wall0 = time.time()
        time.sleep(window)
        cpu = side.cpu() - cpu0
        wall1 = time.time()
        lines = [line for line in access.swift.since(wall0) if line["start"] < wall1]
        keystone_lines = access.keystone.lines()
        heat_lines = access.heat_api.lines()
    finally:
        side.stop()
    by_kind = collections.Counter(f"{line['method']} {line['kind']}" for line in lines)
    minutes = window / 60
    per = count * minutes
    return {
        "window_s": window,
        "swift": len(lines),
        "swift_by_kind": dict(by_kind),
        "keystone": len(keystone_lines),
        "heat_api": heat_api_requests(heat_lines),
        "swift_per_deployment_minute": len(lines) / per,
        "keystone_per_deployment_minute": len(keystone_lines) / per,
        "heat_api_per_deployment_minute": heat_api_requests(heat_lines) / per,
        "cpu_s": cpu,
        "cpu_ms_per_deployment_minute": 1000 * cpu / per,
    }


@contextlib.contextmanager
def library(
    cloud: dict[str, Any], folder: pathlib.Path, servers: int
) -> Iterator[LibrarySide]:
    """swflows with its own runner in this process, on a store and signal
    container of its own, all removed at the end."""
    container = f"bench-{uuid.uuid4().hex[:10]}"
    conf_path = folder / "library.conf"
    bcloud.write_private(
        conf_path,
        bcloud.conf_text(
            cloud,
            database=f"sqlite:///{folder / 'library.sqlite'}",
            container=container,
        ),
    )
    with bcloud.instance(conf_path) as sw:
        side = LibrarySide(sw, servers)
        try:
            yield side
        finally:
            for server in side.servers:
                with contextlib.suppress(exceptions.NotFound):
                    sw.delete_server(server)
            swift = sw.services.clients.object_store
            for name in (container, f"{container}-metadata"):
                swift.delete_container(name, force=True)


def one_side(
    name: str,
    cloud: dict[str, Any],
    folder: pathlib.Path,
    heat: Heat,
    count: int,
    servers: int,
    access: AccessLines,
    timeout: float,
    window: float,
) -> dict[str, Any]:
    """Both phases of one side at one size; a phase that fails is recorded
    with its error, and the other is run all the same."""
    found: dict[str, Any] = {}

    def phase(key: str, call: Callable[[], dict[str, Any]]) -> None:
        try:
            found[key] = call()
        except Exception as exc:  # recorded; the rest goes on
            found[key] = {"error": f"{type(exc).__name__}: {exc}"[:500]}

    def both(side: Any) -> None:
        phase("complete", lambda: run_complete(side, count, access.swift, timeout))
        phase("waiting", lambda: run_waiting(side, count, access, timeout, window))

    if name == "library":
        try:
            with library(cloud, folder, servers) as made:
                both(made)
        except Exception as exc:  # its removal: the phases' figures stand
            found["cleanup"] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    else:
        both(StackSide(heat, servers, name == "plugin"))
    return found


def run(
    cloud: dict[str, Any],
    folder: pathlib.Path,
    sizes: tuple[int, ...] = (10, 100),
    servers: int = 10,
    window: float = WINDOW,
    sides: tuple[str, ...] = SIDES,
    log: Log = print,
    dump: pathlib.Path | None = None,
) -> dict[str, Any]:
    heat_doc = json.loads(HEAT_JSON.read_text())
    swift = SwiftLines(cloud["swift"]["access_log"])
    access = AccessLines(
        swift,
        LogTail(cloud["logs"]["keystone"].replace(".log", "-access.log")),
        LogTail(heat_doc["logs"]["heat-api"]),
    )
    heat = Heat(cloud)
    results: dict[str, Any] = {
        "servers": servers,
        "window_s": window,
        "heat_engine_workers": heat_doc.get("engine_workers", 1),
    }
    try:
        for count in sizes:
            timeout = max(120.0, SECONDS_PER_DEPLOYMENT * count)
            found: dict[str, Any] = {}
            for name in sides:
                log(f"{name}: {count} deployments to {min(servers, count)} servers")
                try:
                    found[name] = one_side(
                        name,
                        cloud,
                        folder,
                        heat,
                        count,
                        min(servers, count),
                        access,
                        timeout,
                        window,
                    )
                except Exception as exc:  # recorded; the other sides go on
                    found[name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
                log(f"{name}: {json.dumps(found[name])}")
            results[str(count)] = found
    finally:
        swift.close()
        if dump is not None:
            dump.write_text("".join(json.dumps(line) + "\n" for line in swift.lines))
    return results


def table(results: dict[str, Any]) -> str:
    rows = [
        "| N | figure | heat | swflows plugin | ratio | swflows library |",
        "|---|---|---|---|---|---|",
    ]

    def cell(value: Any, fmt: str) -> str:
        return "n/a" if value is None else format(value, fmt)

    figures = (
        ("complete", "seconds", "create to all COMPLETE, s", ".1f"),
        (
            "complete",
            "last_signal_to_complete_s",
            "last signal to all COMPLETE, s",
            ".2f",
        ),
        ("complete", "cpu_ms_per_deployment", "CPU per deployment, ms", ".0f"),
        (
            "waiting",
            "swift_per_deployment_minute",
            "Swift requests / waiting deployment / min",
            ".2f",
        ),
        (
            "waiting",
            "keystone_per_deployment_minute",
            "Keystone requests / waiting deployment / min",
            ".2f",
        ),
        (
            "waiting",
            "heat_api_per_deployment_minute",
            "heat-api requests / waiting deployment / min",
            ".2f",
        ),
        (
            "waiting",
            "cpu_ms_per_deployment_minute",
            "CPU while waiting, ms / deployment / min",
            ".1f",
        ),
    )
    for count, found in results.items():
        if not count.isdigit():
            continue
        for phase, key, what, fmt in figures:
            values = {s: found.get(s, {}).get(phase, {}).get(key) for s in SIDES}
            heat_v, plugin_v = values["heat"], values["plugin"]
            ratio = (
                f"{heat_v / plugin_v:.1f}x"
                if heat_v is not None and plugin_v
                else "n/a"
            )
            rows.append(
                f"| {count} | {what} | {cell(heat_v, fmt)} | {cell(plugin_v, fmt)}"
                f" | {ratio} | {cell(values['library'], fmt)} |"
            )
    for count, found in results.items():
        if count.isdigit():
            for side, figures in found.items():
                for phase, got in figures.items():
                    if isinstance(got, dict) and "error" in got:
                        rows.append(
                            f"\n{side}, {phase}, N = {count}, failed: {got['error']}"
                        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.against_heat", description=__doc__
    )
    parser.add_argument("--sizes", default="10,100", help="deployments per run")
    parser.add_argument("--servers", type=int, default=10, help="servers per run")
    parser.add_argument("--window", type=float, default=WINDOW, help="seconds counted")
    parser.add_argument(
        "--sides", default=",".join(SIDES), help="of heat,plugin,library"
    )
    parser.add_argument("--json", default=str(DEFAULT_JSON), help="figures, as JSON")
    parser.add_argument("--cloud", default=None, help="cloud.json of the dev cloud")
    parser.add_argument(
        "--swift-lines", default=None, help="write Swift's access lines here (JSON)"
    )
    args = parser.parse_args(argv)
    sides = tuple(s for s in args.sides.split(",") if s)
    unknown = set(sides) - set(SIDES)
    if unknown:
        parser.error(f"unknown sides: {', '.join(sorted(unknown))}")
    cloud = bcloud.load_cloud(args.cloud)
    results: dict[str, Any] = {
        "load_before": bcloud.load_average(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="swflows-bench-heat-") as tmp:
        results.update(
            run(
                cloud,
                pathlib.Path(tmp),
                sizes=tuple(int(n) for n in args.sizes.split(",")),
                servers=args.servers,
                window=args.window,
                sides=sides,
                log=lambda m: print(f"... {m}", flush=True),
                dump=pathlib.Path(args.swift_lines) if args.swift_lines else None,
            )
        )
    results["load_after"] = bcloud.load_average()
    results["seconds"] = time.monotonic() - began
    bcloud.report(results, table(results), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
