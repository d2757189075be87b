"""Results waited for outside swflows, kept with their deployments (see
:func:`swflows.persistence.tables.results_table`), and a reference to each
owner row's trust, so that a trust several rows act through is deleted
with the last of them.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from swflows.persistence import migrations, tables

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    p = migrations.table_prefix()
    op.create_table(
        f"{p}results",
        sa.Column("id", sa.String(tables.ID_LENGTH), primary_key=True),
        sa.Column("deployment_id", sa.String(tables.ID_LENGTH), nullable=False),
        sa.Column("shape", sa.String(tables.STATUS_LENGTH), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("token", tables.json_type(), nullable=True),
        sa.Column("trust_key", sa.String(tables.NAME_LENGTH), nullable=True),
        sa.Column("created_at", tables.epoch_seconds(), nullable=False),
        sa.Column("claimed_until", tables.epoch_seconds(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("delivered_at", tables.epoch_seconds(), nullable=True),
        sa.Column("outcome", sa.String(tables.STATUS_LENGTH), nullable=True),
        sa.Column("keep_until", tables.epoch_seconds(), nullable=True),
    )
    op.create_index(f"ix_{p}results_deployment_id", f"{p}results", ["deployment_id"])
    op.add_column(
        f"{p}owners",
        sa.Column("trust_ref", sa.String(tables.TRUST_REF_LENGTH), nullable=True),
    )
    op.create_index(f"ix_{p}owners_trust_ref", f"{p}owners", ["trust_ref"])


def downgrade() -> None:
    p = migrations.table_prefix()
    op.drop_index(f"ix_{p}owners_trust_ref", f"{p}owners")
    op.drop_column(f"{p}owners", "trust_ref")
    op.drop_index(f"ix_{p}results_deployment_id", f"{p}results")
    op.drop_table(f"{p}results")
