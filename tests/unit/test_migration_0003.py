"""Migration 0003 on a store that already holds servers and deployments."""

from __future__ import annotations

import datetime
from pathlib import Path

import sqlalchemy as sa
from alembic import command

from swflows.persistence import migrations, tables
from swflows.persistence.database import create_engine

PREFIX = "mig_"


def fill(conn: sa.Connection, t: tables.Tables) -> None:
    """One server with one deployment, written as a 0002 store holds them."""
    now = datetime.datetime(2026, 1, 1)
    conn.execute(
        sa.insert(t.servers).values(
            server_id="s1", metadata_version=1, published_version=1
        )
    )
    conn.execute(
        sa.insert(t.configs).values(
            id="c1", name="n", group="script", body={}, derived=False, created_at=now
        )
    )
    conn.execute(
        sa.insert(t.deployments).values(
            id="d1", server_id="s1", config_id="c1", action="CREATE",
            status="COMPLETE", status_reason="", input_values={},
            output_values={}, signal_transport="NO_SIGNAL", actions=[],
            generation=1, created_at=now, version=1, server_seq=1,
        )
    )  # fmt: skip


def test_upgrade_and_downgrade_keep_servers_and_deployments(tmp_path: Path) -> None:
    t = tables.tables(PREFIX)
    engine = create_engine(f"sqlite:///{tmp_path / 'store.sqlite'}")
    with engine.begin() as conn:
        command.upgrade(migrations.make_config(conn, PREFIX), "0002")
        fill(conn, t)
    with engine.begin() as conn:
        command.upgrade(migrations.make_config(conn, PREFIX), "0003")
        s = t.servers
        rows = conn.execute(sa.select(s.c.server_id, s.c.enrolled_at, s.c.in_compute))
        assert [tuple(r) for r in rows] == [("s1", None, None)]
    with engine.begin() as conn:
        command.downgrade(migrations.make_config(conn, PREFIX), "0002")
        columns = {c["name"] for c in sa.inspect(conn).get_columns(t.servers.name)}
        assert "in_compute" not in columns and "enrolled_at" not in columns
        count = sa.select(sa.func.count()).select_from(t.deployments)
        assert conn.scalar(count) == 1
    engine.dispose()
