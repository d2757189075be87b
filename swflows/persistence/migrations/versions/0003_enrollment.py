"""Servers remember their enrollment, and whether Nova knows them.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from swflows.persistence import migrations

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # plain ALTER TABLE: SQLite adds and drops columns in place, whereas a
    # batch copy would drop a table that deployments reference
    p = migrations.table_prefix()
    op.add_column(f"{p}servers", sa.Column("enrolled_at", sa.DateTime(), nullable=True))
    op.add_column(f"{p}servers", sa.Column("in_compute", sa.Boolean(), nullable=True))


def downgrade() -> None:
    p = migrations.table_prefix()
    op.drop_column(f"{p}servers", "in_compute")
    op.drop_column(f"{p}servers", "enrolled_at")
