"""Initial schema: configs, servers, deployments.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from swflows.persistence import migrations

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    p = migrations.table_prefix()
    op.create_table(
        f"{p}configs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("group", sa.String(255), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("derived", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index(f"ix_{p}configs_created_at_id", f"{p}configs", ["created_at", "id"])
    op.create_table(
        f"{p}servers",
        sa.Column("server_id", sa.String(255), primary_key=True),
        sa.Column("metadata_version", sa.Integer(), nullable=False),
        sa.Column("published_version", sa.Integer(), nullable=False),
        sa.Column("config_transport", sa.String(64), nullable=True),
        sa.Column("channel", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
    )
    op.create_table(
        f"{p}deployments",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column(
            "server_id",
            sa.String(255),
            sa.ForeignKey(f"{p}servers.server_id", name=f"fk_{p}deployments_server_id"),
            nullable=False,
        ),
        sa.Column(
            "config_id",
            sa.String(36),
            sa.ForeignKey(f"{p}configs.id", name=f"fk_{p}deployments_config_id"),
            nullable=True,
        ),
        sa.Column(
            "source_config_id",
            sa.String(36),
            sa.ForeignKey(f"{p}configs.id", name=f"fk_{p}deployments_source_config_id"),
            nullable=True,
        ),
        sa.Column("action", sa.String(255), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=False),
        sa.Column("reason", sa.JSON(), nullable=True),
        sa.Column("input_values", sa.JSON(), nullable=False),
        sa.Column("output_values", sa.JSON(), nullable=False),
        sa.Column("signal_transport", sa.String(64), nullable=False),
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("actions", sa.JSON(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("timeout", sa.Integer(), nullable=True),
        sa.Column("parent_id", sa.String(36), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("server_seq", sa.Integer(), nullable=False),
    )
    for column in (
        "server_id",
        "status",
        "created_at",
        "parent_id",
        "config_id",
        "source_config_id",
    ):
        op.create_index(f"ix_{p}deployments_{column}", f"{p}deployments", [column])


def downgrade() -> None:
    p = migrations.table_prefix()
    op.drop_table(f"{p}deployments")
    op.drop_table(f"{p}servers")
    op.drop_table(f"{p}configs")
