"""Database fixtures for the store's functional tests (SQLite file,
PostgreSQL, MariaDB).

Import the fixtures a test module needs by name::

    from tests.functional.db_fixtures import *  # noqa: F403 (fixtures)

* ``pg_url`` (session): a PostgreSQL database made for this test session,
  ``swflows_test_<hex>`` (one per pytest-xdist worker), dropped when the
  session ends.  The server is ``$SWFLOWS_TEST_PG_URL``, default
  ``postgresql+psycopg2://postgres@127.0.0.1:5432/postgres``.  If it cannot
  be reached the tests **fail**; they never skip.
* ``mysql_url`` (session): the same on MariaDB/MySQL, ``$SWFLOWS_TEST_MYSQL_URL``,
  default ``mysql+pymysql://root@127.0.0.1:3306/``; it fails, never skips.
* ``db_url``: parametrized ``sqlite`` (a new file), ``postgresql`` and
  ``mysql`` (MariaDB).
* ``store``: an open :class:`~swflows.persistence.Store` on ``db_url``, with
  its own table prefix on PostgreSQL and MariaDB so tests sharing the
  database never see each other's rows (TaskFlow's unprefixed tables are
  shared).
"""

from __future__ import annotations

import os
import pathlib
import threading
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from cryptography import fernet

from swflows.persistence import Store

PG_ADMIN_URL = os.environ.get(
    "SWFLOWS_TEST_PG_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres"
)
#: one key for the whole session, so any store of a test can read its data
SECRET_KEY = fernet.Fernet.generate_key()
BACKENDS = ("sqlite", "postgresql", "mysql")

MYSQL_ADMIN_URL = os.environ.get(
    "SWFLOWS_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/"
)

#: the fixtures, for ``import *``
__all__ = ["db_url", "mysql_url", "pg_url", "store"]

_lock = threading.Lock()
_session_db: dict[str, str] = {}


def _admin_engine() -> sa.Engine:
    return sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")


def _create_database(config: pytest.Config) -> str:
    name = f"swflows_test_{uuid.uuid4().hex[:12]}"
    admin = _admin_engine()
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    except sa.exc.OperationalError as exc:
        admin.dispose()
        pytest.fail(
            f"PostgreSQL is required for these tests and is not reachable at "
            f"{sa.make_url(PG_ADMIN_URL).render_as_string(hide_password=True)}: "
            f"{exc.orig}\nStart it with: pg_ctlcluster --skip-systemctl-redirect "
            f"$(ls /etc/postgresql) main start",
            pytrace=False,
        )
    admin.dispose()

    def drop() -> None:
        engine = _admin_engine()
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            engine.dispose()

    config.add_cleanup(drop)
    return (
        sa.make_url(PG_ADMIN_URL)
        .set(database=name)
        .render_as_string(hide_password=False)
    )


@pytest.fixture(scope="session")
def pg_url(request: pytest.FixtureRequest) -> str:
    """This session's PostgreSQL database (created once per process)."""
    with _lock:
        if "url" not in _session_db:
            _session_db["url"] = _create_database(request.config)
        return _session_db["url"]


@pytest.fixture(scope="session")
def mysql_url(request: pytest.FixtureRequest) -> str:
    """This session's MariaDB database (created once per process, utf8mb4)."""
    with _lock:
        if "mysql" not in _session_db:
            _session_db["mysql"] = _create_mysql_database(request.config)
        return _session_db["mysql"]


def _create_mysql_database(config: pytest.Config) -> str:
    name = f"swflows_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(MYSQL_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(
                f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
            )
    except sa.exc.OperationalError as exc:
        pytest.fail(
            f"MariaDB is required for these tests and is not reachable at "
            f"{sa.make_url(MYSQL_ADMIN_URL).render_as_string(hide_password=True)}:"
            f" {exc.orig}\nStart it with: tools/services start",
            pytrace=False,
        )
    finally:
        admin.dispose()

    def drop() -> None:
        engine = sa.create_engine(MYSQL_ADMIN_URL, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        finally:
            engine.dispose()

    config.add_cleanup(drop)
    url = sa.make_url(MYSQL_ADMIN_URL).set(database=name)
    return url.update_query_dict({"charset": "utf8mb4"}).render_as_string(
        hide_password=False
    )


def sqlite_url(folder: pathlib.Path) -> str:
    return f"sqlite:///{folder / 'swflows.sqlite'}"


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> str:
    if request.param == "sqlite":
        return sqlite_url(tmp_path)
    url: str = request.getfixturevalue(
        "pg_url" if request.param == "postgresql" else "mysql_url"
    )
    return url


def unique_prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}_"


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    prefix = "swflows_" if db_url.startswith("sqlite") else unique_prefix()
    with Store(db_url, table_prefix=prefix, secret_key=SECRET_KEY) as opened:
        yield opened
