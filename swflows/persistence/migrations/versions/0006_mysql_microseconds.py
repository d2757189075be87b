"""Timestamps to the microsecond on MySQL and MariaDB, as on PostgreSQL and
SQLite: their DATETIME keeps whole seconds unless declared DATETIME(6), so a
time written there (a logbook's ``created_at``, a deployment's) came back
rounded down.  Every DATETIME column of the store's tables becomes
DATETIME(6); on other databases nothing changes.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

from swflows.persistence import migrations, tables

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _timestamps() -> list[tuple[str, str, bool]]:
    """(table, column, nullable) of the store's DATETIME columns, as the
    database has them."""
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    names = set(tables.tables(migrations.table_prefix()).metadata.tables)
    found = []
    for table in sorted(names & set(inspector.get_table_names())):
        for column in inspector.get_columns(table):
            if isinstance(column["type"], sa.DateTime):
                found.append((table, column["name"], bool(column["nullable"])))
    return found


def _retype(fsp: int) -> None:
    if op.get_bind().dialect.name not in ("mysql", "mariadb"):
        return
    for table, column, nullable in _timestamps():
        op.alter_column(
            table,
            column,
            type_=mysql.DATETIME(fsp=fsp),
            existing_type=mysql.DATETIME(),
            existing_nullable=nullable,
        )


def upgrade() -> None:
    _retype(6)


def downgrade() -> None:
    _retype(0)
