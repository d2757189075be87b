"""Launch rate: deployments submitted to parked per second, real cloud calls.

``count`` TEMP_URL_SIGNAL deployments with POLL_TEMP_URL metadata, ten to a
server, are submitted by one runner (four submitting threads, as
``waiting.Population`` does) against the dev cloud's Swift and Keystone;
the time runs from the first submission until every flow is parked.  The
bench's signal and metadata containers are removed at the end.
"""

from __future__ import annotations

import pathlib
import time
import uuid
from typing import Any

from bench import cloud as bcloud
from bench import waiting
from swflows import transport_names as names

#: the rate one runner is to reach (docs/performance.md)
GOAL_PER_S = 100


def run(
    cloud: dict[str, Any],
    workdir: pathlib.Path,
    count: int = 1000,
    log: Any = print,
) -> dict[str, Any]:
    """Park ``count`` deployments on one runner; their rate and the load."""
    container = f"bench-{uuid.uuid4().hex[:10]}"
    conf_path = workdir / "launch.conf"
    bcloud.write_private(
        conf_path,
        bcloud.conf_text(
            cloud,
            database=f"sqlite:///{workdir / 'launch.sqlite'}",
            container=container,
        ),
    )
    load_before = bcloud.load_average()
    with bcloud.instance(
        conf_path,
        delivery_timeout=0,
        watcher__poll_interval=3600.0,
        watcher__sweep_interval=3600.0,
    ) as sw:
        config = sw.create_config("bench", "#!/bin/sh\necho ok\n", group="script")
        population = waiting.Population(sw, config.id)
        log(f"launching {count} deployments to {count // waiting.PER_SERVER} servers")
        started = time.perf_counter()
        try:
            population.grow(count, config_transport=names.POLL_TEMP_URL)
            seconds = time.perf_counter() - started
        finally:
            swift = sw.services.clients.object_store
            for made in (container, f"{container}-metadata"):
                swift.delete_container(made, force=True)
            left = [
                c
                for c in (container, f"{container}-metadata")
                if swift.container_exists(c)
            ]
    if left:
        raise RuntimeError(f"the bench left containers behind: {left}")
    return {
        "deployments": count,
        "servers": count // waiting.PER_SERVER,
        "s": seconds,
        "per_s": count / seconds,
        "load_before": load_before,
        "load_after": bcloud.load_average(),
    }


__all__ = ["GOAL_PER_S", "run"]
