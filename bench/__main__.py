"""swflows' benchmarks on the dev cloud, beside baselines measured in the same run.

    python -m bench [--quick] [--json PATH] [--no-postgresql]

1. Swift requests per poll cycle, swflows' watcher against a Heat-style
   poller (HEAD per deployment, GET on change), counted by a proxy in front
   of Swift (:mod:`bench.proxy`);
2. signal landed -> deployment COMPLETE, p50/p99, TEMP_URL_SIGNAL and
   ZAQAR_SIGNAL, with the whole population waiting;
3. threads and RSS of one runner holding the population, then 10,000 real
   deployments (:mod:`bench.parked`, with their signal latency);
4. flow overhead: swflows' deploy flow against the same tasks on bare
   TaskFlow with its stock SQLAlchemy logbook, cloud calls excluded, on
   SQLite and PostgreSQL (:mod:`bench.overhead`);
5. resume: a fresh runner takes over the population's interrupted flows;
6. command-line start-up: ``swflows deployment list`` against the
   interpreter and the libraries every command needs (:mod:`bench.startup`);
7. conductors on a jobboard: jobs drained per second by 1 and 2
   ``swflows conductor`` processes, beside TaskFlow's own conductor
   draining the same jobs (:mod:`bench.conductors`, :mod:`bench.stock`);
8. claim takeover: a conductor holding a claim is SIGKILLed, time until
   another holds it, on Redis and on ZooKeeper;
9. launch rate: deployments submitted to parked per second, 1,000 to 100
   servers on one runner, then through 1 and 2 conductors, real Swift and
   Keystone (:mod:`bench.launch`).

Prints one table and writes the same figures as JSON.  ``--quick`` runs
every measurement at a small size (for the smoke test).  Everything the
bench makes in the cloud and the databases is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time
from typing import Any

from bench import cloud as bcloud
from bench import conductors, launch, overhead, parked, push, startup, waiting
from bench.proxy import CountingProxy

DEFAULT_JSON = pathlib.Path(__file__).resolve().parent / "results.json"
QUICK = waiting.Sizes(
    small=10,
    large=30,
    fleet=60,
    sample=5,
    spacing=0.05,
    poll_interval=0.5,
    heat_signals=5,
    heat_sample=3,
)


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def _requests(side: dict[str, Any]) -> str:
    return f"{side['requests']} ({side['s'] * 1000:.0f} ms)"


def table(results: dict[str, Any]) -> str:
    """The figures of ``results`` as one plain-text table."""
    rows: list[tuple[str, str, str, str]] = []

    def add(what: str, ours: str, base: str, ratio: str = "") -> None:
        rows.append((what, ours, base, ratio))

    w = results.get("waiting", {})
    for n, found in w.get("requests", {}).items():
        for label in ("idle", "signals"):
            one = found[label]
            tag = "idle" if label == "idle" else f"{one['landed']} signals landed"
            add(
                f"1. Swift requests per poll cycle, {n} waiting, {tag}",
                _requests(one["swflows"]),
                _requests(one["heat_style"]),
                f"{one['ratio']:.0f}x fewer" if one["ratio"] else "",
            )
    lat = w.get("latency", {})
    for transport in ("TEMP_URL_SIGNAL", "ZAQAR_SIGNAL"):
        if transport in lat:
            one = lat[transport]
            add(
                f"2. signal -> COMPLETE, {transport}, {one['signals']} signals "
                f"at {one['per_s']:.0f}/s, "
                f"{one['waiting']} waiting, poll {lat['poll_interval_s']} s",
                f"p50 {one['p50_s']:.2f} s, p99 {one['p99_s']:.2f} s",
                "",
            )
    pushed = w.get("pushed", {})
    for transport, how in (
        ("ZAQAR_SIGNAL", "pushed by a Zaqar subscription"),
        ("HEAT_SIGNAL", "through the endpoint, from the POST sent"),
    ):
        if transport in pushed:
            one = pushed[transport]
            p50, p99 = (
                (one["sent_p50_s"], one["sent_p99_s"])
                if transport == "HEAT_SIGNAL"
                else (one["p50_s"], one["p99_s"])
            )
            add(
                f"2. signal -> COMPLETE, {transport} {how}, {one['signals']} "
                f"signals at {one['per_s']:.0f}/s",
                f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms",
                "",
            )
    ours = lat.get("TEMP_URL_SIGNAL")
    for n, one in w.get("heat_style_latency", {}).items():
        add(
            f"2. signal seen, Heat-style poller (a HEAD per deployment per second),"
            f" {one['signals']} signals, {n} waiting (a pass: {one['pass_s']:.2f} s)",
            f"p50 {ours['p50_s']:.2f} s, p99 {ours['p99_s']:.2f} s "
            f"({ours['waiting']} waiting)"
            if ours
            else "",
            f"p50 {one['p50_s']:.2f} s, p99 {one['p99_s']:.2f} s",
            f"its p50 = {one['p50_s'] / ours['p99_s']:.1f}x our p99" if ours else "",
        )
    before = w.get("held", {}).get("rss_before_kib", {}).get("rss", 0)
    for n, one in w.get("held", {}).items():
        if n == "rss_before_kib":
            continue
        add(
            f"3. one runner holding {one['parked']} parked ({one['how']})",
            f"{one['threads']['runner']} runner threads "
            f"({one['threads']['total']} in process), RSS "
            f"{one['rss_kib']['rss'] / 1024:.0f} MiB "
            f"(+{(one['rss_kib']['rss'] - before) / 1024:.0f} since before the "
            f"runner); cycle "
            f"{one['cycle_s'] * 1000:.0f} ms, {one['cycle_requests']} Swift requests",
            "",
        )
    for db, found in results.get("overhead", {}).items():
        for label, what in (
            ("deploy", "full deploy flow, cloud calls excluded"),
            ("linear5", "5 trivial tasks (persistence alone)"),
        ):
            one = found[label]
            add(
                f"4. {what}, {db}, {one['swflows']['flows']} flows, ms/flow median",
                f"{one['swflows']['median_ms']:.1f}",
                f"{one['stock']['median_ms']:.1f} (stock logbook)",
                f"{one['ratio_median']:.1f}x cheaper",
            )
            if "added_ms" in one:
                added = one["added_ms"]
                add(
                    f"   of which persistence and parking (over "
                    f"{one['unpersisted']['median_ms']:.1f} ms of task work)",
                    f"{added['swflows']:.1f}",
                    f"{added['stock']:.1f}",
                    f"{added['stock'] / added['swflows']:.1f}x cheaper"
                    if added["swflows"] > 0
                    else "",
                )
    if "resume" in w:
        one = w["resume"]
        add(
            f"5. resume {one['flows']} interrupted flows, fresh runner",
            f"{one['all_parked_s']:.1f} s until all parked "
            f"({one['flows'] / one['all_parked_s']:.0f} flows/s)",
            "",
        )
    if "startup" in results:
        one = results["startup"]
        add(
            f"6. CLI start-up, deployment list ({one['rows']} rows, SQLite), "
            f"median of {one['swflows']['runs']}",
            f"{one['swflows']['median_s']:.2f} s",
            f"{one['libraries']['median_s']:.2f} s importing its libraries "
            f"({one['interpreter']['median_s']:.2f} s bare interpreter)",
            f"{one['ratio_libraries']:.1f}x",
        )
    cond = results.get("conductors", {})
    for n, theirs in cond.get("stock", {}).items():
        ours = cond["drain"][n]
        add(
            f"7. jobs drained/s, {ours['jobs']} jobs of 3 trivial steps, Redis "
            f"board, PostgreSQL, {n} conductor(s)",
            f"{ours['per_s']:.1f}/s ({ours['drain_s']:.1f} s)",
            f"{theirs['per_s']:.1f}/s ({theirs['drain_s']:.1f} s), "
            f"{theirs['conductor']} conductor, stock logbook",
            f"{ours['vs_stock']:.2f}x",
        )
    if "drain" in cond:
        one, two = cond["drain"]["1"], cond["drain"]["2"]
        cpus = results.get("machine", {}).get("cpus")
        add(
            f"7. jobs drained/s, {one['jobs']} jobs of 3 trivial steps, Redis "
            f"board, PostgreSQL; {cpus} CPUs: 2 conductors at most double it",
            f"2 conductors: {two['per_s']:.1f}/s",
            f"1 conductor: {one['per_s']:.1f}/s",
            f"{cond['drain']['ratio']:.2f}x",
        )
    for kind, one in cond.get("takeover", {}).items():
        add(
            f"8. claim takeover after SIGKILL, {kind}, claim expiry "
            f"{one['claim_expiry_s']} s, {one['rounds']} round(s)",
            f"median {one['median_s']:.1f} s, max {one['max_s']:.1f} s",
            f"{one['claim_expiry_s']} s (claim expiry)",
            "",
        )
    rate = results.get("launch")
    if rate:
        add(
            f"9. deployments launched/s (submitted to parked), {rate['deployments']:,}"
            f" to {rate['servers']} servers, TEMP_URL_SIGNAL + POLL_TEMP_URL, "
            "one runner, SQLite",
            f"{rate['per_s']:.1f}/s ({rate['s']:.1f} s)",
            f"goal {launch.GOAL_PER_S}/s",
            f"{rate['per_s'] / launch.GOAL_PER_S:.2f}x",
        )
    engines = results.get("launch_engines")
    if rate and engines:
        add(
            "9. ... the same, an engine each from its start (launch_batch = 0)",
            f"{engines['per_s']:.1f}/s ({engines['s']:.1f} s)",
            f"in rounds: {rate['per_s']:.1f}/s",
            f"{rate['per_s'] / engines['per_s']:.2f}x",
        )
    by_conductors = results.get("launch_conductors", {})
    for n, one in by_conductors.items():
        add(
            f"9. ... driven by {n} conductor(s), posted from "
            f"{launch.CONDUCTOR_THREADS} threads, Redis board, PostgreSQL",
            f"{one['per_s']:.1f}/s ({one['s']:.1f} s)",
            f"1 conductor: {by_conductors['1']['per_s']:.1f}/s"
            if n != "1" and "1" in by_conductors
            else "",
            f"{one['per_s'] / by_conductors['1']['per_s']:.2f}x"
            if n != "1" and "1" in by_conductors
            else "",
        )
    fleet = results.get("parked")
    if fleet:
        one, lat, most = fleet["held"], fleet["latency"], parked.peak(fleet)
        add(
            f"3. one runner holding {one['parked']:,} parked (real), "
            f"launched at {fleet['launch']['per_s']:.1f}/s",
            f"{one['threads']['runner']} runner threads waiting, "
            f"{fleet['threads_after']['runner']} after the signals; RSS "
            f"{most['rss_mib']:.0f} MiB at most (+"
            f"{most['rss_mib'] - one['rss_before_kib']['rss'] / 1024:.0f} over "
            "the process before the runner); cycle "
            f"{one['cycle_s'] * 1000:.0f} ms, {one['cycle_requests']} Swift requests",
            f"goal: RSS <= {parked.GOAL['rss_mib']} MiB, <= "
            f"{parked.GOAL['runner_threads']} threads",
            "",
        )
        add(
            f"2. signal -> COMPLETE, TEMP_URL_SIGNAL, {lat['signals']} signals at "
            f"{lat['per_s']:.0f}/s, {lat['waiting']:,} waiting (real), poll "
            f"{lat['poll_interval_s']} s",
            f"p50 {lat['p50_s']:.2f} s, p99 {lat['p99_s']:.2f} s",
            f"goal: p50 <= {parked.GOAL['p50_s']} s, p99 <= {parked.GOAL['p99_s']} s",
            "",
        )
    head = ("measurement", "swflows", "baseline", "ratio")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(head, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows
    ]
    return "\n".join(lines)


def _parked_apart(args: argparse.Namespace, folder: pathlib.Path) -> Any:
    """``--only parked`` run as a process of its own; its figures."""
    out = folder / "parked.json"
    argv = [sys.executable, "-m", "bench", "--only", "parked", "--json", str(out)]
    if args.quick:
        argv.append("--quick")
    if args.cloud:
        argv += ["--cloud", args.cloud]
    subprocess.run(argv, check=True)
    return json.loads(out.read_text())["parked"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--json", default=str(DEFAULT_JSON), help="figures, as JSON")
    parser.add_argument("--flows", type=int, default=None, help="flows per side (4)")
    parser.add_argument("--no-postgresql", action="store_true", help="skip it in 4")
    parser.add_argument(
        "--only",
        choices=("waiting", "overhead", "startup", "conductors", "launch", "parked"),
        default=None,
        help="one part only",
    )
    parser.add_argument("--cloud", default=None, help="cloud.json of the dev cloud")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else waiting.Sizes()
    flows = args.flows or (3 if args.quick else 40)
    results: dict[str, Any] = {
        "mode": "quick" if args.quick else "full",
        "machine": machine(),
        "load_before": bcloud.load_average(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="swflows-bench-") as tmp:
        folder = pathlib.Path(tmp)
        if args.only in (None, "waiting"):
            cloud = bcloud.load_cloud(args.cloud)
            with CountingProxy(cloud["swift"]["proxy_url"]) as proxy:
                results["waiting"] = waiting.run(
                    cloud,
                    proxy,
                    folder,
                    sizes,
                    log=lambda m: print(f"... {m}", flush=True),
                )
                (folder / "push").mkdir()
                results["waiting"]["pushed"] = push.run(
                    cloud,
                    proxy,
                    folder / "push",
                    sizes,
                    log=lambda m: print(f"... {m}", flush=True),
                )
        # after the waiting part: its RSS figures are the runner's, not
        # those of the many flows run here
        if args.only in (None, "overhead"):
            print(f"4. flow overhead, {flows} flows per side", flush=True)
            results["overhead"] = overhead.run(
                folder, flows, postgresql=not args.no_postgresql
            )
        if args.only in (None, "startup"):
            print("6. command-line start-up", flush=True)
            results["startup"] = startup.run(folder, runs=3 if args.quick else 15)
        if args.only in (None, "conductors"):
            print("7, 8. conductors on a jobboard", flush=True)
            (folder / "conductors").mkdir()
            results["conductors"] = conductors.run(
                bcloud.load_cloud(args.cloud),
                folder / "conductors",
                jobs=10 if args.quick else 200,
                rounds=1 if args.quick else 3,
                log=lambda m: print(f"... {m}", flush=True),
            )
        if args.only in (None, "launch"):
            print("9. launch rate", flush=True)
            results["launch"] = launch.run(
                bcloud.load_cloud(args.cloud),
                folder,
                count=sizes.large,
                log=lambda m: print(f"... {m}", flush=True),
            )
            results["launch_engines"] = launch.run(
                bcloud.load_cloud(args.cloud),
                folder,
                count=sizes.large,
                log=lambda m: print(f"... {m}", flush=True),
                batch=0,
            )
            results["launch_conductors"] = launch.run_conductors(
                bcloud.load_cloud(args.cloud),
                folder,
                count=sizes.large,
                log=lambda m: print(f"... {m}", flush=True),
            )
        if args.only is None:
            # a process of its own (it prints its own heading): its RSS and
            # its garbage collector's passes are the runner's, not those of
            # the parts run before
            results["parked"] = _parked_apart(args, folder)
        if args.only == "parked":
            print(f"3. {sizes.fleet:,} real deployments parked", flush=True)
            cloud = bcloud.load_cloud(args.cloud)
            (folder / "parked").mkdir()
            with CountingProxy(cloud["swift"]["proxy_url"]) as proxy:
                results["parked"] = parked.run(
                    cloud,
                    proxy,
                    folder / "parked",
                    count=sizes.fleet,
                    sample=sizes.sample,
                    spacing=sizes.spacing,
                    poll_interval=sizes.poll_interval,
                    log=lambda m: print(f"... {m}", flush=True),
                )
    if pathlib.Path(tmp).exists():
        raise RuntimeError(f"{tmp} was not removed")
    results["load_after"] = bcloud.load_average()
    results["seconds"] = time.monotonic() - started
    bcloud.report(
        results, table(results), args.json, f"; {results['machine']['cpus']} CPUs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
