"""Migration 0014 on a store that already holds a server."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command

from swflows.persistence import migrations, tables
from swflows.persistence.database import create_engine

PREFIX = "mig_"


def test_servers_known_before_were_never_seen_and_stay(tmp_path: Path) -> None:
    t = tables.tables(PREFIX)
    engine = create_engine(f"sqlite:///{tmp_path / 'store.sqlite'}")
    try:
        with engine.begin() as conn:
            command.upgrade(migrations.make_config(conn, PREFIX), "0013")
            conn.execute(
                sa.insert(sa.table(t.servers.name, *(sa.column(c) for c in (
                    "server_id", "metadata_version", "published_version",
                )))).values(server_id="s1", metadata_version=1, published_version=1)
            )  # fmt: skip
        with engine.begin() as conn:
            command.upgrade(migrations.make_config(conn, PREFIX), "0014")
            s = t.servers
            rows = conn.execute(sa.select(s.c.server_id, s.c.last_seen_at))
            assert [tuple(r) for r in rows] == [("s1", None)]
        with engine.begin() as conn:
            command.downgrade(migrations.make_config(conn, PREFIX), "0013")
            columns = {c["name"] for c in sa.inspect(conn).get_columns(s.name)}
            assert "last_seen_at" not in columns
            count = sa.select(sa.func.count()).select_from(sa.table(s.name))
            assert conn.scalar(count) == 1
    finally:
        engine.dispose()
