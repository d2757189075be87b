"""Benchmarks, printed as ratios against a baseline measured in the same run.

Now: the cost of persisting a flow.  The same linear flow of five trivial
tasks runs with TaskFlow's stock SQLAlchemy logbook and with swflows'
store-backed logbook, on the same database, alternating, and the table
shows ms per flow and the ratio.  ``--database`` picks SQLite (a temporary
file, the default) or a PostgreSQL URL.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from typing import Any

from taskflow import engines, task
from taskflow.patterns import linear_flow
from taskflow.persistence import backends, models

from swflows.persistence.store import Store


class Step(task.Task):  # type: ignore[misc]
    def execute(self, value: int) -> int:
        return value + 1


def make_flow() -> linear_flow.Flow:
    flow = linear_flow.Flow("bench")
    for i in range(5):
        flow.add(
            Step(
                f"step{i}",
                rebind={"value": "v0" if i == 0 else f"v{i}"},
                provides=f"v{i + 1}",
            )
        )
    return flow


def one_flow(backend: Any) -> float:
    started = time.perf_counter()
    book = models.LogBook("bench")
    with contextlib.closing(backend.get_connection()) as conn:
        conn.save_logbook(book)
    engine = engines.load(make_flow(), store={"v0": 0}, book=book, backend=backend)
    engine.run()
    assert engine.storage.fetch("v5") == 5
    return (time.perf_counter() - started) * 1000


def measure(backends_: dict[str, Any], flows: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in backends_}
    for _ in range(flows):  # alternate, so load on the machine hits both alike
        for name, backend in backends_.items():
            times[name].append(one_flow(backend))
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--flows", type=int, default=40)
    parser.add_argument("--database", default=None, help="SQLAlchemy URL")
    parser.add_argument("--json", default=None, help="also write figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database or f"sqlite:///{tmp}/bench.sqlite"
        store = Store(url, secret_key_file=f"{tmp}/key")
        ours = store.taskflow_backend()
        stock = backends.fetch({"connection": url})
        with contextlib.closing(stock.get_connection()) as conn:
            conn.upgrade()
        measure({"stock": stock, "swflows": ours}, 3)  # warm up
        times = measure({"stock": stock, "swflows": ours}, args.flows)
        store.close()
    medians = {name: statistics.median(v) for name, v in times.items()}
    means = {name: statistics.fmean(v) for name, v in times.items()}

    def ratio(m: dict[str, float]) -> float:
        return m["stock"] / m["swflows"]

    kind = url.split(":")[0]
    print(f"flow persistence, 5-task linear flow, {args.flows} flows each, {kind}")
    print(f"{'logbook':<10}{'median ms':>12}{'mean ms':>12}")
    for name in times:
        print(f"{name:<10}{medians[name]:>12.1f}{means[name]:>12.1f}")
    print(f"stock/swflows: {ratio(medians):.1f}x (median), {ratio(means):.1f}x (mean)")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"median_ms": medians, "mean_ms": means}, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
