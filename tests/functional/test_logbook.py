"""The fast TaskFlow logbook on a SQLite file and on PostgreSQL.

Also prints ms per 5-task flow, stock backend against the fast one, on the
same engine (``pytest -s`` shows it).  Only a loose sanity bound is
asserted; the real benchmark lives in ``bench/``.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from typing import Any

from taskflow import engines, states
from taskflow.persistence import models
from taskflow.persistence.backends import impl_sqlalchemy

from swflows.persistence import Store
from tests.functional.db_fixtures import *  # noqa: F403 (fixtures)
from tests.unit.test_persistence_logbook import LogbookContract, make_flow

FLOWS = 20
WARMUP = 3


class TestLogbookSQL(LogbookContract):
    """Round trips and suspend/resume, on both databases."""


def run_flows(backend: Any, count: int) -> list[float]:
    """ms per flow: new logbook, load, run a 5-task linear flow."""
    times = []
    for _ in range(count):
        started = time.perf_counter()
        book = models.LogBook("bench")
        with contextlib.closing(backend.get_connection()) as conn:
            conn.save_logbook(book)
        engine = engines.load_from_factory(
            make_flow,
            factory_args=[5],
            store={"seed": 0, "run_id": book.uuid},
            book=book,
            backend=backend,
        )
        engine.run()
        times.append((time.perf_counter() - started) * 1000)
        assert engine.storage.get_flow_state() == states.SUCCESS
    return times


def test_fast_logbook_is_faster_than_stock(store: Store) -> None:
    fast = store.taskflow_backend()
    stock = impl_sqlalchemy.SQLAlchemyBackend({}, engine=store.engine)
    results = {}
    for label, backend in (("stock", stock), ("swflows", fast)):
        run_flows(backend, WARMUP)
        times = run_flows(backend, FLOWS)
        results[label] = (statistics.mean(times), statistics.median(times))
    name = store.engine.dialect.name
    print(
        f"\n{name}: ms per 5-task flow over {FLOWS} flows, mean/median: "
        f"stock {results['stock'][0]:.1f}/{results['stock'][1]:.1f}, "
        f"swflows {results['swflows'][0]:.1f}/{results['swflows'][1]:.1f} "
        f"({results['stock'][0] / results['swflows'][0]:.1f}x)"
    )
    assert results["swflows"][1] <= results["stock"][1]
