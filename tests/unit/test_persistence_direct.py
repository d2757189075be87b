"""Statements run on the driver's cursor do what SQLAlchemy's execution
does: the same rows and counts, the types' conversions, Python defaults,
the connection's events, and SQLAlchemy's errors.  On SQLite here; on
PostgreSQL and MariaDB in tests/functional/test_direct.py."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from taskflow.persistence.backends.sqlalchemy.tables import JSONType

from swflows.persistence import direct

STAMP = datetime.datetime(2026, 1, 2, 3, 4, 5)


def make_table(prefix: str) -> sa.Table:
    return sa.Table(
        f"{prefix}direct",
        sa.MetaData(),
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("owner", sa.String(64)),
        sa.Column("hits", sa.Integer, nullable=False, default=0),
        sa.Column("meta", JSONType()),
        sa.Column("changed", sa.DateTime, onupdate=lambda: STAMP),
    )


class DirectContract:
    """Run against the ``engine`` fixture of each database."""

    @pytest.fixture
    def table(self, engine: sa.Engine) -> Iterator[sa.Table]:
        table = make_table(f"t{uuid.uuid4().hex[:8]}_")
        table.metadata.create_all(engine)
        with engine.begin() as conn:
            conn.execute(
                sa.insert(table),
                [
                    {"id": "a", "owner": "x", "hits": 1, "meta": {"k": [1]}},
                    {"id": "b", "owner": "y", "hits": 2, "meta": None},
                ],
            )
        yield table
        table.metadata.drop_all(engine)

    def test_an_update_binds_converts_and_counts_as_sqlalchemy_does(
        self, engine: sa.Engine, table: sa.Table
    ) -> None:
        update = direct.Direct(
            table.update().where(
                table.c.id == sa.bindparam("which"), table.c.owner == "x"
            )
        )
        with engine.begin() as conn:
            ran = update.run(conn, {"which": "a", "meta": {"new": True}, "hits": 5})
            assert isinstance(ran, direct.Ran)  # not SQLAlchemy's own
            assert ran.rowcount == 1
            # the literal "x" is bound too: b's owner is y
            assert update.run(conn, {"which": "b", "hits": 9}).rowcount == 0
        with engine.connect() as conn:
            rows = {r.id: r for r in conn.execute(sa.select(table))}
        assert rows["a"].meta == {"new": True}  # the JSON type's processor
        assert rows["a"].hits == 5
        assert rows["a"].changed == STAMP  # the column's onupdate
        assert (rows["b"].hits, rows["b"].changed) == (2, None)

    def test_a_select_gives_named_rows(
        self, engine: sa.Engine, table: sa.Table
    ) -> None:
        select = direct.Direct(
            sa.select(table.c.owner, table.c.hits)
            .where(table.c.id == sa.bindparam("which"))
            .with_for_update(read=True)
        )
        with engine.begin() as conn:
            row = select.run(conn, {"which": "b"}).first()
            assert select.run(conn, {"which": "nobody"}).first() is None
        assert (row.owner, row.hits) == ("y", 2)

    def test_a_delete_and_the_connections_events(
        self, engine: sa.Engine, table: sa.Table
    ) -> None:
        delete = direct.Direct(table.delete().where(table.c.id == sa.bindparam("id")))
        seen: list[str] = []

        def before(*args: Any) -> None:
            seen.append(str(args[2]))

        sa.event.listen(engine, "before_cursor_execute", before)
        try:
            with engine.begin() as conn:
                assert delete.run(conn, {"id": "a"}).rowcount == 1
        finally:
            sa.event.remove(engine, "before_cursor_execute", before)
        assert len(seen) == 1 and seen[0].upper().startswith("DELETE")
        with engine.connect() as conn:
            assert [r.id for r in conn.execute(sa.select(table.c.id))] == ["b"]

    def test_a_rolled_back_transaction_keeps_nothing_written_directly(
        self, engine: sa.Engine, table: sa.Table
    ) -> None:
        delete = direct.Direct(table.delete().where(table.c.id == sa.bindparam("id")))
        with pytest.raises(RuntimeError), engine.begin() as conn:
            delete.run(conn, {"id": "a"})
            raise RuntimeError("stop")
        with engine.connect() as conn:
            assert (
                conn.execute(sa.select(sa.func.count()).select_from(table)).scalar()
                == 2
            )

    def test_a_drivers_error_is_sqlalchemys(
        self, engine: sa.Engine, table: sa.Table
    ) -> None:
        """A constraint broken: SQLAlchemy's IntegrityError, its statement
        named, as from SQLAlchemy's own execution."""
        update = direct.Direct(
            table.update().where(table.c.id == sa.bindparam("which"))
        )
        with pytest.raises(sa.exc.IntegrityError) as raised, engine.begin() as conn:
            update.run(conn, {"which": "a", "hits": None})
        assert "UPDATE" in str(raised.value.statement).upper()

    def test_a_missing_value_is_named(self, engine: sa.Engine, table: sa.Table) -> None:
        update = direct.Direct(
            table.update().where(table.c.id == sa.bindparam("which"))
        )
        with pytest.raises(sa.exc.InvalidRequestError, match="which"):
            with engine.begin() as conn:
                update.run(conn, {"hits": 3})

    def test_selected_values_are_converted_by_their_types(
        self, engine: sa.Engine, table: sa.Table
    ) -> None:
        """JSON text read back as values, a timestamp as a datetime (SQLite
        keeps it as text), as SQLAlchemy's own select reads them."""
        with engine.begin() as conn:
            conn.execute(table.update().where(table.c.id == "a").values(hits=4))
        columns = (table.c.id, table.c.meta, table.c.changed, table.c.hits)
        select = direct.Direct(sa.select(*columns).order_by(table.c.id))
        with engine.connect() as conn:
            ran = select.run(conn, {})
            assert isinstance(ran, direct.Ran)
            theirs = [tuple(row) for row in conn.execute(sa.select(*columns))]
        mine = [tuple(row) for row in ran]
        assert sorted(mine) == sorted(theirs)
        assert mine[0] == ("a", {"k": [1]}, STAMP, 4)
        assert ran.first()._mapping["meta"] == {"k": [1]}
        assert ran.scalars() == ["a", "b"]

    def test_what_it_cannot_reproduce_runs_through_sqlalchemy(
        self, engine: sa.Engine, table: sa.Table
    ) -> None:
        """An expanding IN: the result is SQLAlchemy's own, and right."""
        update = direct.Direct(
            table.update().where(table.c.id.in_(sa.bindparam("ids", expanding=True)))
        )
        with engine.begin() as conn:
            ran = update.run(conn, {"ids": ["a", "b"], "hits": 7})
            assert not isinstance(ran, direct.Ran)
            assert ran.rowcount == 2

    def test_rows_are_inserted_together_with_their_defaults(
        self, engine: sa.Engine, table: sa.Table
    ) -> None:
        """Five rows, at most two a statement: three INSERTs; a column the
        rows leave out gets its default; rows of other columns are refused
        before anything is written."""
        inserts = direct.Inserts(table, most=2)
        rows = [{"id": f"n{i}", "meta": {"i": i}, "owner": None} for i in range(5)]
        seen: list[str] = []

        def before(*args: Any) -> None:
            seen.append(str(args[2]).upper())

        sa.event.listen(engine, "before_cursor_execute", before)
        try:
            with engine.begin() as conn:
                inserts.run(conn, rows)
        finally:
            sa.event.remove(engine, "before_cursor_execute", before)
        assert len(seen) == 3 and all(s.startswith("INSERT") for s in seen)
        with engine.connect() as conn:
            got = {
                r.id: (r.meta, r.hits)
                for r in conn.execute(sa.select(table).where(table.c.id.like("n%")))
            }
        assert got == {f"n{i}": ({"i": i}, 0) for i in range(5)}
        with pytest.raises(sa.exc.ArgumentError, match="same columns"):
            with engine.begin() as conn:
                inserts.run(conn, [{"id": "m1"}, {"id": "m2", "owner": "z"}])
        with engine.connect() as conn:
            assert (
                conn.execute(sa.select(table.c.id).where(table.c.id.like("m%"))).all()
                == []
            )


class TestDirect(DirectContract):
    @pytest.fixture
    def engine(self, tmp_path: Any) -> Iterator[sa.Engine]:
        made = sa.create_engine(f"sqlite:///{tmp_path / 'direct.sqlite'}")
        yield made
        made.dispose()
