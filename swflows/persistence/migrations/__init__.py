"""Alembic migrations for the store, applied when a :class:`Store` opens.

:func:`upgrade` is idempotent and safe when several processes open the same
database at once: on PostgreSQL the upgrade runs in one transaction holding
a transaction-level advisory lock derived from the table prefix; on MySQL
and MariaDB, whose DDL is not transactional, it holds a named lock
(``GET_LOCK``) of its connection until it has committed; on SQLite the transaction
starts with ``BEGIN IMMEDIATE``, which locks the file.  The
version table is ``<prefix>alembic_version``, so neither the embedder's own
alembic history nor TaskFlow's (``alembic_version``) is touched.  The prefix
reaches the scripts through ``config.attributes["table_prefix"]``.

Opening a store whose tables are already at :data:`HEAD` reads the version
table with one query and loads no alembic: a short command starts faster.
"""

from __future__ import annotations

import contextlib
import functools
import os
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

import sqlalchemy as sa

from swflows import exceptions
from swflows.persistence import tables

if TYPE_CHECKING:
    from alembic import config as alembic_config

SCRIPT_LOCATION: Final = os.path.dirname(os.path.abspath(__file__))
#: the newest revision in ``versions/`` (a unit test holds it to alembic's
#: own reading of the scripts)
HEAD: Final = "0014"
#: the key of every swflows advisory lock: "swfl" in ASCII
_LOCK_CLASS: Final = 0x7377666C
#: seconds a MySQL or MariaDB migration waits for another's to end
MYSQL_LOCK_WAIT: Final = 300


def make_config(connection: sa.Connection, prefix: str) -> alembic_config.Config:
    """An alembic config bound to ``connection`` for tables named ``prefix``."""
    from alembic import config as alembic_config

    cfg = alembic_config.Config()
    cfg.set_main_option("script_location", SCRIPT_LOCATION)
    cfg.attributes["connection"] = connection
    cfg.attributes["table_prefix"] = tables.check_prefix(prefix)
    return cfg


@functools.cache
def head() -> str | None:
    """The newest revision shipped in the package, as alembic reads it."""
    from alembic import config as alembic_config
    from alembic import script as alembic_script

    cfg = alembic_config.Config()
    cfg.set_main_option("script_location", SCRIPT_LOCATION)
    return alembic_script.ScriptDirectory.from_config(cfg).get_current_head()


def current(connection: sa.Connection, prefix: str) -> str | None:
    """The revision the database is at (None: never migrated)."""
    from alembic.runtime import migration

    ctx = migration.MigrationContext.configure(
        connection, opts={"version_table": tables.version_table(prefix)}
    )
    return ctx.get_current_revision()


def advisory_lock_key(name: str) -> int:
    """A stable signed 32-bit key for ``pg_advisory_xact_lock(class, key)``."""
    value = zlib.crc32(name.encode())
    return value - (1 << 32) if value >= (1 << 31) else value


@contextlib.contextmanager
def exclusive(connection: sa.Connection, name: str) -> Iterator[None]:
    """Run the block in a transaction of ``connection``, serialized with
    other processes until that transaction has ended.

    PostgreSQL: an advisory transaction lock.  MySQL and MariaDB, whose DDL
    commits as it goes: a named lock of the connection (``GET_LOCK``),
    taken before the transaction and released after its commit, so the next
    process reads what this one wrote.  SQLite: the transaction's
    ``BEGIN IMMEDIATE`` locks the database file.
    """
    dialect = connection.dialect.name
    key = None
    if dialect in ("mysql", "mariadb"):
        # names are at most 64 characters: the checksum keeps them apart
        key = f"swflows:{advisory_lock_key(name)}:{name}"[:64]
        got = connection.execute(
            sa.select(sa.func.get_lock(key, MYSQL_LOCK_WAIT))
        ).scalar()
        connection.commit()
        if got != 1:
            raise exceptions.SwflowsError(
                f"waited {MYSQL_LOCK_WAIT} s for another process's {name}"
            )
    try:
        with connection.begin():
            if dialect == "postgresql":
                connection.execute(
                    sa.select(
                        sa.func.pg_advisory_xact_lock(
                            _LOCK_CLASS, advisory_lock_key(name)
                        )
                    )
                )
            yield
    finally:
        if key is not None:
            connection.execute(sa.select(sa.func.release_lock(key)))
            connection.commit()


def at_head(connection: sa.Connection, prefix: str) -> bool:
    """Whether the version table says :data:`HEAD` (one query, no alembic;
    False when the table is missing or unreadable)."""
    version = sa.table(tables.version_table(prefix), sa.column("version_num"))
    try:
        found = connection.execute(sa.select(version.c.version_num)).scalars().all()
    except sa.exc.DBAPIError:
        return False
    finally:
        connection.rollback()
    return found == [HEAD]


def upgrade(engine: sa.Engine, prefix: str = tables.DEFAULT_PREFIX) -> bool:
    """Bring the store's tables to :func:`head`; return whether it ran."""
    with engine.connect() as conn:
        if at_head(conn, prefix):
            return False
    from alembic import command

    target = head()
    with engine.connect() as conn:
        if current(conn, prefix) == target:
            conn.rollback()
            return False
        conn.rollback()
        with exclusive(conn, f"migrate:{prefix}"):
            # another process may have finished while this one waited
            if current(conn, prefix) == target:
                return False
            command.upgrade(make_config(conn, prefix), "head")
    return True


def table_prefix() -> str:
    """The prefix a running migration script creates its tables with."""
    from alembic import context

    prefix = context.config.attributes.get("table_prefix", tables.DEFAULT_PREFIX)
    return tables.check_prefix(prefix)
