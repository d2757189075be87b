"""The store's API contract on a SQLite file, on PostgreSQL and on MariaDB,
and races."""

from __future__ import annotations

import concurrent.futures
import os
import pathlib
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import autogenerate, command, migration

from swflows import exceptions, model
from swflows.persistence import Store, flow_registry, logbook, migrations
from tests.functional import db_fixtures
from tests.functional.db_fixtures import *  # noqa: F403 (fixtures)
from tests.functional.db_fixtures import SECRET_KEY, unique_prefix
from tests.unit import test_migration_0004
from tests.unit.test_persistence_store import (
    StoreContract,
    deployment,
    derived_config,
    raw_rows,
)

REPO = pathlib.Path(__file__).resolve().parents[2]


class TestStoreSQL(StoreContract):
    """Every API rule, on every database."""


def run_together(count: int, fn: Callable[[int], Any]) -> list[Any]:
    """Run fn(0..count-1) in threads released at once; results or errors."""
    barrier = threading.Barrier(count)

    def call(i: int) -> Any:
        barrier.wait()
        try:
            return fn(i)
        except Exception as exc:
            return exc

    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        return list(pool.map(call, range(count)))


def test_racing_identical_creates_make_one_row(store: Store) -> None:
    config = derived_config()
    configs = run_together(8, lambda i: store.create_config(config, derived=True))
    assert all(isinstance(c, model.Config) for c in configs), configs
    dep = deployment(config_id=config.id)
    results = run_together(8, lambda i: store.create_deployment(dep))
    assert all(isinstance(r, model.Deployment) for r in results), results
    assert len(raw_rows(store, store.tables.deployments)) == 1
    assert store.get_server("srv").metadata_version == 1


def test_config_delete_racing_deployment_create(store: Store) -> None:
    for _ in range(5):
        config = store.create_config(derived_config(), derived=True)

        def act(i: int, config_id: str = config.id) -> Any:
            if i == 0:
                return store.delete_config(config_id)
            return store.create_deployment(deployment(config_id=config_id))

        results = run_together(4, act)
        errors = [r for r in results if isinstance(r, Exception)]
        assert all(
            isinstance(e, (exceptions.ConfigInUse, exceptions.ConfigNotFound))
            for e in errors
        ), errors
        deleted = results[0] is None
        created = [r for r in results[1:] if isinstance(r, model.Deployment)]
        assert deleted != bool(created)  # exactly one side won


def test_update_cas_under_race(store: Store) -> None:
    dep = store.create_deployment(deployment())
    results = run_together(
        8,
        lambda i: store.update_deployment(
            dep.id, expected_generation=0, generation=1, status_reason=str(i)
        ),
    )
    won = [r for r in results if isinstance(r, model.Deployment)]
    lost = [r for r in results if isinstance(r, exceptions.ConcurrentUpdate)]
    assert len(won) == 1 and len(lost) == 7, results
    assert all(e.fields["generation"] == 1 for e in lost)


def test_processes_opening_together_migrate_once(db_url: str) -> None:
    prefix = unique_prefix()
    code = (
        "import sys\n"
        "from swflows.persistence import Store\n"
        "with Store(sys.argv[1], table_prefix=sys.argv[2], secret_key=sys.argv[3])"
        " as s:\n"
        "    s.list_configs()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, db_url, prefix, SECRET_KEY.decode()],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            assert migrations.current(conn, prefix) == migrations.head()
            version_table = sa.table(f"{prefix}alembic_version")
            rows = conn.scalar(sa.select(sa.func.count()).select_from(version_table))
            assert rows == 1
    finally:
        engine.dispose()


def test_alembic_tables_do_not_clash(pg_url: str) -> None:
    prefix = unique_prefix()
    with Store(pg_url, table_prefix=prefix, secret_key=SECRET_KEY) as opened:
        opened.taskflow_backend()
        names = set(sa.inspect(opened.engine).get_table_names())
    assert f"{prefix}alembic_version" in names
    # TaskFlow's logbook takes the prefix too: its own migrations (and
    # their alembic_version) are never run
    assert {f"{prefix}tf_{n}" for n in logbook.TASKFLOW_TABLES} <= names


def test_migration_0004_moves_logbooks_on_postgresql(
    request: pytest.FixtureRequest,
) -> None:
    """TaskFlow's PostgreSQL tables (enums, JSON, its alembic_version) ->
    the prefixed ones and back."""
    engine = sa.create_engine(db_fixtures._create_database(request.config))
    try:
        test_migration_0004.check_move(engine)
    finally:
        engine.dispose()


def test_migrations_match_the_tables(db_url: str) -> None:
    """What the migrations made is what the tables declare, types included
    (MariaDB's DATETIME(6) too)."""
    prefix = "swflows_" if db_url.startswith("sqlite") else unique_prefix()
    with Store(db_url, table_prefix=prefix, secret_key=SECRET_KEY) as store:
        ours = set(store.tables.metadata.tables)

        def include(name: str | None, kind: str, parent: Any) -> bool:
            return kind != "table" or name in ours  # the database is shared

        with store.engine.connect() as conn:
            context = migration.MigrationContext.configure(
                conn,
                opts={
                    "compare_type": True,
                    "version_table": f"{prefix}alembic_version",
                    "include_name": include,
                },
            )
            assert autogenerate.compare_metadata(context, store.tables.metadata) == []


def test_mariadb_timestamps_keep_microseconds_from_0006(
    request: pytest.FixtureRequest,
) -> None:
    """0005 -> 0006 -> 0005 on MariaDB: DATETIME becomes DATETIME(6) and
    back, rows kept."""
    url = db_fixtures._create_mysql_database(request.config)
    engine = sa.create_engine(url)
    prefix = "m6_"

    def precisions() -> set[int]:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT datetime_precision FROM information_schema.columns "
                "WHERE table_schema = DATABASE() AND data_type = 'datetime'"
            )
            return {int(row[0]) for row in rows}

    try:
        with engine.begin() as conn:
            command.upgrade(migrations.make_config(conn, prefix), "0005")
        assert precisions() == {0}
        with Store(url, table_prefix=prefix, secret_key=SECRET_KEY) as store:
            config = store.create_config(derived_config())
            assert precisions() == {6}  # the store upgraded it when it opened
            assert store.get_config(config.id).creation_time == config.creation_time
        with engine.begin() as conn:
            command.downgrade(migrations.make_config(conn, prefix), "0005")
        assert precisions() == {0}
        with Store(url, table_prefix=prefix, secret_key=SECRET_KEY) as store:
            assert store.get_config(config.id).id == config.id
    finally:
        engine.dispose()


def test_a_lease_reads_back_to_the_millisecond(store: Store) -> None:
    """Leases are seconds since the epoch: kept in single precision (a plain
    FLOAT on MariaDB), one moved by up to a minute and a dead runner's or
    conductor's flows were taken over far too early or late."""
    registry = flow_registry.FlowRegistry(store)
    lease = time.time() + 12.345
    flow_id = str(uuid.uuid4())
    registry.add(
        flow_id,
        kind="deploy",
        deployment_id=str(uuid.uuid4()),
        server_id="s",
        owner="host:1:a",
        lease_until=lease,
    )
    row = registry.get(flow_id)
    assert row is not None and row.lease_until is not None
    assert abs(row.lease_until - lease) < 0.001
    assert not row.lease_expired(lease - 0.5)
    assert row.lease_expired(lease + 0.5)
