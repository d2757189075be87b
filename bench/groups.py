"""A deployment group against single deploys, on the dev cloud.

    python -m bench.groups [--members 200] [--concurrency 50] [--work 0.5]
                           [--quick] [--json PATH] [--cloud PATH]

The servers are **scripted agents** (labelled as such in the results): one
separate process reads the store for deployments IN_PROGRESS, "works"
``--work`` seconds on each, and PUTs its final signal to the deployment's
TempURL in Swift, as an agent's notifier does.  Metadata is served from
the store (POLL_SERVER_HEAT), so what is measured is swflows' side: flows,
parking, the watcher, the group's driver.

Measured in the same run, with the same agents:

1. one group of ``--members`` members, ``max_concurrency`` ``--concurrency``:
   wall time, and the threads and RSS of the process during the rollout
   (sampled every 0.2 s; the runner's threads are those named
   ``swflows-*``);
2. the same number of single deploys, one after the other
   (``Swflows.deploy(wait=True)``): wall time.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import pathlib
import sys
import tempfile
import threading
import time
import uuid
from typing import Any

import requests

from bench import cloud as bcloud
from swflows import states
from swflows import transport_names as names
from swflows.agent import notify
from swflows.persistence.store import Store

FINAL = {"deploy_status_code": 0, "deploy_stdout": "ok", "result": "r"}


# ------------------------------------------------------- the scripted agents
def agents(database: str, work: float, stop_file: pathlib.Path) -> None:
    """Answer every deployment IN_PROGRESS once, ``work`` s after seeing it."""
    store = Store(database)
    sender = notify.HttpSignal(requests.Session())
    body = notify.prepare(FINAL, sender.max_bytes)
    seen: set[tuple[str, int]] = set()
    with concurrent.futures.ThreadPoolExecutor(64) as pool:
        while not stop_file.exists():
            for dep in store.list_deployments(status=states.IN_PROGRESS):
                key = (dep.id, dep.generation)
                if key in seen or dep.config_id is None:
                    continue
                seen.add(key)
                config = store.get_config(dep.config_id)
                target = notify.target_of(
                    config.id, {i.name: i.value for i in config.inputs}
                )

                def answer(target: notify.Target = target) -> None:
                    time.sleep(work)
                    sender.send(target, body)

                pool.submit(answer)
            time.sleep(0.1)
    store.close()


class Sampler:
    """Threads and RSS of this process, every 0.2 s while running."""

    def __init__(self) -> None:
        self.threads = 0
        self.runner_threads = 0
        self.rss_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            counted = bcloud.threads()
            self.threads = max(self.threads, counted["total"])
            self.runner_threads = max(self.runner_threads, counted["runner"])
            self.rss_kib = max(self.rss_kib, bcloud.rss_kib()["rss"])


def run(
    cloud: dict[str, Any], members: int, concurrency: int, work: float
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="swflows-bench-groups-") as tmp:
        folder = pathlib.Path(tmp)
        database = f"sqlite:///{folder / 'swflows.sqlite'}"
        container = f"swflows-bench-{uuid.uuid4().hex[:8]}"
        conf = folder / "swflows.conf"
        conf.write_text(
            bcloud.conf_text(
                cloud,
                database=database,
                container=container,
            )
        )
        stop = folder / "stop"
        with bcloud.instance(
            conf,
            default_software_config_transport=names.POLL_SERVER_HEAT,
            default_deployment_signal_transport=names.TEMP_URL_SIGNAL,
            watcher__poll_interval=0.2,
        ) as sw:
            import subprocess

            pool = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.groups",
                    "--agents",
                    database,
                    "--work",
                    str(work),
                    "--stop-file",
                    str(stop),
                ],
                cwd=bcloud.REPO,
            )
            try:
                config = sw.create_config(
                    "bench", "#!/bin/sh\n", group="script", outputs=[{"name": "result"}]
                )
                servers = {f"m{i}": f"bench-group-{i}" for i in range(members)}
                started = time.monotonic()
                with Sampler() as sampled:
                    shown = sw.create_group(
                        "bench",
                        config.id,
                        servers,
                        policy={"max_concurrency": concurrency},
                        timeout=600,
                        wait_timeout=1800,
                    )
                group_s = time.monotonic() - started
                if shown["status"] != states.COMPLETE:
                    raise RuntimeError(f"the group ended {shown['status_reason']}")
                started = time.monotonic()
                for i in range(members):
                    dep = sw.deploy(f"bench-single-{i}", config.id, timeout=600)
                    if dep.status != states.COMPLETE:
                        raise RuntimeError(f"deploy {i}: {dep.status_reason}")
                single_s = time.monotonic() - started
                sw.delete_group("bench", wait_timeout=1800)
                for dep in sw.list_deployments():
                    sw.undeploy(dep.id)
            finally:
                stop.touch()
                pool.wait(30)
                sw.services.clients.object_store.delete_container(container, force=True)
    return {
        "agents": "scripted (one process answering through Swift TempURLs)",
        "members": members,
        "max_concurrency": concurrency,
        "work_s": work,
        "group_s": round(group_s, 2),
        "single_deploys_s": round(single_s, 2),
        "speedup": round(single_s / group_s, 1),
        "threads_peak": sampled.threads,
        "runner_threads_peak": sampled.runner_threads,
        "rss_peak_mib": round(sampled.rss_kib / 1024, 1),
        "load_average": bcloud.load_average(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.groups")
    parser.add_argument("--members", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--work", type=float, default=0.5)
    parser.add_argument("--quick", action="store_true", help="20 members, 5 at once")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--cloud", metavar="PATH")
    parser.add_argument("--agents", metavar="DATABASE", help=argparse.SUPPRESS)
    parser.add_argument("--stop-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.agents:
        agents(args.agents, args.work, pathlib.Path(args.stop_file))
        return 0
    members, concurrency = (20, 5) if args.quick else (args.members, args.concurrency)
    results = run(bcloud.load_cloud(args.cloud), members, concurrency, args.work)
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        pathlib.Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
