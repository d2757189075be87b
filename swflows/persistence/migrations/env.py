"""Alembic environment: runs on the connection handed in by ``upgrade()``."""

from __future__ import annotations

from alembic import context

from swflows.persistence import migrations, tables


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is None:
        raise RuntimeError(
            "swflows migrations run through swflows.persistence.migrations.upgrade"
        )
    prefix = migrations.table_prefix()
    context.configure(
        connection=connection,
        version_table=tables.version_table(prefix),
        target_metadata=tables.tables(prefix).metadata,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("swflows migrations do not support offline (SQL) mode")
run_migrations_online()
