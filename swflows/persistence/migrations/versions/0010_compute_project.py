"""Servers: whose Nova listing shows each server (see
:mod:`swflows.enrollment`).

``compute_project`` names the project whose listing the watcher reads
(through a trust of that project); NULL is swflows' own compute login's,
which is what every server Nova knew before this revision was seen by.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from swflows.persistence import migrations, tables

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    p = migrations.table_prefix()
    op.add_column(
        f"{p}servers",
        sa.Column("compute_project", sa.String(tables.NAME_LENGTH), nullable=True),
    )


def downgrade() -> None:
    p = migrations.table_prefix()
    op.drop_column(f"{p}servers", "compute_project")
