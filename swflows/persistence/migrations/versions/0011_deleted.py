"""Deleted deployments, remembered until their signal URLs expire, so the
sweeper knows a store a late signal recreated is this installation's (see
:func:`swflows.persistence.tables.deleted_table`).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from swflows.persistence import migrations, tables

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    p = migrations.table_prefix()
    op.create_table(
        f"{p}deleted",
        sa.Column("deployment_id", sa.String(tables.ID_LENGTH), primary_key=True),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("deleted_at", tables.epoch_seconds(), nullable=False),
        sa.Column("forget_at", tables.epoch_seconds(), nullable=False),
    )
    op.create_index(f"ix_{p}deleted_forget_at", f"{p}deleted", ["forget_at"])


def downgrade() -> None:
    p = migrations.table_prefix()
    op.drop_index(f"ix_{p}deleted_forget_at", f"{p}deleted")
    op.drop_table(f"{p}deleted")
