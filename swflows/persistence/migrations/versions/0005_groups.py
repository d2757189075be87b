"""Deployment groups: one config to many servers, with a rollout policy.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from swflows.persistence import migrations

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    p = migrations.table_prefix()

    def json() -> sa.JSON:
        return sa.JSON(none_as_null=True)

    op.create_table(
        f"{p}groups",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("config_id", sa.String(36), nullable=False),
        sa.Column("servers", json(), nullable=False),
        sa.Column("input_values", json(), nullable=False),
        sa.Column("member_values", json(), nullable=False),
        sa.Column("signal_transport", sa.String(64), nullable=False),
        sa.Column("timeout", sa.Integer(), nullable=True),
        sa.Column("actions", json(), nullable=True),
        sa.Column("policy", json(), nullable=False),
        sa.Column("deployments", json(), nullable=False),
        sa.Column("operation", json(), nullable=False),
        sa.Column("action", sa.String(255), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=False),
        sa.Column("owner", sa.String(255), nullable=True),
        sa.Column("lease_until", sa.Float(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.UniqueConstraint("name", name=f"uq_{p}groups_name"),
    )
    op.create_index(f"ix_{p}groups_status", f"{p}groups", ["status"])


def downgrade() -> None:
    p = migrations.table_prefix()
    op.drop_index(f"ix_{p}groups_status", table_name=f"{p}groups")
    op.drop_table(f"{p}groups")
