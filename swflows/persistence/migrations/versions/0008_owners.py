"""Owners: the Keystone project and user that made each config,
deployment, server and group, and each server's deployment policy.

Existing objects get no row: an object without one belongs to the
configured ``default_project``.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from swflows.persistence import migrations, tables

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    p = migrations.table_prefix()
    op.create_table(
        f"{p}owners",
        sa.Column("kind", sa.String(32), primary_key=True),
        sa.Column("object_id", sa.String(255), primary_key=True),
        sa.Column("project_id", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=True),
        sa.Column("deploy_policy", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("policy_changed_by", sa.String(255), nullable=True),
        sa.Column("policy_changed_at", tables.timestamp(), nullable=True),
        sa.Column("created_at", tables.timestamp(), nullable=False),
    )
    op.create_index(
        f"ix_{p}owners_kind_project_id", f"{p}owners", ["kind", "project_id"]
    )


def downgrade() -> None:
    p = migrations.table_prefix()
    op.drop_index(f"ix_{p}owners_kind_project_id", table_name=f"{p}owners")
    op.drop_table(f"{p}owners")
