"""TaskFlow's logbook under the store's prefix: ``<prefix>tf_logbooks``,
``<prefix>tf_flowdetails`` and ``<prefix>tf_atomdetails``.

Before this revision the logbook lived in TaskFlow's unprefixed tables,
versioned by TaskFlow in ``alembic_version``, which an embedder's own
database (Heat's, for one) already uses.  The upgrade creates the prefixed
tables and moves swflows' logbooks (those named ``swflows-*``) with their
flow and atom details out of the unprefixed tables, if they exist; other
rows there, and the tables themselves, are left alone.  The downgrade moves
them back only where the unprefixed tables exist, then drops the prefixed
ones.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from swflows.persistence import migrations

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

#: the logbook names swflows gives its flows' logbooks
BOOK_NAMES = "swflows-%"
NAMES = ("logbooks", "flowdetails", "atomdetails")


def _move(source: tuple[sa.Table, ...], target: tuple[sa.Table, ...]) -> None:
    """Copy swflows' logbooks and their details from ``source`` to
    ``target`` (logbooks, flowdetails, atomdetails), then delete them from
    ``source``, children first."""
    conn = op.get_bind()
    books, flows, atoms = source

    def convert(column: sa.Column, into: sa.Column) -> sa.ColumnElement:  # type: ignore[type-arg]
        # PostgreSQL converts neither an enum to a string nor TEXT to JSON
        # implicitly; SQLite's CAST would turn a date's text into a number
        if conn.dialect.name != "postgresql":
            return column
        return sa.cast(column, into.type)

    book_ids = sa.select(books.c.uuid).where(books.c.name.like(BOOK_NAMES))
    flow_ids = sa.select(flows.c.uuid).where(flows.c.parent_uuid.in_(book_ids))
    picked = (
        books.c.name.like(BOOK_NAMES),
        flows.c.parent_uuid.in_(book_ids),
        atoms.c.parent_uuid.in_(flow_ids),
    )
    for table, into, where in zip(source, target, picked, strict=True):
        columns = [c.name for c in into.columns]
        select = sa.select(*(convert(table.c[name], into.c[name]) for name in columns))
        conn.execute(sa.insert(into).from_select(columns, select.where(where)))
    for table, where in reversed(list(zip(source, picked, strict=True))):
        conn.execute(sa.delete(table).where(where))


def _unprefixed() -> tuple[sa.Table, ...] | None:
    """TaskFlow's own tables, reflected, if this database has them."""
    inspector = sa.inspect(op.get_bind())
    if not all(inspector.has_table(name) for name in NAMES):
        return None
    metadata = sa.MetaData()
    return tuple(
        sa.Table(name, metadata, autoload_with=op.get_bind()) for name in NAMES
    )


def _prefixed(metadata: sa.MetaData | None = None) -> tuple[sa.Table, ...]:
    """The prefixed tables as this revision makes them."""
    from oslo_utils import timeutils
    from taskflow.persistence.backends.sqlalchemy.tables import JSONType

    p = migrations.table_prefix()
    metadata = metadata if metadata is not None else sa.MetaData()

    def common() -> list[sa.Column]:  # type: ignore[type-arg]
        return [
            sa.Column("created_at", sa.DateTime(), default=timeutils.utcnow),
            sa.Column("updated_at", sa.DateTime(), onupdate=timeutils.utcnow),
            sa.Column("meta", JSONType()),
            sa.Column("name", sa.String(255)),
            sa.Column("uuid", sa.String(64), primary_key=True, nullable=False),
        ]

    books = sa.Table(f"{p}tf_logbooks", metadata, *common())
    flows = sa.Table(
        f"{p}tf_flowdetails",
        metadata,
        *common(),
        sa.Column(
            "parent_uuid",
            sa.String(64),
            sa.ForeignKey(
                books.c.uuid, ondelete="CASCADE", name=f"fk_{p}tf_flowdetails_parent"
            ),
        ),
        sa.Column("state", sa.String(255)),
        sa.Index(f"ix_{p}tf_flowdetails_parent_uuid", "parent_uuid"),
    )
    atoms = sa.Table(
        f"{p}tf_atomdetails",
        metadata,
        *common(),
        sa.Column(
            "parent_uuid",
            sa.String(64),
            sa.ForeignKey(
                flows.c.uuid, ondelete="CASCADE", name=f"fk_{p}tf_atomdetails_parent"
            ),
        ),
        sa.Column("version", sa.String(64)),
        sa.Column("state", sa.String(255)),
        sa.Column("failure", JSONType()),
        sa.Column("results", JSONType()),
        sa.Column("revert_results", JSONType()),
        sa.Column("revert_failure", JSONType()),
        sa.Column("atom_type", sa.String(32)),
        sa.Column("intention", sa.String(32)),
        sa.Index(f"ix_{p}tf_atomdetails_parent_uuid", "parent_uuid"),
    )
    return books, flows, atoms


def upgrade() -> None:
    created = _prefixed()
    for table in created:
        table.create(op.get_bind())
    old = _unprefixed()
    if old is not None:
        _move(old, created)


def downgrade() -> None:
    made = _prefixed()
    old = _unprefixed()
    if old is not None:
        _move(made, old)
    for table in reversed(made):
        table.drop(op.get_bind())
