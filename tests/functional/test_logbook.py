"""The fast TaskFlow logbook on a SQLite file and on PostgreSQL.

Also counts the SQL statements of the same flows on the stock backend and
the fast one, on the same engine (``pytest -s`` prints them); time is
measured in ``bench/``.
"""

from __future__ import annotations

import contextlib
from typing import Any

import sqlalchemy as sa
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


def run_flows(backend: Any, count: int) -> int:
    """Run ``count`` 5-task linear flows, each with a new logbook; return
    how many SQL statements they took."""
    statements = 0

    def counted(*_: Any) -> None:
        nonlocal statements
        statements += 1

    sa.event.listen(backend.engine, "before_cursor_execute", counted)
    try:
        for _ in range(count):
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
            assert engine.storage.get_flow_state() == states.SUCCESS
    finally:
        sa.event.remove(backend.engine, "before_cursor_execute", counted)
    return statements


def test_fast_logbook_takes_fewer_statements_than_stock(store: Store) -> None:
    """The same flows on the same engine: the fast logbook saves the same
    rows (``LogbookContract``) in fewer statements.  Time is measured by
    ``bench/``, not here."""
    fast = store.taskflow_backend()
    stock = impl_sqlalchemy.SQLAlchemyBackend({}, engine=store.engine)
    with contextlib.closing(stock.get_connection()) as conn:
        conn.upgrade()  # TaskFlow's own unprefixed tables, beside swflows'
    counts = {}
    for label, backend in (("stock", stock), ("swflows", fast)):
        run_flows(backend, WARMUP)
        counts[label] = run_flows(backend, FLOWS)
    print(
        f"\n{store.engine.dialect.name}: SQL statements for {FLOWS} 5-task "
        f"flows: stock {counts['stock']}, swflows {counts['swflows']}"
    )
    assert counts["swflows"] < counts["stock"] * 0.9
