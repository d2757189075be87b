"""The flows table: which runner drives each flow, and what parked ones await.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from swflows.persistence import migrations

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    p = migrations.table_prefix()
    op.create_table(
        f"{p}flows",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("deployment_id", sa.String(36), nullable=False),
        sa.Column("server_id", sa.String(255), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("owner", sa.String(255), nullable=True),
        sa.Column("lease_until", sa.Float(), nullable=True),
        sa.Column("waiting", sa.JSON(), nullable=True),
        sa.Column("takeovers", sa.Integer(), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
    )
    for column in ("state", "deployment_id", "server_id"):
        op.create_index(f"ix_{p}flows_{column}", f"{p}flows", [column])


def downgrade() -> None:
    op.drop_table(f"{migrations.table_prefix()}flows")
