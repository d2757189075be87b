"""Trusts: the Keystone trust a deployment's deferred work acts through,
sealed, beside its owner (see :mod:`swflows.trusts`).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from swflows.persistence import migrations

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    p = migrations.table_prefix()
    op.add_column(
        f"{p}owners", sa.Column("trust", sa.JSON(none_as_null=True), nullable=True)
    )


def downgrade() -> None:
    p = migrations.table_prefix()
    op.drop_column(f"{p}owners", "trust")
