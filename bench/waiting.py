"""Waiting deployments on the dev cloud: requests per poll, latency, memory, resume.

One population of TEMP_URL_SIGNAL deployments (config transport
POLL_SERVER_HEAT, so Swift holds only their signal objects) is parked by a
first runner and reused for every measurement, in this order:

1. requests per poll cycle at the small and the full size: swflows' watcher
   cycle and the Heat-style poller, counted by the proxy in front of Swift;
2. threads and RSS of that runner (at fleet size, real deployments:
   :mod:`bench.parked`);
3. the Heat-style poller's own latency at the tiny, small and large sizes
   (a pass over every deployment each second; "started" progress signals,
   taken in by one watcher cycle afterwards);
4. resume: the first runner is closed, its parked flows are made to look
   interrupted (RUNNING, lease run out, owner dead), and a fresh runner is
   timed from start until every one is parked again;
5. latency from a signal landing to the deployment row COMPLETE, on the
   fresh runner with its watcher polling on its own: TEMP_URL_SIGNAL on a
   sample of the population, then ZAQAR_SIGNAL on as many new deployments
   (the population's rest still waiting beside them).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import pathlib
import random
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import requests
import sqlalchemy as sa

from bench import cloud as bcloud
from bench.heatpoll import HeatStylePoller
from bench.proxy import CountingProxy
from swflows import signals, states
from swflows import transport_names as names
from swflows.agent import notify
from swflows.api import Swflows
from swflows.persistence import flow_registry as flow_rows

#: what an agent sends when its script succeeded
FINAL = {"deploy_status_code": 0, "deploy_stdout": "ok", "result": "r"}
#: deployments per server, as a cloud of small servers would have
PER_SERVER = 10


@dataclasses.dataclass
class Sizes:
    small: int = 100
    large: int = 1000
    #: real deployments parked by :mod:`bench.parked`
    fleet: int = 10_000
    sample: int = 100
    #: the Heat-style poller's latency is also measured with this few waiting
    tiny: int = 10
    #: signals sent for each of its latency measurements
    heat_signals: int = 20
    #: HEAT_SIGNAL deployments signalled through the endpoint
    heat_sample: int = 20
    #: seconds between two signals of the latency sample
    spacing: float = 0.2
    poll_interval: float = 0.5


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = q / 100 * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _count_rows(sw: Swflows, state: str) -> int:
    flows = sw.store.tables.flows
    query = sa.select(sa.func.count()).where(flows.c.state == state)
    with sw.store.engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def _count_parked(sw: Swflows, deployment_ids: Sequence[str]) -> int:
    flows = sw.store.tables.flows
    found = 0
    with sw.store.engine.connect() as conn:
        for start in range(0, len(deployment_ids), 500):
            query = sa.select(sa.func.count()).where(
                flows.c.state == flow_rows.PARKED,
                flows.c.deployment_id.in_(deployment_ids[start : start + 500]),
            )
            found += int(conn.execute(query).scalar_one())
    return found


def _counts(window: Any) -> dict[str, int]:
    return {f"{method} {kind}": n for (method, kind), n in sorted(window.items())}


class Population:
    """Parked deployments of one Swflows, with what the bench needs of each."""

    def __init__(self, sw: Swflows, config_id: str) -> None:
        self.sw = sw
        self.config_id = config_id
        self.ids: list[str] = []
        self._made = 0

    def grow(
        self,
        count: int,
        transport: str = names.TEMP_URL_SIGNAL,
        config_transport: str | None = None,
        threads: int = 4,
    ) -> list[str]:
        """Deploy ``count`` more from ``threads`` threads and wait until
        every flow is parked."""
        base = self._made
        self._made += count
        if config_transport is None:
            # POLL_SERVER_HEAT keeps Swift's listing to signal objects; it is
            # read by Heat's agents, which cannot send a ZAQAR_SIGNAL: those
            # servers poll a TempURL instead
            config_transport = (
                names.POLL_SERVER_HEAT
                if transport == names.TEMP_URL_SIGNAL
                else names.POLL_TEMP_URL
            )

        def one(i: int) -> str:
            dep = self.sw.deploy(
                f"bench-server-{(base + i) // PER_SERVER}",
                self.config_id,
                timeout=3600,
                wait=False,
                signal_transport=transport,
                config_transport=config_transport,
            )
            return dep.id

        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            made = list(pool.map(one, range(count)))
        self.ids.extend(made)
        total = len(self.ids)
        bcloud.until(
            lambda: _count_parked(self.sw, made) == count,
            timeout=60 + total * 1.5,
            what=f"{count} flows to park",
        )
        return made


def signal_target(sw: Swflows, deployment_id: str) -> notify.Target:
    """Where the agent of ``deployment_id`` sends its signal, from its inputs."""
    dep = sw.show(deployment_id)
    config = sw.get_config(str(dep.config_id))
    return notify.target_of(config.id, {i.name: i.value for i in config.inputs})


def requests_per_cycle(
    sw: Swflows, proxy: CountingProxy, ids: Sequence[str], cloud: dict[str, Any]
) -> dict[str, Any]:
    """One idle cycle, then one where a tenth (at most 10) sent a progress
    signal: swflows' watcher against the Heat-style poller."""
    rows = {r.deployment_id: r for r in sw.runner.registry.parked()}
    objects = {}
    for dep_id in ids:
        store = (rows[dep_id].waiting or {})["store"]
        objects[dep_id] = f"{store['container']}/{store['object']}"
    storage_url, token = bcloud.swift_account(cloud, via=proxy.url)
    # Swift rounds Last-Modified up to the second: let the objects' second
    # pass, as a deployment row's updated_at is later than its object
    time.sleep(1.1)
    since = time.time()
    poller = HeatStylePoller(storage_url, token, objects, dict.fromkeys(ids, since))
    watcher = sw.runner.watcher
    out: dict[str, Any] = {"waiting": len(ids)}
    try:
        for label in ("idle", "signals"):
            landed = 0 if label == "idle" else min(10, max(1, len(ids) // 10))
            # the newest: not signalled in an earlier measurement
            chosen = list(ids[len(ids) - landed :])
            if chosen:
                # Last-Modified has whole seconds: land after ``since``'s second
                time.sleep(max(0.0, int(since) + 1.1 - time.time()))
                sender = notify.HttpSignal(requests.Session())
                body = notify.prepare(signals.progress_payload(), 10_000)
                for dep_id in chosen:
                    sender.send(signal_target(sw, dep_id), body)
            started = time.perf_counter()
            with proxy.window() as ours:
                resumed = watcher.cycle()
            ours_s = time.perf_counter() - started
            assert resumed == [], "a progress signal resumed a flow"
            started = time.perf_counter()
            with proxy.window() as theirs:
                seen = poller.cycle()
            theirs_s = time.perf_counter() - started
            if len(seen) != landed:
                raise RuntimeError(f"Heat-style poller saw {len(seen)} of {landed}")
            picked = sum(
                1
                for r in sw.runner.registry.parked()
                if r.deployment_id in chosen and (r.waiting or {}).get("picked_up")
            )
            if picked != landed:
                raise RuntimeError(f"the watcher saw {picked} of {landed} signals")
            n_ours, n_theirs = sum(ours.values()), sum(theirs.values())
            out[label] = {
                "landed": landed,
                "swflows": {"requests": n_ours, "by_kind": _counts(ours), "s": ours_s},
                "heat_style": {
                    "requests": n_theirs,
                    "by_kind": _counts(theirs),
                    "s": theirs_s,
                },
                "ratio": n_theirs / n_ours if n_ours else None,
            }
    finally:
        poller.close()
    return out


def heat_style_latency(
    sw: Swflows,
    proxy: CountingProxy,
    objects: dict[str, str],
    chosen: Sequence[str],
    cloud: dict[str, Any],
    spacing: float,
) -> dict[str, Any]:
    """The Heat-style poller's own latency with ``len(objects)`` waiting.

    It passes over every deployment (a HEAD each, a GET of one that
    changed), starting a pass every second, or at once when a pass took
    longer, as Heat's per-deployment checks once a second would at best.
    ``chosen`` of them send a "started" progress signal, ``spacing`` s
    apart; the latency is from each PUT's return to the poller's GET of it.
    """
    storage_url, token = bcloud.swift_account(cloud, via=proxy.url)
    time.sleep(1.1)  # Last-Modified has whole seconds: see requests_per_cycle
    since = time.time()
    poller = HeatStylePoller(storage_url, token, objects, dict.fromkeys(objects, since))
    seen: dict[str, float] = {}
    passes: list[float] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set() and len(seen) < len(chosen):
            started = time.monotonic()
            for dep_id in poller.cycle():
                seen.setdefault(dep_id, time.time())
            passes.append(time.monotonic() - started)
            stop.wait(max(0.0, 1.0 - (time.monotonic() - started)))

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    landed: dict[str, float] = {}
    try:
        time.sleep(max(0.0, int(since) + 1.1 - time.time()))
        sender = notify.HttpSignal(requests.Session())
        body = notify.prepare(signals.progress_payload(), 10_000)
        targets = [signal_target(sw, dep_id) for dep_id in chosen]
        rng = random.Random(9)
        for dep_id, target in zip(chosen, targets, strict=True):
            time.sleep(rng.uniform(0.5, 1.5) * spacing)
            sender.send(target, body)
            landed[dep_id] = time.time()
        bcloud.until(
            lambda: len(seen) == len(chosen),
            timeout=120 + 0.1 * len(objects),
            what="the Heat-style poller to see every signal",
        )
    finally:
        stop.set()
        thread.join(120)
        poller.close()
    delays = [seen[dep_id] - landed[dep_id] for dep_id in chosen]
    return {
        "waiting": len(objects),
        "signals": len(chosen),
        "per_s": 1 / spacing,
        "p50_s": percentile(delays, 50),
        "p99_s": percentile(delays, 99),
        "max_s": max(delays),
        "pass_s": percentile(passes, 50),
    }


def heat_style_latencies(
    sw: Swflows,
    proxy: CountingProxy,
    ids: Sequence[str],
    spared: set[str],
    cloud: dict[str, Any],
    sizes: Sizes,
) -> dict[str, Any]:
    """:func:`heat_style_latency` at the tiny, small and large sizes; each
    signals deployments of its own (none of ``spared``)."""
    rows = {r.deployment_id: r for r in sw.runner.registry.parked()}
    objects = {}
    for dep_id in ids:
        store = (rows[dep_id].waiting or {})["store"]
        objects[dep_id] = f"{store['container']}/{store['object']}"
    out: dict[str, Any] = {}
    done = 0
    for n in sorted({sizes.tiny, sizes.small, sizes.large}):
        free = [d for d in ids[done:n] if d not in spared]
        chosen = free[: sizes.heat_signals]
        done = n
        if not chosen:
            continue
        out[str(n)] = heat_style_latency(
            sw,
            proxy,
            {d: objects[d] for d in ids[:n]},
            chosen,
            cloud,
            sizes.spacing,
        )
    return out


def held(sw: Swflows, proxy: CountingProxy, label: str) -> dict[str, Any]:
    """Threads, RSS and one watcher cycle of a runner holding its parked flows."""
    parked = _count_rows(sw, flow_rows.PARKED)
    started = time.perf_counter()
    with proxy.window() as seen:
        sw.runner.watcher.cycle()
    return {
        "parked": parked,
        "how": label,
        "threads": bcloud.threads(),
        "rss_kib": bcloud.rss_kib(),
        "cycle_s": time.perf_counter() - started,
        "cycle_requests": sum(seen.values()),
        "cycle_by_kind": _counts(seen),
    }


def dead_owner() -> str:
    """An owner name of this host whose process has ended."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return f"{socket.gethostname()}:{proc.pid}:bench"


def orphan_all(sw: Swflows) -> int:
    """Make every parked flow look interrupted: RUNNING, owner dead, lease over."""
    flows = sw.store.tables.flows
    with sw.store.engine.begin() as conn:
        done = conn.execute(
            sa.update(flows)
            .where(flows.c.state == flow_rows.PARKED)
            .values(state=flow_rows.RUNNING, owner=dead_owner(), lease_until=0.0)
        )
    return int(done.rowcount)


class EndWatch:
    """Notes when each deployment's row leaves IN_PROGRESS, polling all of
    them in one query every ``interval`` s from a thread of its own.

    Rows keep their times to the second (as Heat's do), too coarse for a
    latency of about a second, so the end is seen here instead.
    """

    def __init__(self, sw: Swflows, ids: Sequence[str], interval: float = 0.02):
        self.ended: dict[str, float] = {}
        self._ids = list(ids)
        self._sw = sw
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> EndWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        deployments = self._sw.store.tables.deployments
        engine = self._sw.store.engine
        while not self._stop.is_set():
            left = [d for d in self._ids if d not in self.ended]
            if not left:
                return
            query = sa.select(deployments.c.id).where(
                deployments.c.id.in_(left),
                deployments.c.status != states.IN_PROGRESS,
            )
            with engine.connect() as conn:
                done = list(conn.execute(query).scalars())
            now = time.time()
            for dep_id in done:
                self.ended[dep_id] = now
            self._stop.wait(self._interval)


def latency(
    sw: Swflows, ids: Sequence[str], sender: notify.Notifier, spacing: float
) -> dict[str, Any]:
    """Signal each deployment as its agent would, ``spacing`` s apart; the
    time from each signal request's return to its row becoming COMPLETE."""
    body = notify.prepare(FINAL, sender.max_bytes)
    targets = [signal_target(sw, dep_id) for dep_id in ids]
    landed: dict[str, float] = {}
    sent: dict[str, float] = {}
    rng = random.Random(8)
    with EndWatch(sw, ids) as watch:
        for dep_id, target in zip(ids, targets, strict=True):
            time.sleep(rng.uniform(0.5, 1.5) * spacing)
            sent[dep_id] = time.time()
            sender.send(target, body)
            landed[dep_id] = time.time()
        bcloud.until(
            lambda: len(watch.ended) == len(ids),
            timeout=120 + len(ids),
            what="every signalled row to end",
        )
    # from the request's return (negative: the watcher wrote the row before
    # the response reached the sender), and from the moment it was sent
    delays, from_sent = [], []
    for dep_id in ids:
        dep = sw.show(dep_id)
        if dep.status != states.COMPLETE:
            raise RuntimeError(f"deployment {dep_id} ended {dep.status}: {dep.reason}")
        delays.append(watch.ended[dep_id] - landed[dep_id])
        from_sent.append(watch.ended[dep_id] - sent[dep_id])
    for dep_id in ids:  # each flow ends, removing its signal store
        sw.wait(dep_id, timeout=300)
    return {
        "signals": len(ids),
        "per_s": 1 / spacing,
        "p50_s": percentile(delays, 50),
        "p99_s": percentile(delays, 99),
        "max_s": max(delays),
        "sent_p50_s": percentile(from_sent, 50),
        "sent_p99_s": percentile(from_sent, 99),
    }


def queues_of(sw: Swflows, ids: Sequence[str]) -> list[str]:
    wanted = set(ids)
    return [
        q
        for q in sw.services.clients.messaging.list_queues()
        if any(d in q for d in wanted)
    ]


def run(
    cloud: dict[str, Any],
    proxy: CountingProxy,
    workdir: pathlib.Path,
    sizes: Sizes,
    log: Any = print,
) -> dict[str, Any]:
    """Every measurement on waiting deployments; leaves nothing behind."""
    container = f"bench-{uuid.uuid4().hex[:10]}"
    conf_path = workdir / "swflows.conf"
    bcloud.write_private(
        conf_path,
        bcloud.conf_text(
            cloud,
            database=f"sqlite:///{workdir / 'waiting.sqlite'}",
            swift_url=proxy.url,
            container=container,
        ),
    )
    common = {
        "delivery_timeout": 0,
        "watcher__sweep_interval": 3600.0,
    }
    results: dict[str, Any] = {"sizes": dataclasses.asdict(sizes)}
    zaqar_ids: list[str] = []
    with contextlib.ExitStack() as stack:
        before = bcloud.rss_kib()
        first = stack.enter_context(
            bcloud.instance(conf_path, watcher__poll_interval=3600.0, **common)
        )
        second: Swflows | None = None
        try:
            config = first.create_config(
                "bench",
                "#!/bin/sh\necho ok\n",
                group="script",
                outputs=[{"name": "result"}],
            )
            population = Population(first, config.id)
            log(f"parking {sizes.small} deployments")
            started = time.perf_counter()
            population.grow(sizes.small)
            parked_small = time.perf_counter() - started
            results["requests"] = {
                str(sizes.small): requests_per_cycle(
                    first, proxy, population.ids, cloud
                )
            }
            log(f"parking {sizes.large - sizes.small} more")
            started = time.perf_counter()
            population.grow(sizes.large - sizes.small)
            results["parking"] = {
                "flows": sizes.large,
                "s": parked_small + time.perf_counter() - started,
            }
            results["requests"][str(sizes.large)] = requests_per_cycle(
                first, proxy, population.ids, cloud
            )
            results["held"] = {
                "rss_before_kib": before,
                str(sizes.large): held(first, proxy, "real deployments"),
            }

            sample = population.ids[:: max(1, sizes.large // sizes.sample)][
                : sizes.sample
            ]
            log("latency of the Heat-style poller")
            # the swflows sample and the deployments signalled above are spared
            spared = set(sample)
            for n in (sizes.small, sizes.large):
                landed = min(10, max(1, n // 10))
                spared.update(population.ids[n - landed : n])
            results["heat_style_latency"] = heat_style_latencies(
                first, proxy, population.ids, spared, cloud, sizes
            )
            first.runner.watcher.cycle()  # takes in those progress signals
            log(f"resume: {sizes.large} interrupted flows, a fresh runner")
            first.close()
            orphaned = orphan_all(first)
            assert orphaned == sizes.large, orphaned
            peak = 0
            started = time.perf_counter()
            second = stack.enter_context(
                bcloud.instance(
                    conf_path, watcher__poll_interval=sizes.poll_interval, **common
                )
            )
            up = time.perf_counter() - started

            def all_parked() -> bool:
                nonlocal peak
                peak = max(peak, bcloud.threads()["runner"])
                return _count_rows(second, flow_rows.PARKED) == sizes.large

            bcloud.until(all_parked, timeout=60 + sizes.large, what="resume")
            results["resume"] = {
                "flows": sizes.large,
                "start_s": up,
                "all_parked_s": time.perf_counter() - started,
                "peak_runner_threads": peak,
            }

            log(f"latency: {sizes.sample} TEMP_URL_SIGNAL signals")
            lat: dict[str, Any] = {"poll_interval_s": sizes.poll_interval}
            lat[names.TEMP_URL_SIGNAL] = latency(
                second, sample, notify.HttpSignal(requests.Session()), sizes.spacing
            )
            lat[names.TEMP_URL_SIGNAL]["waiting"] = sizes.large
            log(f"latency: {sizes.sample} ZAQAR_SIGNAL signals")
            zaqar = Population(second, config.id)
            zaqar._made = sizes.large
            zaqar_ids = zaqar.grow(sizes.sample, names.ZAQAR_SIGNAL)
            lat[names.ZAQAR_SIGNAL] = latency(
                second, zaqar_ids, notify.ZaqarSignal(requests.Session()), sizes.spacing
            )
            lat[names.ZAQAR_SIGNAL]["waiting"] = sizes.large
            results["latency"] = lat
        finally:
            sw = second or first
            swift = sw.services.clients.object_store
            for made in (container, f"{container}-metadata"):
                swift.delete_container(made, force=True)
            messaging = sw.services.clients.messaging
            for queue in queues_of(sw, zaqar_ids):
                messaging.delete_queue(queue)
            left = {
                "container": swift.container_exists(container)
                or swift.container_exists(f"{container}-metadata"),
                "queues": queues_of(sw, zaqar_ids),
            }
        if left["container"] or left["queues"]:
            raise RuntimeError(f"the bench left cloud resources behind: {left}")
    results["load_after"] = bcloud.load_average()
    return results


__all__ = ["Sizes", "percentile", "run"]
