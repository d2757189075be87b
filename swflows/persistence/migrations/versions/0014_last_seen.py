"""Servers: when each was last seen (it read its metadata through swflows,
or a signal of it arrived), shown by ``swflows server list``.

NULL is "never seen": what every server was before this revision.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from swflows.persistence import migrations, tables

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    p = migrations.table_prefix()
    op.add_column(
        f"{p}servers", sa.Column("last_seen_at", tables.timestamp(), nullable=True)
    )


def downgrade() -> None:
    p = migrations.table_prefix()
    op.drop_column(f"{p}servers", "last_seen_at")
