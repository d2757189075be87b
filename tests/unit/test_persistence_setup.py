"""Opening a store: defaults, prefixes, migrations, keys, retries (SQLite)."""

from __future__ import annotations

import pathlib
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
import tenacity
from alembic import autogenerate
from alembic.runtime import migration
from cryptography import fernet

from swflows import exceptions, model
from swflows.persistence import Store, crypto, database, migrations, tables
from swflows.persistence.flow_registry import FlowRegistry, end_flow
from tests.unit.test_persistence_store import (
    PASSWORD,
    deployment,
    derived_config,
    input_of,
)


def table_names(engine: sa.Engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def mode(path: pathlib.Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_default_location_under_xdg_state_home(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with Store() as store:
        folder = tmp_path / "state" / "swflows"
        assert store.url == f"sqlite:///{folder / 'swflows.sqlite'}"
        store.create_config(derived_config(), derived=True)
    assert mode(folder) == 0o700
    assert (folder / "swflows.sqlite").exists()
    assert mode(folder / "secret.key") == 0o600
    fernet.Fernet((folder / "secret.key").read_bytes().strip())
    with Store() as again:  # the same key is found again
        [config] = again.list_configs(include_derived=True)
        assert input_of(config, "deploy_password").value == PASSWORD


def test_default_location_without_xdg(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", "relative/is/ignored")
    assert crypto.state_dir() == tmp_path / ".local" / "state" / "swflows"
    with Store() as store:
        assert store.url.endswith("/.local/state/swflows/swflows.sqlite")
    assert mode(tmp_path / ".local" / "state" / "swflows") == 0o700


def test_file_store_key_beside_database(tmp_path: pathlib.Path) -> None:
    url = f"sqlite:///{tmp_path}/db/x.sqlite"
    (tmp_path / "db").mkdir()
    with Store(url) as store:
        store.set_server_channel("srv", "POLL_TEMP_URL", {"pw": PASSWORD})
    assert mode(tmp_path / "db" / "secret.key") == 0o600
    with Store(url) as store:
        assert store.get_server("srv").channel == {"pw": PASSWORD}


def test_missing_sqlite_folder_is_created(tmp_path: pathlib.Path) -> None:
    key = fernet.Fernet.generate_key()
    with Store(f"sqlite:///{tmp_path}/new/dir/x.sqlite", secret_key=key):
        pass
    assert mode(tmp_path / "new" / "dir") == 0o700
    assert not (tmp_path / "new" / "dir" / "secret.key").exists()


def test_wrong_key_is_reported(tmp_path: pathlib.Path) -> None:
    url = f"sqlite:///{tmp_path}/x.sqlite"
    with Store(url, secret_key=fernet.Fernet.generate_key()) as store:
        store.set_server_channel("srv", "POLL_TEMP_URL", {"pw": PASSWORD})
    with Store(url, secret_key=fernet.Fernet.generate_key()) as store:
        with pytest.raises(exceptions.ValidationError) as err:
            store.get_server("srv")
    assert err.value.field == "secret_key"
    assert PASSWORD not in str(err.value)


def test_key_rotation(tmp_path: pathlib.Path) -> None:
    url = f"sqlite:///{tmp_path}/x.sqlite"
    old, new = fernet.Fernet.generate_key(), fernet.Fernet.generate_key()
    with Store(url, secret_key=old) as store:
        store.set_server_channel("srv", "POLL_TEMP_URL", {"pw": PASSWORD})
    rotated = f"{new.decode()},{old.decode()}"
    with Store(url, secret_key=rotated) as store:
        assert store.get_server("srv").channel == {"pw": PASSWORD}


def test_key_file_option(tmp_path: pathlib.Path) -> None:
    key_file = tmp_path / "keys" / "k"
    with Store(f"sqlite:///{tmp_path}/x.sqlite", secret_key_file=key_file) as store:
        store.set_server_channel("srv", None, {"pw": PASSWORD})
    assert mode(key_file) == 0o600
    assert not (tmp_path / "secret.key").exists()


def test_server_database_needs_a_key() -> None:
    # no connection is made: the key is checked first
    with pytest.raises(exceptions.ValidationError) as err:
        Store("postgresql+psycopg2://nobody@127.0.0.1:1/none")
    assert err.value.field == "secret_key"
    with pytest.raises(exceptions.ValidationError) as err:
        Store(
            "postgresql+psycopg2://nobody@127.0.0.1:1/none",
            secret_key_file="/nonexistent/key",
        )
    assert err.value.field == "secret_key_file"


def test_bad_key() -> None:
    with pytest.raises(exceptions.ValidationError) as err:
        Store("sqlite://", secret_key="not-a-key")
    assert err.value.field == "secret_key"


def test_postgresql_url_uses_psycopg2_when_psycopg_is_absent() -> None:
    engine = database.create_engine("postgresql://u@127.0.0.1/db")
    try:
        expected = "psycopg" if database._importable("psycopg") else "psycopg2"
        assert engine.dialect.driver == expected
    finally:
        engine.dispose()


def test_the_pool_of_a_server_database_is_bounded_by_the_options() -> None:
    from swflows import conf as sw_conf

    conf = sw_conf.get_conf(config_files=[])
    assert database.PoolLimits.from_conf(conf) == database.PoolLimits(5, 10, 30.0)
    conf.set_override("max_pool_size", 2, "database")
    conf.set_override("max_overflow", 0, "database")
    conf.set_override("pool_timeout", 1.5, "database")
    limits = database.PoolLimits.from_conf(conf)
    for url in ("postgresql://u@127.0.0.1/db", "mysql+pymysql://u@127.0.0.1/db"):
        engine = database.create_engine(url, limits)
        try:
            pool: Any = engine.pool
            assert (pool.size(), pool._max_overflow, pool._timeout) == (2, 0, 1.5)
        finally:
            engine.dispose()


# -- prefixes and migrations ---------------------------------------------------


def test_tables_carry_the_prefix(tmp_path: pathlib.Path) -> None:
    url = f"sqlite:///{tmp_path}/x.sqlite"
    with Store(url, table_prefix="emb_sw_") as one, Store(url) as two:
        one.create_deployment(deployment())
        assert two.list_deployments() == []
        assert one.table_prefix == "emb_sw_"
        names = table_names(one.engine)
    assert {
        "emb_sw_configs",
        "emb_sw_deployments",
        "emb_sw_servers",
        "emb_sw_alembic_version",
        "swflows_configs",
        "swflows_alembic_version",
    } <= names
    assert "alembic_version" not in names  # TaskFlow's and embedders' stay free


def test_statements_built_once_are_each_stores_own(tmp_path: pathlib.Path) -> None:
    """The reads whose statements are built once per store (a deployment,
    a config, a server, its metadata, a flow's owner) read that store's
    tables, never those of another store opened in the same process."""
    url = f"sqlite:///{tmp_path}/x.sqlite"
    with Store(url, table_prefix="emb_sw_") as one, Store(url) as two:
        source = one.create_config(derived_config())
        dep = one.create_deployment(deployment(config_id=source.id))
        # each read once through the first store, building its statements
        assert one.get_config(source.id).id == source.id
        assert one.get_deployment(dep.id).id == dep.id
        assert one.get_server(dep.server_id).server_id == dep.server_id
        assert one.server_metadata(dep.server_id).version >= 1
        flows_one, flows_two = FlowRegistry(one), FlowRegistry(two)

        def add(flows: FlowRegistry, owner: str) -> None:
            flows.add(
                "f1",
                kind="deploy",
                deployment_id=dep.id,
                server_id="srv",
                owner=owner,
                lease_until=time.time() + 60,
            )

        add(flows_one, "me")
        assert flows_one.holder("f1") == "me"
        with pytest.raises(exceptions.ConfigNotFound):
            two.get_config(source.id)
        with pytest.raises(exceptions.DeploymentNotFound):
            two.get_deployment(dep.id)
        with pytest.raises(exceptions.ServerNotFound):
            two.get_server(dep.server_id)
        assert two.server_metadata(dep.server_id).version == 0
        assert flows_two.holder("f1") is None
        add(flows_two, "other")
        assert (flows_one.holder("f1"), flows_two.holder("f1")) == ("me", "other")
        # a flow's row, its cancel note, its claim and its end: each store's
        assert flows_two.request_cancel("f1")
        assert flows_one.cancel_note("f1") is None
        assert flows_two.cancel_note("f1") is not None
        later = time.time() + 3600
        assert not flows_one.claim("f1", "thief", lease_until=later, now=time.time())
        assert flows_two.claim("f1", "thief", lease_until=later, now=later)
        row = flows_one.get("f1")
        assert row is not None and row.owner == "me"
        assert end_flow(flows_two, "f1")
        assert flows_two.get("f1") is None and flows_one.holder("f1") == "me"


@pytest.mark.parametrize("prefix", ["", "1x_", "a-b", "x;drop", "p" * 33])
def test_bad_prefix(prefix: str) -> None:
    with pytest.raises(exceptions.ValidationError) as err:
        Store("sqlite://", table_prefix=prefix)
    assert err.value.field == "table_prefix"


def test_migrations_match_the_tables(tmp_path: pathlib.Path) -> None:
    with Store(f"sqlite:///{tmp_path}/x.sqlite", table_prefix="mm_") as store:
        with store.engine.connect() as conn:
            context = migration.MigrationContext.configure(
                conn,
                opts={"compare_type": True, "version_table": "mm_alembic_version"},
            )
            diff = autogenerate.compare_metadata(context, store.tables.metadata)
            assert diff == []
            assert migrations.current(conn, "mm_") == migrations.head()


def test_migrations_run_once(tmp_path: pathlib.Path) -> None:
    url = f"sqlite:///{tmp_path}/x.sqlite"
    with Store(url) as store:
        assert not migrations.upgrade(store.engine, "swflows_")
        engine = sa.create_engine(url)
        try:
            assert migrations.upgrade(engine, "fresh_")
            assert not migrations.upgrade(engine, "fresh_")
        finally:
            engine.dispose()


def test_concurrent_opens_migrate_once(tmp_path: pathlib.Path) -> None:
    url = f"sqlite:///{tmp_path}/x.sqlite"
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def open_store() -> None:
        try:
            barrier.wait()
            with Store(url, secret_key=KEY) as store:
                store.list_configs()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


KEY = fernet.Fernet.generate_key()


# -- transactions and retries ----------------------------------------------------


def test_transient_errors_are_retried_then_concurrent_update(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tenacity, "wait_random_exponential", lambda **kw: lambda rs: 0)
    with Store("sqlite://") as store:
        calls: list[int] = []

        def locked(conn: sa.Connection) -> Any:
            calls.append(1)
            raise sa.exc.OperationalError("BEGIN", {}, Exception("database is locked"))

        with pytest.raises(exceptions.ConcurrentUpdate) as err:
            store._write("poke", locked)
        assert err.value.retryable
        assert len(calls) == database.DB_ATTEMPTS

        def flaky(conn: sa.Connection) -> int:
            calls.append(1)
            if len(calls) < database.DB_ATTEMPTS + 2:
                raise sa.exc.OperationalError("x", {}, Exception("database is locked"))
            return 7

        assert store._write("poke", flaky) == 7


def test_other_errors_are_not_retried() -> None:
    with Store("sqlite://") as store:
        calls: list[int] = []

        def broken(conn: sa.Connection) -> Any:
            calls.append(1)
            raise sa.exc.OperationalError("x", {}, Exception("no such table: t"))

        with pytest.raises(sa.exc.OperationalError):
            store._write("poke", broken)
        assert calls == [1]


class _PgError(Exception):
    def __init__(self, pgcode: str) -> None:
        super().__init__("pg")
        self.pgcode = pgcode


@pytest.mark.parametrize(
    ("orig", "transient"),
    [
        (_PgError("40001"), True),
        (_PgError("40P01"), True),
        (_PgError("23505"), False),
        (Exception("database is locked"), True),
        (Exception("syntax error"), False),
    ],
)
def test_transient_classification(orig: Exception, transient: bool) -> None:
    exc = sa.exc.OperationalError("stmt", {}, orig)
    assert database._transient(exc) is transient


def test_integrity_errors_are_retried() -> None:
    assert database._transient(sa.exc.IntegrityError("x", {}, Exception("dup")))


def test_failed_write_rolls_back_everything(tmp_path: pathlib.Path) -> None:
    with Store(f"sqlite:///{tmp_path}/x.sqlite") as store:
        t = store.tables

        def half(conn: sa.Connection) -> None:
            conn.execute(
                sa.insert(t.servers).values(
                    server_id="s", metadata_version=5, published_version=0
                )
            )
            raise exceptions.ValidationError("x", "boom")

        with pytest.raises(exceptions.ValidationError):
            store._write("half", half)
        assert store.list_servers() == []


def test_sqlite_writes_begin_immediate(tmp_path: pathlib.Path) -> None:
    with Store(f"sqlite:///{tmp_path}/x.sqlite") as store:
        seen: list[str] = []
        # what the driver runs, BEGIN included (begun on it directly)
        sa.event.listen(
            store.engine,
            "connect",
            lambda dbapi_conn, record: dbapi_conn.set_trace_callback(seen.append),
        )
        store.engine.dispose()
        store.create_deployment(deployment())
        store.list_deployments()
        assert [s for s in seen if s.startswith("BEGIN")] == [
            "BEGIN IMMEDIATE",
            "BEGIN DEFERRED",
        ]
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_a_pooled_connection_is_pinged_only_after_a_rest(
    tmp_path: pathlib.Path,
) -> None:
    """A connection handed out again at once is not pinged (a round trip a
    transaction); one that lay idle is, and replaced if it went away."""
    engine = sa.create_engine(f"sqlite:///{tmp_path}/x.sqlite")
    seen: list[str] = []
    sa.event.listen(
        engine,
        "connect",
        lambda dbapi_conn, record: dbapi_conn.set_trace_callback(seen.append),
    )
    database._ping_when_idle(engine, idle=0.2)
    try:
        with engine.connect() as conn:
            first = conn.connection.driver_connection
            conn.exec_driver_sql("SELECT 2")
        with engine.connect() as conn:  # at once: as it was
            assert conn.connection.driver_connection is first
        assert "SELECT 1" not in seen
        time.sleep(0.3)
        with engine.connect() as conn:  # after a rest: pinged, kept
            assert conn.connection.driver_connection is first
        assert seen.count("SELECT 1") == 1
        time.sleep(0.3)
        assert isinstance(first, sqlite3.Connection)
        first.close()  # it went away while it lay in the pool
        with engine.connect() as conn:
            assert conn.connection.driver_connection is not first
            assert conn.exec_driver_sql("SELECT 3").scalar() == 3
    finally:
        engine.dispose()


def test_a_server_store_pings_idle_connections_not_every_checkout() -> None:
    engine = database.create_engine("postgresql+psycopg2://u@127.0.0.1:1/x")
    try:
        assert not engine.pool._pre_ping  # no round trip a checkout
        assert len(engine.pool.dispatch.checkout) == 1  # but after a rest
    finally:
        engine.dispose()


def test_a_begin_the_database_refuses_is_retried_then_named(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds SQLite's write lock past the busy timeout: the
    write's BEGIN fails as SQLAlchemy's OperationalError would, so it is
    tried again, then refused as ConcurrentUpdate (retryable), not as the
    driver's own error."""
    monkeypatch.setattr(database, "SQLITE_BUSY_TIMEOUT_MS", 20)
    path = tmp_path / "x.sqlite"
    with Store(f"sqlite:///{path}") as store:
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            with pytest.raises(exceptions.ConcurrentUpdate) as caught:
                store.create_deployment(deployment())
            assert isinstance(caught.value.__cause__, sa.exc.OperationalError)
            assert "database is locked" in str(caught.value.__cause__)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        store.create_deployment(deployment())  # once it is let go
        assert len(store.list_deployments()) == 1


def test_embedders_engine_is_left_open(tmp_path: pathlib.Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path}/x.sqlite")
    with Store(engine=engine, table_prefix="emb_") as store:
        store.create_deployment(deployment())
    with engine.connect() as conn:
        assert conn.exec_driver_sql("select count(*) from emb_servers").scalar() == 1
    engine.dispose()


def test_closed_store_refuses_calls() -> None:
    store = Store("sqlite://")
    store.close()
    store.close()
    with pytest.raises(exceptions.SwflowsError):
        store.list_configs()


def test_repr_hides_password() -> None:
    engine = database.create_engine("postgresql+psycopg2://u:hunter2@h/db")
    try:
        assert "hunter2" not in engine.url.render_as_string(hide_password=True)
    finally:
        engine.dispose()


def test_prefix_check_is_shared() -> None:
    assert tables.check_prefix("Ab_9") == "Ab_9"
    assert tables.version_table("x_") == "x_alembic_version"


@pytest.fixture
def conf() -> Iterator[Any]:
    from swflows import conf as swconf

    conf = swconf.get_conf()
    try:
        yield conf
    finally:
        # overrides live on option groups shared between ConfigOpts objects
        conf.reset()


def test_from_conf(tmp_path: pathlib.Path, conf: Any) -> None:
    key = fernet.Fernet.generate_key().decode()
    conf.set_override("connection", f"sqlite:///{tmp_path}/c.sqlite", "database")
    conf.set_override("table_prefix", "conf_", "database")
    conf.set_override("secret_key", key, "database")
    with Store.from_conf(conf) as store:
        assert store.table_prefix == "conf_"
        store.create_config(derived_config(), derived=True)
    assert not (tmp_path / "secret.key").exists()
    with Store(
        f"sqlite:///{tmp_path}/c.sqlite", table_prefix="conf_", secret_key=key
    ) as s:
        [config] = s.list_configs(include_derived=True)
        assert input_of(config, "deploy_password").value == PASSWORD


def test_from_conf_key_file(tmp_path: pathlib.Path, conf: Any) -> None:
    conf.set_override("connection", f"sqlite:///{tmp_path}/c.sqlite", "database")
    conf.set_override("secret_key_file", str(tmp_path / "k" / "key"), "database")
    with Store.from_conf(conf) as store:
        assert store.table_prefix == "swflows_"
    assert mode(tmp_path / "k" / "key") == 0o600


def test_secret_inputs_follow_derive() -> None:
    from swflows import derive

    assert database._secret_inputs() >= set(derive.SECRET_INPUTS) | {"deploy_password"}


def test_model_ids_fit() -> None:
    assert len(model.new_id()) == tables.ID_LENGTH


def test_head_constant_is_alembics_head() -> None:
    assert migrations.HEAD == migrations.head()


def test_a_store_at_head_opens_without_alembic(tmp_path: pathlib.Path) -> None:
    url = f"sqlite:///{tmp_path}/x.sqlite"
    with Store(url) as store:
        with store.engine.connect() as conn:
            assert migrations.at_head(conn, "swflows_")
            assert not migrations.at_head(conn, "other_")
    program = (
        "import sys\n"
        "from swflows.persistence import Store\n"
        f"Store({url!r}).close()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))\n"
    )
    opened = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert opened.stdout.strip() == "[]"
    fresh = subprocess.run(
        [sys.executable, "-c", program.replace("x.sqlite", "new.sqlite")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert fresh.stdout.strip() != "[]"  # a new database is migrated


def test_the_watcher_role_names_the_store_not_the_url_it_is_reached_by(
    tmp_path: pathlib.Path,
) -> None:
    from swflows.engine.watcher import watcher_role

    db = tmp_path / "s.sqlite"
    (tmp_path / "sub").mkdir()
    with (
        Store(f"sqlite:///{db}") as first,
        # the same file by another path, as a proxy or a host alias would be
        Store(f"sqlite:///{tmp_path / 'sub' / '..' / 's.sqlite'}") as second,
        Store(f"sqlite:///{db}", table_prefix="other_") as other_prefix,
        Store(f"sqlite:///{tmp_path / 't.sqlite'}") as elsewhere,
    ):
        assert first.url != second.url
        assert first.installation_id == second.installation_id
        assert watcher_role(first) == watcher_role(second)
        roles = {watcher_role(s) for s in (first, other_prefix, elsewhere)}
        assert len(roles) == 3
