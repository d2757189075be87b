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
    p = migrations.table_prefix()
    with op.batch_alter_table(f"{p}servers") as batch:
        batch.add_column(sa.Column("enrolled_at", sa.DateTime(), nullable=True))
        batch.add_column(sa.Column("in_compute", sa.Boolean(), nullable=True))


def downgrade() -> None:
    p = migrations.table_prefix()
    with op.batch_alter_table(f"{p}servers") as batch:
        batch.drop_column("in_compute")
        batch.drop_column("enrolled_at")
