"""The installation's id: one row naming the store whatever URL a process
reaches the database by (see
:func:`swflows.persistence.tables.installation_table`).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""

from __future__ import annotations

import datetime
import uuid

import sqlalchemy as sa
from alembic import op

from swflows.persistence import migrations, tables

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    p = migrations.table_prefix()
    made = op.create_table(
        f"{p}installation",
        sa.Column("name", sa.String(tables.STATUS_LENGTH), primary_key=True),
        sa.Column("id", sa.String(tables.ID_LENGTH), nullable=False),
        sa.Column("created_at", tables.timestamp(), nullable=False),
    )
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    op.bulk_insert(
        made, [{"name": "installation", "id": str(uuid.uuid4()), "created_at": now}]
    )


def downgrade() -> None:
    p = migrations.table_prefix()
    op.drop_table(f"{p}installation")
