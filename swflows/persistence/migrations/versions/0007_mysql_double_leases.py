"""Lease times as double precision on MySQL and MariaDB: a plain FLOAT is
single precision there, so a time in seconds since the epoch was kept to
about 128 s, and a lease ran out a minute early or late.  The flows' and
the groups' ``lease_until`` become DOUBLE; on PostgreSQL (whose FLOAT is
already double precision) and SQLite nothing changes.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

from swflows.persistence import migrations

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

#: the tables (without the prefix) whose lease_until is retyped
TABLES = ("flows", "groups")


def _retype(new: sa.types.TypeEngine[Any], old: sa.types.TypeEngine[Any]) -> None:
    if op.get_bind().dialect.name not in ("mysql", "mariadb"):
        return
    prefix = migrations.table_prefix()
    for table in TABLES:
        op.alter_column(
            f"{prefix}{table}",
            "lease_until",
            type_=new,
            existing_type=old,
            existing_nullable=True,
        )


def upgrade() -> None:
    _retype(mysql.DOUBLE(), mysql.FLOAT())


def downgrade() -> None:
    _retype(mysql.FLOAT(), mysql.DOUBLE())
