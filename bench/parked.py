"""Real deployments parked at fleet size on one runner: 10,000 by default.

``count`` TEMP_URL_SIGNAL deployments (ten to a server, POLL_SERVER_HEAT
metadata, as ``waiting.Population`` makes them) are launched on one runner
(SQLite) against the dev cloud's Swift and Keystone, with its watcher
resting, in rounds of :data:`ROUND`.  That runner is closed and a fresh one
opened on the same store with the watcher looking every ``poll_interval``
(0.5 s), as a restarted service would find them.  Then, with every
deployment waiting:

* the runner's threads and RSS, and one look: its time and its Swift
  requests, counted by the proxy in front of Swift;
* ``sample`` final signals sent as the agent sends them (a PUT to the
  TempURL), ``spacing`` s apart: from each PUT's return to the row seen
  COMPLETE, p50 and p99 (:func:`bench.waiting.latency`);
* the threads and RSS again, once the signalled flows have run to their
  end (the goals are checked against the larger of the two).

Nothing is synthetic: every row, flow and logbook is a real deployment's.
The signal and metadata containers are removed at the end.
"""

from __future__ import annotations

import pathlib
import time
import uuid
from typing import Any

import requests

from bench import cloud as bcloud
from bench import waiting
from bench.proxy import CountingProxy
from swflows.agent import notify

#: deployments launched between two progress lines
ROUND = 1000
#: what one runner is to hold (docs/performance.md)
GOAL = {"p50_s": 0.5, "p99_s": 1.0, "rss_mib": 1024, "runner_threads": 32}


def run(
    cloud: dict[str, Any],
    proxy: CountingProxy,
    workdir: pathlib.Path,
    count: int = 10_000,
    sample: int = 100,
    spacing: float = 0.2,
    poll_interval: float = 0.5,
    log: Any = print,
) -> dict[str, Any]:
    """Park ``count`` real deployments, then measure one runner holding them."""
    container = f"bench-{uuid.uuid4().hex[:10]}"
    conf_path = workdir / "parked.conf"
    bcloud.write_private(
        conf_path,
        bcloud.conf_text(
            cloud,
            database=f"sqlite:///{workdir / 'parked.sqlite'}",
            swift_url=proxy.url,
            container=container,
        ),
    )
    common = {"delivery_timeout": 0, "watcher__sweep_interval": 3600.0}
    out: dict[str, Any] = {"deployments": count, "servers": count // waiting.PER_SERVER}
    rss_before = bcloud.rss_kib()
    sw = None
    try:
        with bcloud.instance(conf_path, watcher__poll_interval=3600.0, **common) as sw:
            config = sw.create_config(
                "bench",
                "#!/bin/sh\necho ok\n",
                group="script",
                outputs=[{"name": "result"}],
            )
            population = waiting.Population(sw, config.id)
            started = time.perf_counter()
            while len(population.ids) < count:
                population.grow(min(ROUND, count - len(population.ids)))
                spent = time.perf_counter() - started
                log(
                    f"{len(population.ids)} of {count} parked "
                    f"({len(population.ids) / spent:.1f}/s)"
                )
            spent = time.perf_counter() - started
            out["launch"] = {"s": spent, "per_s": count / spent}
            ids = list(population.ids)
        started = time.perf_counter()
        with bcloud.instance(
            conf_path, watcher__poll_interval=poll_interval, **common
        ) as sw:
            out["open_s"] = time.perf_counter() - started
            # a look or two of the fresh watcher first, as in service
            time.sleep(2 * poll_interval)
            # the background loop held between two of its looks, so that
            # the proxy counts this look's requests alone
            with sw.runner.watcher.paused():
                held = waiting.held(sw, proxy, "real deployments")
            held["rss_before_kib"] = rss_before
            out["held"] = held
            chosen = ids[:: max(1, count // sample)][:sample]
            log(f"latency: {len(chosen)} TEMP_URL_SIGNAL signals, {count} waiting")
            out["latency"] = waiting.latency(
                sw, chosen, notify.HttpSignal(requests.Session()), spacing
            )
            out["latency"]["waiting"] = count
            out["latency"]["poll_interval_s"] = poll_interval
            # the signals' flows ran here too: what that left running
            out["threads_after"] = bcloud.threads()
            out["rss_after_kib"] = bcloud.rss_kib()
    finally:
        if sw is not None:
            bcloud.remove_containers(sw, container)
    out["load_after"] = bcloud.load_average()
    return out


def peak(found: dict[str, Any]) -> dict[str, float]:
    """The runner's threads and the process's RSS (MiB), the larger of
    those held while waiting and after the signals."""
    held = found["held"]
    return {
        "runner_threads": max(
            held["threads"]["runner"], found["threads_after"]["runner"]
        ),
        "rss_mib": max(held["rss_kib"]["rss"], found["rss_after_kib"]["rss"]) / 1024,
    }


__all__ = ["GOAL", "peak", "run"]
