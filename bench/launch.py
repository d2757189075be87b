"""Launch rate: deployments submitted to parked per second, real cloud calls.

``count`` TEMP_URL_SIGNAL deployments with POLL_TEMP_URL metadata, ten to a
server, are submitted against the dev cloud's Swift and Keystone; the time
runs from the first submission until every flow is parked.

* :func:`run`: one runner drives them (four submitting threads, as
  ``waiting.Population`` does; SQLite), launched in rounds (``[runner]
  launch_batch``, the default) and, as the baseline in the same run, with
  an engine each (``launch_batch = 0``);
* :func:`run_conductors`: 1 or 2 ``swflows conductor`` processes drive
  them, posted as jobs on a Redis board by a process that drives none
  (:data:`CONDUCTOR_THREADS` submitting threads, each deploy returning once
  a conductor wrote its deployment's row; PostgreSQL); the conductors
  launch the deploys they claim in rounds too.

The watchers look once an hour, so that only launching is measured.  The
bench's signal and metadata containers are removed at the end.
"""

from __future__ import annotations

import pathlib
import time
import uuid
from typing import Any

from bench import cloud as bcloud
from bench import conductors as bconductors
from bench import overhead, waiting
from swflows import transport_names as names

#: the rate one runner is to reach (docs/performance.md)
GOAL_PER_S = 100
#: threads submitting to conductors: a deploy there returns only once a
#: conductor has started its flow, so more are needed than for one runner
CONDUCTOR_THREADS = 16


def _rate(count: int, seconds: float, load_before: list[float]) -> dict[str, Any]:
    return {
        "deployments": count,
        "servers": count // waiting.PER_SERVER,
        "s": seconds,
        "per_s": count / seconds,
        "load_before": load_before,
        "load_after": bcloud.load_average(),
    }


def run(
    cloud: dict[str, Any],
    workdir: pathlib.Path,
    count: int = 1000,
    log: Any = print,
    batch: int | None = None,
) -> dict[str, Any]:
    """Park ``count`` deployments on one runner; their rate and the load.

    ``batch`` is ``[runner] launch_batch`` (None: its default, new
    deployments launched in rounds; 0: an engine each, the baseline)."""
    container = f"bench-{uuid.uuid4().hex[:10]}"
    name = "launch" if batch is None else f"launch-{batch}"
    conf_path = workdir / f"{name}.conf"
    bcloud.write_private(
        conf_path,
        bcloud.conf_text(
            cloud,
            database=f"sqlite:///{workdir / f'{name}.sqlite'}",
            container=container,
        ),
    )
    load_before = bcloud.load_average()
    overrides: dict[str, Any] = {}
    if batch is not None:
        overrides["runner__launch_batch"] = batch
    with bcloud.instance(
        conf_path,
        delivery_timeout=0,
        watcher__poll_interval=3600.0,
        watcher__sweep_interval=3600.0,
        **overrides,
    ) as sw:
        config = sw.create_config("bench", "#!/bin/sh\necho ok\n", group="script")
        population = waiting.Population(sw, config.id)
        log(
            f"launching {count} deployments to {count // waiting.PER_SERVER} "
            f"servers ({'an engine each' if batch == 0 else 'in rounds'})"
        )
        started = time.perf_counter()
        try:
            population.grow(count, config_transport=names.POLL_TEMP_URL)
            seconds = time.perf_counter() - started
        finally:
            bcloud.remove_containers(sw, container)
    return _rate(count, seconds, load_before)


def run_conductors(
    cloud: dict[str, Any],
    workdir: pathlib.Path,
    count: int = 1000,
    conductors: tuple[int, ...] = (1, 2),
    log: Any = print,
) -> dict[str, Any]:
    """Park ``count`` deployments through each number of ``conductors``,
    each on a board, tables and containers of its own."""
    out: dict[str, Any] = {}
    with overhead.pg_database() as database:
        for n in conductors:
            board = bconductors.Board(
                cloud,
                workdir,
                database,
                "redis",
                claim_expiry=30,
                watcher="poll_interval = 3600\n",
            )
            try:
                procs = [board.spawn() for _ in range(n)]
                for proc in procs:
                    board.ready(proc)
                with board.poster() as sw:
                    container = str(sw.conf.signal_container)
                    try:
                        config = sw.create_config(
                            "bench", "#!/bin/sh\necho ok\n", group="script"
                        )
                        population = waiting.Population(sw, config.id)
                        log(
                            f"launching {count} deployments to "
                            f"{count // waiting.PER_SERVER} servers, {n} conductor(s)"
                        )
                        load_before = bcloud.load_average()
                        started = time.perf_counter()
                        population.grow(
                            count,
                            config_transport=names.POLL_TEMP_URL,
                            threads=CONDUCTOR_THREADS,
                        )
                        seconds = time.perf_counter() - started
                    finally:
                        board.stop_all()
                        bcloud.remove_containers(sw, container)
            finally:
                board.close()
            out[str(n)] = {"conductors": n, **_rate(count, seconds, load_before)}
    return out


__all__ = ["CONDUCTOR_THREADS", "GOAL_PER_S", "run", "run_conductors"]
