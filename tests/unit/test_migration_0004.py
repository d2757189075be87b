"""Migration 0004: TaskFlow's logbook moves under the store's prefix.

A store made before it kept its flows' logbooks in TaskFlow's unprefixed
tables; the upgrade moves swflows' logbooks (and only those) into the
prefixed tables, and the downgrade moves them back.  The same test runs on
PostgreSQL in ``tests/functional/test_store.py``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from taskflow.persistence import models
from taskflow.persistence.backends import impl_sqlalchemy

from swflows.persistence import logbook, migrations, tables

PREFIX = "mig_"


def book(name: str) -> models.LogBook:
    made = models.LogBook(name)
    flow = models.FlowDetail(f"{name}-flow", uuid=made.uuid)
    flow.state = "SUSPENDED"
    atom = models.TaskDetail("swflows.d.AwaitSignal", uuid=f"{made.uuid}-a")
    atom.state = "PENDING"
    atom.results = {"waited": True}
    flow.add(atom)
    made.add(flow)
    return made


def read(backend: object, book_id: str) -> dict[str, object]:
    with contextlib.closing(backend.get_connection()) as conn:  # type: ignore[attr-defined]
        found = conn.get_logbook(book_id)
    return {
        "name": found.name,
        "flows": {
            fd.name: (fd.state, {ad.name: (ad.state, ad.results) for ad in fd})
            for fd in found
        },
    }


def names(engine: sa.Engine) -> set[str]:
    with engine.connect() as conn:
        return set(sa.inspect(conn).get_table_names())


def check_move(engine: sa.Engine, prefix: str = PREFIX) -> None:
    """Run 0003 -> 0004 -> 0003 on ``engine`` (an empty database)."""
    with engine.begin() as conn:
        command.upgrade(migrations.make_config(conn, prefix), "0003")
    stock = impl_sqlalchemy.SQLAlchemyBackend({}, engine=engine)
    with contextlib.closing(stock.get_connection()) as conn:
        conn.upgrade()
        ours, theirs = book("swflows-deploy-d1"), book("octavia-amphora")
        conn.save_logbook(ours)
        conn.save_logbook(theirs)
    before = read(stock, ours.uuid)

    with engine.begin() as conn:
        command.upgrade(migrations.make_config(conn, prefix), "0004")
    prefixed = logbook.Backend(engine, tables.tables(prefix))
    assert read(prefixed, ours.uuid) == before
    with contextlib.closing(stock.get_connection()) as conn:
        assert [b.name for b in conn.get_logbooks()] == ["octavia-amphora"]
        assert read(stock, theirs.uuid)["flows"]  # theirs kept its details
    with engine.connect() as conn:
        atoms = sa.select(sa.func.count()).select_from(sa.table("atomdetails"))
        assert conn.scalar(atoms) == 1  # only theirs is left unprefixed

    with engine.begin() as conn:
        command.downgrade(migrations.make_config(conn, prefix), "0003")
    assert not {f"{prefix}tf_logbooks", f"{prefix}tf_atomdetails"} & names(engine)
    assert read(stock, ours.uuid) == before


def test_upgrade_moves_swflows_logbooks_and_downgrade_moves_them_back(
    tmp_path: Path,
) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'store.sqlite'}")
    try:
        check_move(engine)
    finally:
        engine.dispose()


def test_a_new_store_has_only_prefixed_tables(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'store.sqlite'}")
    try:
        assert migrations.upgrade(engine, PREFIX)
        found = names(engine)
        assert {f"{PREFIX}tf_{n}" for n in logbook.TASKFLOW_TABLES} <= found
        assert not found & {*logbook.TASKFLOW_TABLES, "alembic_version"}
    finally:
        engine.dispose()


def test_the_logbook_columns_are_taskflows() -> None:
    """The prefixed tables have the columns TaskFlow's SQL backend uses."""
    from taskflow.persistence.backends.sqlalchemy import tables as tf_tables

    theirs = tf_tables.fetch(sa.MetaData())
    ours = tables.tables(PREFIX)
    for mine, stock in zip(
        (ours.tf_logbooks, ours.tf_flowdetails, ours.tf_atomdetails),
        theirs,
        strict=True,
    ):
        assert mine.name == f"{PREFIX}tf_{stock.name}"
        assert [c.name for c in mine.columns] == [c.name for c in stock.columns]
