"""The store's database: engine, dialects, retried transactions, sealed secrets.

Every public method of the store is one transaction (:meth:`Database._write`,
:meth:`Database._read`): it either does all it says or nothing.  Transient
database errors (deadlock, serialization failure, SQLite "database is
locked") and the integrity errors two racing writers can cause are retried a
few times with a random backoff; if they persist the call raises
:class:`~swflows.exceptions.ConcurrentUpdate` (``retryable``).

Secrets.  Values of secret inputs (``swflows.derive.SECRET_INPUTS``, at
least ``deploy_password``) and server channels are Fernet-encrypted before
they are written (:meth:`Database._seal_values`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import functools
import itertools
import logging
import pathlib
import sqlite3
import time
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, Self, TypeVar

import sqlalchemy as sa
import tenacity
from sqlalchemy import event, pool

from swflows import exceptions, extras, model
from swflows.persistence import crypto, migrations
from swflows.persistence import tables as _tables

LOG = logging.getLogger(__name__)
T = TypeVar("T")

#: secret input names used when :mod:`swflows.derive` cannot be imported
FALLBACK_SECRET_INPUTS: Final = frozenset({"deploy_password"})
#: how a secret value is stored inside a JSON document
SECRET_MARK: Final = model.SEALED_KEY

#: SQLite: how long a writer waits for the database lock
SQLITE_BUSY_TIMEOUT_MS: Final = 30_000
#: attempts for transient database errors, before ConcurrentUpdate
DB_ATTEMPTS: Final = 6
#: attempts of :meth:`Store.publish` before ConcurrentUpdate

#: execution option read by the SQLite ``begin`` hook: "IMMEDIATE"|"DEFERRED"
_SQLITE_BEGIN: Final = "swflows_sqlite_begin"
_SQLITE_HOOKED: Final = "_swflows_sqlite_hooks"


# PostgreSQL serialization_failure, deadlock_detected, lock_not_available
_PG_TRANSIENT: Final = frozenset({"40001", "40P01", "55P03"})
# MySQL deadlock, lock wait timeout
_MYSQL_TRANSIENT: Final = frozenset({1213, 1205})
_SQLITE_TRANSIENT: Final = ("database is locked", "database table is locked")


def _secret_inputs() -> frozenset[str]:
    try:
        from swflows import derive
    except ImportError:
        return FALLBACK_SECRET_INPUTS
    names = getattr(derive, "SEALED_INPUTS", None)
    if not names:
        return FALLBACK_SECRET_INPUTS
    return frozenset(names) | FALLBACK_SECRET_INPUTS


def naive_utc(value: _dt.datetime | None) -> _dt.datetime | None:
    if value is not None and value.tzinfo is not None:
        return value.astimezone(_dt.UTC).replace(tzinfo=None)
    return value


def _check_text(field: str, value: Any, longest: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise exceptions.ValidationError(field, "must be a non-empty string")
    if len(value) > longest:
        raise exceptions.ValidationError(field, f"must be at most {longest} characters")
    return value


def check_id(field: str, value: Any) -> str:
    """A non-empty id that fits an id column."""
    return _check_text(field, value, _tables.ID_LENGTH)


def check_str(field: str, value: Any) -> str:
    """A non-empty name that fits a name column."""
    return _check_text(field, value, _tables.NAME_LENGTH)


def check_limit(limit: int | None) -> int | None:
    if limit is not None and (
        isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
    ):
        raise exceptions.ValidationError("limit", "must be a non-negative integer")
    return limit


def is_secret_shaped(value: Any) -> bool:
    return model.is_sealed(value)


def _transient(exc: BaseException) -> bool:
    """Whether a database error may go away if the transaction is re-run."""
    if isinstance(exc, sa.exc.IntegrityError):
        # two writers raced on a key; re-running finds the winner's row
        return True
    if not isinstance(exc, sa.exc.DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    orig = exc.orig
    code = getattr(orig, "pgcode", None) or getattr(orig, "sqlstate", None)
    if code in _PG_TRANSIENT:
        return True
    args = getattr(orig, "args", ())
    if args and args[0] in _MYSQL_TRANSIENT:
        return True
    message = str(orig).lower()
    return any(text in message for text in _SQLITE_TRANSIENT)


def _install_sqlite_hooks(
    engine: sa.Engine, *, immediate_by_default: bool, wal: bool
) -> None:
    """Take transaction control from pysqlite (SQLAlchemy's documented recipe).

    SQLAlchemy emits BEGIN itself: ``BEGIN IMMEDIATE`` for writes (the
    database lock is taken up front, so a read-then-write transaction never
    fails to upgrade its lock), ``BEGIN`` (deferred) for reads.  Also turns
    on foreign keys, a busy timeout and, for files, WAL journaling.
    """
    if getattr(engine, _SQLITE_HOOKED, False):
        return
    setattr(engine, _SQLITE_HOOKED, True)
    default = "IMMEDIATE" if immediate_by_default else "DEFERRED"

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            if wal:
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        # on the driver's connection: through SQLAlchemy's execution, a
        # BEGIN cost more CPU than many a statement it begins; its error
        # is wrapped as SQLAlchemy would have (a "database is locked" is
        # retried, :func:`_transient`)
        statement = f"BEGIN {conn.get_execution_options().get(_SQLITE_BEGIN, default)}"
        driver = conn.connection.driver_connection
        if driver is None:  # no driver connection: as SQLAlchemy's recipe does
            conn.exec_driver_sql(statement)
            return
        try:
            driver.execute(statement)
        except sqlite3.Error as exc:
            raise sa.exc.DBAPIError.instance(
                statement, None, exc, sqlite3.Error
            ) from exc


def _is_memory_sqlite(url: sa.URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (
        None,
        "",
        ":memory:",
    )


#: a pooled connection unused this long (seconds) is pinged before it is
#: handed out again; one in steady use is not (each ping is a round trip)
PING_IDLE_SECONDS: Final = 30.0
_CHECKED_IN: Final = "swflows_checked_in"


def _ping_when_idle(engine: sa.Engine, idle: float = PING_IDLE_SECONDS) -> None:
    """Ping a pooled connection before it is handed out, if it lay idle in
    the pool more than ``idle`` seconds: a server restarted, or a MySQL
    ``wait_timeout`` run out, while it lay there is found at checkout and
    the connection replaced.  One in steady use is handed out as it is (a
    ping per transaction was a fifth of a busy conductor's time); if its
    server went away meanwhile, its first statement fails with the
    connection invalidated, which the store's transactions retry
    (:func:`_transient`)."""

    @event.listens_for(engine, "checkin")
    def _checked_in(dbapi_conn: Any, record: Any) -> None:
        record.info[_CHECKED_IN] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checked_out(dbapi_conn: Any, record: Any, proxy: Any) -> None:
        since = record.info.get(_CHECKED_IN)
        if since is None or time.monotonic() - since <= idle:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except Exception as exc:
            # the pool drops this connection and hands out another
            raise sa.exc.DisconnectionError(
                f"an idle connection went away ({type(exc).__name__})"
            ) from None


@dataclasses.dataclass(frozen=True)
class PoolLimits:
    """How many connections a process keeps to a server database
    (``[database] max_pool_size``, ``max_overflow``, ``pool_timeout``)."""

    size: int
    overflow: int
    timeout: float

    @classmethod
    def from_conf(cls, conf: Any) -> PoolLimits:
        group = conf.database
        return cls(group.max_pool_size, group.max_overflow, group.pool_timeout)

    def engine_args(self) -> dict[str, Any]:
        return {
            "pool_size": self.size,
            "max_overflow": self.overflow,
            "pool_timeout": self.timeout,
        }


def create_engine(
    url: str | sa.URL, pool_limits: PoolLimits | None = None
) -> sa.Engine:
    """An engine set up for the store.

    SQLite files get WAL, a 30 s busy timeout and ``BEGIN IMMEDIATE``
    writes; ``sqlite://`` (in memory) is one shared connection (StaticPool),
    for tests and single-threaded use.  ``postgresql://`` uses psycopg2 when
    psycopg 3 is not installed; PostgreSQL runs at READ COMMITTED.  A
    server's connections are pinged when they come out of a long rest in
    the pool (:func:`_ping_when_idle`); ``pool_limits`` bounds how many it
    keeps (None: SQLAlchemy's own bounds, which the options' defaults are).
    """
    u = sa.make_url(url)
    limits = pool_limits.engine_args() if pool_limits is not None else {}
    backend = u.get_backend_name()
    if backend == "sqlite":
        if _is_memory_sqlite(u):
            engine = sa.create_engine(
                u,
                poolclass=pool.StaticPool,
                connect_args={"check_same_thread": False},
            )
        else:
            engine = sa.create_engine(u, connect_args={"check_same_thread": False})
        _install_sqlite_hooks(
            engine, immediate_by_default=True, wal=not _is_memory_sqlite(u)
        )
        return engine
    if backend == "postgresql":
        if u.drivername == "postgresql" and not _importable("psycopg"):
            u = u.set(drivername="postgresql+psycopg2")
        _require_driver(u)
        engine = sa.create_engine(u, isolation_level="READ COMMITTED", **limits)
    else:
        _require_driver(u)
        engine = sa.create_engine(u, **limits)
    _ping_when_idle(engine)
    return engine


#: the drivers an extra of setup.cfg installs: drivername -> (extra, store)
_DRIVER_EXTRAS = {
    "postgresql+psycopg2": ("postgresql", "a PostgreSQL store"),
    "mysql+pymysql": ("mysql", "a MySQL store"),
}


def _require_driver(url: sa.URL) -> None:
    """Name the extra installing the URL's driver when it is missing."""
    known = _DRIVER_EXTRAS.get(url.drivername)
    if known is not None:
        extra, store = known
        extras.require(extra, f"{store} ([database] connection {url.drivername}://)")


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


class Database:
    """One SQL database: its engine, tables, transactions and secret box.

    ``url`` is an SQLAlchemy URL; ``None`` means the SQLite file
    ``$XDG_STATE_HOME/swflows/swflows.sqlite`` (else
    ``~/.local/state/swflows/swflows.sqlite``).  A missing folder of a
    SQLite file is created with mode 0700.
    Tables are named ``<table_prefix><name>`` (default ``swflows_``) and are
    created or upgraded when the store opens.

    Secrets are encrypted with ``secret_key`` (a Fernet key, or several
    joined by commas: the first encrypts), else the key in
    ``secret_key_file``; without either, a SQLite store uses ``secret.key``
    beside its database file (created 0600), an in-memory one a throwaway
    key, and a server database refuses to open.

    ``engine`` lets an embedder share its own engine (then ``url`` is
    ignored and ``close()`` leaves the engine open).  A SQLite engine gets
    the store's transaction hooks; connections it made before are unchanged.
    ``pool_limits`` bounds the connections to a server database the engine
    made here keeps (:class:`PoolLimits`).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        table_prefix: str = _tables.DEFAULT_PREFIX,
        secret_key: bytes | str | None = None,
        secret_key_file: str | pathlib.Path | None = None,
        engine: sa.Engine | None = None,
        max_retries: int = 0,
        retry_interval: float = 2.0,
        pool_limits: PoolLimits | None = None,
    ) -> None:
        self._tables = _tables.tables(table_prefix)
        if engine is not None:
            self._engine = engine
            self._owns_engine = False
            if engine.dialect.name == "sqlite":
                _install_sqlite_hooks(
                    engine,
                    immediate_by_default=False,
                    wal=not _is_memory_sqlite(engine.url),
                )
        else:
            if url is None:
                url = f"sqlite:///{crypto.default_database_path()}"
            parsed = sa.make_url(url)
            if parsed.get_backend_name() == "sqlite" and not _is_memory_sqlite(parsed):
                assert parsed.database is not None
                crypto.ensure_private_dir(
                    pathlib.Path(parsed.database).expanduser().absolute().parent
                )
            self._engine = create_engine(parsed, pool_limits)
            self._owns_engine = True
        # SQLite: a write begins IMMEDIATE, a read DEFERRED (set here once:
        # setting it on each connection cost a transaction a tenth of its CPU)
        self._engines: dict[bool, sa.Engine] = {
            write: self._engine.execution_options(
                **{_SQLITE_BEGIN: "IMMEDIATE" if write else "DEFERRED"}
            )
            if self._engine.dialect.name == "sqlite"
            else self._engine
            for write in (False, True)
        }
        self._taskflow: Any = None
        self._statements: dict[str, Any] = {}
        self._closed = False
        self._secret_names = _secret_inputs()
        try:
            self._box = crypto.SecretBox(
                self._resolve_key(self._engine.url, secret_key, secret_key_file)
            )
            self._reach(max_retries, retry_interval)
        except BaseException:
            self.close()
            raise

    def _reach(self, max_retries: int, retry_interval: float) -> None:
        """Check (and upgrade) the schema: the store's first transaction.
        A server database that cannot be reached is tried ``max_retries``
        more times (-1: for ever), ``retry_interval`` seconds apart."""
        server = self._engine.dialect.name != "sqlite"
        for attempt in itertools.count(1):
            try:
                self._run(
                    "upgrade schema",
                    lambda: migrations.upgrade(self._engine, self._tables.prefix),
                )
                return
            except (sa.exc.OperationalError, exceptions.ConcurrentUpdate) as exc:
                if not server or 0 <= max_retries < attempt:
                    raise
                cause = exc.__cause__ if exc.__cause__ is not None else exc
                reason = str(getattr(cause, "orig", cause)).strip().splitlines()
                LOG.warning(
                    "the database at %s cannot be reached (%s): trying again "
                    "in %.0f s (%d of %s)",
                    self._engine.url.render_as_string(hide_password=True),
                    reason[0] if reason else type(cause).__name__,
                    retry_interval,
                    attempt,
                    "ever" if max_retries < 0 else max_retries,
                )
                time.sleep(retry_interval)

    @staticmethod
    def _resolve_key(
        url: sa.URL,
        secret_key: bytes | str | None,
        secret_key_file: str | pathlib.Path | None,
    ) -> bytes | str:
        if secret_key:
            return secret_key
        is_sqlite = url.get_backend_name() == "sqlite"
        if secret_key_file:
            return crypto.load_key_file(secret_key_file, create=is_sqlite)
        if _is_memory_sqlite(url):
            return crypto.generate_key()
        if is_sqlite:
            assert url.database is not None
            folder = pathlib.Path(url.database).expanduser().absolute().parent
            return crypto.load_key_file(folder / crypto.KEY_FILE_NAME, create=True)
        raise exceptions.ValidationError(
            "secret_key",
            "a server database needs [database] secret_key or secret_key_file, "
            "the same on every host",
        )

    @classmethod
    def from_conf(cls, conf: Any) -> Self:
        """Open the store ``conf``'s ``[database]`` options describe.

        Reads ``connection``, ``table_prefix``, ``secret_key``,
        ``secret_key_file``, ``max_retries``, ``retry_interval`` and the
        pool's limits (see :mod:`swflows.conf`).
        """
        from swflows import conf as swconf

        if "database" not in conf:
            swconf.register_opts(conf)
        group = conf.database
        prefix = group.table_prefix
        return cls(
            group.connection or None,
            table_prefix=_tables.DEFAULT_PREFIX if prefix is None else prefix,
            secret_key=group.secret_key or None,
            secret_key_file=group.secret_key_file or None,
            max_retries=group.max_retries,
            retry_interval=group.retry_interval,
            pool_limits=PoolLimits.from_conf(conf),
        )

    # -- lifecycle ---------------------------------------------------------

    @property
    def url(self) -> str:
        """The database URL, password hidden."""
        return self._engine.url.render_as_string(hide_password=True)

    @property
    def engine(self) -> sa.Engine:
        return self._engine

    @property
    def table_prefix(self) -> str:
        return self._tables.prefix

    @property
    def tables(self) -> _tables.Tables:
        return self._tables

    @functools.cached_property
    def installation_id(self) -> str:
        """The store's own id (written once, when its tables were made):
        the same in every process, whatever URL each reaches it by."""
        t = self._tables.installation
        found = self._read(
            "read the installation id", lambda conn: conn.scalar(sa.select(t.c.id))
        )
        if not found:
            raise exceptions.SwflowsError(
                f"the store's {t.name} table has no row (written when the "
                "table was made): restore it from a backup, or insert one row "
                "(name 'installation', any new id) before starting swflows"
            )
        return str(found)

    def close(self) -> None:
        """Release connections; the store cannot be used afterwards."""
        if self._closed:
            return
        self._closed = True
        if self._taskflow is not None:
            self._taskflow.close()
            self._taskflow = None
        if self._owns_engine:
            self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.url!r}, table_prefix={self.table_prefix!r})"

    def derivation_key(self) -> bytes:
        """Key material for secrets swflows re-derives rather than stores."""
        return self._box.derivation_key()

    def taskflow_backend(self) -> Any:
        """A TaskFlow persistence backend on this store's engine (created once).

        It is :class:`swflows.persistence.logbook.Backend` on TaskFlow's
        tables under this store's prefix (``<prefix>tf_logbooks``, …), which
        the store's migrations made.
        """
        if self._taskflow is None:
            from swflows.persistence import logbook

            backend = logbook.Backend(self._engine, self.tables)
            self._taskflow = backend
        return self._taskflow

    # -- transactions ------------------------------------------------------

    def _run(self, what: str, fn: Callable[[], T]) -> T:
        # the first attempt runs bare: building the retry machinery for
        # every transaction cost CPU, and returning from inside its loop
        # left cycles (frames, tracebacks) for the garbage collector
        try:
            return fn()
        except BaseException as exc:
            if not _transient(exc):
                raise
            failed = [exc]

        def attempt_again() -> T:
            if failed:  # the retry loop's first attempt is the one made
                raise failed.pop()
            return fn()

        return self._retry(what, attempt_again)

    def _retry(self, what: str, fn: Callable[[], T]) -> T:
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(DB_ATTEMPTS),
            wait=tenacity.wait_random_exponential(multiplier=0.02, max=0.5),
            retry=tenacity.retry_if_exception(_transient),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    return fn()
        except sa.exc.DBAPIError as exc:
            if _transient(exc):
                raise exceptions.ConcurrentUpdate(
                    f"{what}: the database stayed busy or conflicting; retry",
                    operation=what,
                ) from exc
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _statement(self, key: str, build: Callable[[], Any]) -> Any:
        """The statement ``build()`` makes, built once per store: its values
        are bound when it runs (``sa.bindparam``).  Building a statement and
        its cache key cost more than running it, on the reads made most."""
        found = self._statements.get(key)
        if found is None:
            found = self._statements[key] = build()
        return found

    @contextlib.contextmanager
    def _begin(self, *, write: bool) -> Iterator[sa.Connection]:
        if self._closed:
            raise exceptions.SwflowsError("the store is closed")
        with self._engines[write].connect() as conn, conn.begin():
            yield conn

    def _write(self, what: str, fn: Callable[[sa.Connection], T]) -> T:
        def once() -> T:
            with self._begin(write=True) as conn:
                return fn(conn)

        return self._run(what, once)

    def _write_first(
        self,
        what: str,
        fast: Callable[[sa.Connection], T],
        careful: Callable[[sa.Connection], T],
    ) -> T:
        """``fast`` in a transaction of its own, tried once; if it fails as
        a transaction run again may not (a key already taken, a row it
        refers to missing, a connection lost), nothing of it is kept, and
        ``careful`` runs as :meth:`_write` runs it.  ``fast`` inserts and
        lets the database's keys check what ``careful`` reads first (an
        existing row to return, a missing one to name in a clear error):
        a new row costs one round trip less for each such read."""
        try:
            with self._begin(write=True) as conn:
                return fast(conn)
        except sa.exc.DBAPIError as exc:
            if not _transient(exc):
                raise
        return self._write(what, careful)

    def _read(self, what: str, fn: Callable[[sa.Connection], T]) -> T:
        def once() -> T:
            with self._begin(write=False) as conn:
                return fn(conn)

        return self._run(what, once)

    def _forget(self, conn: sa.Connection, kind: str, object_id: str) -> None:
        """Remove an object's owner in the transaction removing it."""
        o = self._tables.owners
        conn.execute(sa.delete(o).where(o.c.kind == kind, o.c.object_id == object_id))

    # -- secrets -----------------------------------------------------------

    def _seal(self, value: Any) -> dict[str, str]:
        return {SECRET_MARK: self._box.encrypt(value)}

    def _open(self, value: Any) -> Any:
        if is_secret_shaped(value):
            return self._box.decrypt(value[SECRET_MARK])
        return value

    def _seal_values(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Encrypt secret-named values, and any value shaped like a sealed one."""
        return {
            key: (
                self._seal(value)
                if value is not None
                and (key in self._secret_names or is_secret_shaped(value))
                else value
            )
            for key, value in values.items()
        }

    def _open_values(self, values: Mapping[str, Any]) -> dict[str, Any]:
        return {key: self._open(value) for key, value in values.items()}

    def seal(self, value: Any) -> dict[str, str]:
        """``value`` encrypted with the store's key, in the shape the store
        keeps secrets in (``{model.SEALED_KEY: token}``): how hidden input
        values travel through a flow's stored inputs and a deployment."""
        return self._seal(value)

    def open_values(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` with each sealed one (:meth:`seal`) decrypted."""
        return self._open_values(values)
