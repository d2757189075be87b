"""The store: configs, deployments and server metadata in one SQL database.

Every public method is one transaction: it either does all it says or
nothing.  Transient database errors (deadlock, serialization failure, SQLite
"database is locked") and the integrity errors two racing writers can cause
are retried a few times with a random backoff; if they persist the call
raises :class:`~swflows.exceptions.ConcurrentUpdate` (``retryable``).

Errors name what is wrong:

* an unknown id asked for directly raises the ``*NotFound`` of its kind;
* a config *referenced* by a deployment that does not exist raises
  :class:`~swflows.exceptions.ConfigNotFound` too, with ``field`` set to
  ``config_id`` or ``source_config_id``;
* a value that cannot be stored raises
  :class:`~swflows.exceptions.ValidationError` naming the field;
* a forbidden status change raises
  :class:`~swflows.exceptions.InvalidTransition`; a failed ``expected_*``
  check raises :class:`~swflows.exceptions.ConcurrentUpdate` carrying the
  current values.

Concurrency.  Every write that changes what a server sees (a deployment
created or deleted, its ``config_id`` changed, or its action cancelled,
which withdraws it: :func:`swflows.states.withdrawn`) locks the server's row
(``SELECT ... FOR UPDATE``; SQLite: the whole database, ``BEGIN IMMEDIATE``)
and bumps its ``metadata_version`` in the same transaction, so versions
count those writes exactly and :meth:`Store.server_metadata` reads a
document and its version together.

Secrets.  Values of secret inputs (``swflows.derive.SECRET_INPUTS``, at
least ``deploy_password``) in configs and in deployment ``input_values``,
and server channels, are Fernet-encrypted before they are written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import logging
import pathlib
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, Self, TypeVar

import sqlalchemy as sa
import tenacity
from sqlalchemy import event, pool
from sqlalchemy.dialects import mysql as sa_mysql
from sqlalchemy.dialects import postgresql as sa_postgresql
from sqlalchemy.dialects import sqlite as sa_sqlite

from swflows import exceptions, model, states
from swflows.persistence import crypto, migrations
from swflows.persistence import tables as _tables

LOG = logging.getLogger(__name__)
T = TypeVar("T")

#: secret input names used when :mod:`swflows.derive` cannot be imported
FALLBACK_SECRET_INPUTS: Final = frozenset({"deploy_password"})
#: how a secret value is stored inside a JSON document
SECRET_MARK: Final = "$swflows_secret"  # noqa: S105 (a key name)

#: SQLite: how long a writer waits for the database lock
SQLITE_BUSY_TIMEOUT_MS: Final = 30_000
#: attempts for transient database errors, before ConcurrentUpdate
DB_ATTEMPTS: Final = 6
#: attempts of :meth:`Store.publish` before ConcurrentUpdate
PUBLISH_ATTEMPTS: Final = 50

#: execution option read by the SQLite ``begin`` hook: "IMMEDIATE"|"DEFERRED"
_SQLITE_BEGIN: Final = "swflows_sqlite_begin"
_SQLITE_HOOKED: Final = "_swflows_sqlite_hooks"

#: deployment fields update_deployment may change
UPDATABLE_FIELDS: Final = frozenset(
    {
        "config_id",
        "source_config_id",
        "action",
        "status",
        "status_reason",
        "reason",
        "input_values",
        "output_values",
        "signal_transport",
        "name",
        "actions",
        "generation",
        "timeout",
        "parent_id",
    }
)
_FIXED_FIELDS: Final = frozenset({"id", "server_id", "creation_time", "updated_time"})

# PostgreSQL serialization_failure, deadlock_detected, lock_not_available
_PG_TRANSIENT: Final = frozenset({"40001", "40P01", "55P03"})
# MySQL deadlock, lock wait timeout
_MYSQL_TRANSIENT: Final = frozenset({1213, 1205})
_SQLITE_TRANSIENT: Final = ("database is locked", "database table is locked")


@dataclasses.dataclass(frozen=True)
class ServerMetadata:
    """A server's metadata document and the version it was read at.

    ``deployments`` is Heat's list (§1.4): each item a derived config dict as
    :meth:`~swflows.model.Config.to_dict` gives, sorted by name, ties in
    creation order; deployments without a config are skipped.
    """

    server_id: str
    version: int
    deployments: list[dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class ServerRecord:
    """A server's row: its metadata versions and its config channel."""

    server_id: str
    #: bumped by every deployment create, delete and config_id change
    metadata_version: int
    #: the last version a publisher confirmed with mark_published
    published_version: int
    config_transport: str | None = None
    #: decrypted; it may hold credentials
    channel: dict[str, Any] | None = dataclasses.field(default=None, repr=False)
    updated_time: _dt.datetime | None = None
    #: when it was enrolled (None: its channel came with a first deployment)
    enrolled_time: _dt.datetime | None = None
    #: Nova knows it (its deletion or ERROR fails waiting deployments)
    in_compute: bool = False


def _secret_inputs() -> frozenset[str]:
    try:
        from swflows import derive
    except ImportError:
        return FALLBACK_SECRET_INPUTS
    names = getattr(derive, "SEALED_INPUTS", None)
    if not names:
        return FALLBACK_SECRET_INPUTS
    return frozenset(names) | FALLBACK_SECRET_INPUTS


def _naive_utc(value: _dt.datetime | None) -> _dt.datetime | None:
    if value is not None and value.tzinfo is not None:
        return value.astimezone(_dt.UTC).replace(tzinfo=None)
    return value


def _check_id(field: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise exceptions.ValidationError(field, "must be a non-empty string")
    if len(value) > _tables.ID_LENGTH:
        raise exceptions.ValidationError(
            field, f"must be at most {_tables.ID_LENGTH} characters"
        )
    return value


def _check_str(field: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise exceptions.ValidationError(field, "must be a non-empty string")
    if len(value) > _tables.NAME_LENGTH:
        raise exceptions.ValidationError(
            field, f"must be at most {_tables.NAME_LENGTH} characters"
        )
    return value


def _check_limit(limit: int | None) -> int | None:
    if limit is not None and (
        isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
    ):
        raise exceptions.ValidationError("limit", "must be a non-negative integer")
    return limit


def _is_secret_shaped(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {SECRET_MARK}


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
        mode = conn.get_execution_options().get(_SQLITE_BEGIN, default)
        conn.exec_driver_sql(f"BEGIN {mode}")


def _is_memory_sqlite(url: sa.URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (
        None,
        "",
        ":memory:",
    )


def create_engine(url: str | sa.URL) -> sa.Engine:
    """An engine set up for the store.

    SQLite files get WAL, a 30 s busy timeout and ``BEGIN IMMEDIATE``
    writes; ``sqlite://`` (in memory) is one shared connection (StaticPool),
    for tests and single-threaded use.  ``postgresql://`` uses psycopg2 when
    psycopg 3 is not installed; PostgreSQL runs at READ COMMITTED.
    """
    u = sa.make_url(url)
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
        return sa.create_engine(u, pool_pre_ping=True, isolation_level="READ COMMITTED")
    return sa.create_engine(u, pool_pre_ping=True)


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


class Store:
    """Configs, deployments and server metadata in one SQL database.

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
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        table_prefix: str = _tables.DEFAULT_PREFIX,
        secret_key: bytes | str | None = None,
        secret_key_file: str | pathlib.Path | None = None,
        engine: sa.Engine | None = None,
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
            self._engine = create_engine(parsed)
            self._owns_engine = True
        self._taskflow: Any = None
        self._closed = False
        self._secret_names = _secret_inputs()
        try:
            self._box = crypto.SecretBox(
                self._resolve_key(self._engine.url, secret_key, secret_key_file)
            )
            self._run(
                "upgrade schema",
                lambda: migrations.upgrade(self._engine, self._tables.prefix),
            )
        except BaseException:
            self.close()
            raise

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
    def from_conf(cls, conf: Any) -> Store:
        """Open the store ``conf``'s ``[database]`` options describe.

        Reads ``connection``, ``table_prefix``, ``secret_key`` and
        ``secret_key_file`` (see :mod:`swflows.conf`).
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

    @contextlib.contextmanager
    def _begin(self, *, write: bool) -> Iterator[sa.Connection]:
        if self._closed:
            raise exceptions.SwflowsError("the store is closed")
        with self._engine.connect() as conn:
            if self._engine.dialect.name == "sqlite":
                conn.execution_options(
                    **{_SQLITE_BEGIN: "IMMEDIATE" if write else "DEFERRED"}
                )
            with conn.begin():
                yield conn

    def _write(self, what: str, fn: Callable[[sa.Connection], T]) -> T:
        def once() -> T:
            with self._begin(write=True) as conn:
                return fn(conn)

        return self._run(what, once)

    def _read(self, what: str, fn: Callable[[sa.Connection], T]) -> T:
        def once() -> T:
            with self._begin(write=False) as conn:
                return fn(conn)

        return self._run(what, once)

    # -- secrets -----------------------------------------------------------

    def _seal(self, value: Any) -> dict[str, str]:
        return {SECRET_MARK: self._box.encrypt(value)}

    def _open(self, value: Any) -> Any:
        if _is_secret_shaped(value):
            return self._box.decrypt(value[SECRET_MARK])
        return value

    def _seal_values(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Encrypt secret-named values, and any value shaped like a sealed one."""
        return {
            key: (
                self._seal(value)
                if value is not None
                and (key in self._secret_names or _is_secret_shaped(value))
                else value
            )
            for key, value in values.items()
        }

    def _open_values(self, values: Mapping[str, Any]) -> dict[str, Any]:
        return {key: self._open(value) for key, value in values.items()}

    # -- configs -----------------------------------------------------------

    def _config_body(self, config: model.Config) -> dict[str, Any]:
        inputs = []
        for spec in config.inputs:
            item = spec.to_dict()
            for key in ("value", "default"):
                value = item.get(key)
                if value is not None and (
                    spec.name in self._secret_names or _is_secret_shaped(value)
                ):
                    item[key] = self._seal(value)
            inputs.append(item)
        return {
            "config": config.config,
            "inputs": inputs,
            "outputs": [o.to_dict() for o in config.outputs],
            "options": dict(config.options),
        }

    def _config_from_row(self, row: Any) -> model.Config:
        body = row.body
        inputs = []
        for item in body.get("inputs") or []:
            item = dict(item)
            for key in ("value", "default"):
                if key in item:
                    item[key] = self._open(item[key])
            inputs.append(item)
        return model.Config.create(
            row.name,
            body.get("config", ""),
            group=row.group,
            inputs=inputs,
            outputs=body.get("outputs"),
            options=body.get("options"),
            id=row.id,
            creation_time=row.created_at,
        )

    @staticmethod
    def _config_content(config: model.Config) -> dict[str, Any]:
        content = config.to_dict()
        del content["creation_time"]
        return content

    def create_config(
        self, config: model.Config, *, derived: bool = False
    ) -> model.Config:
        """Store an immutable config; there is no update.

        Creating the same id again with the same content (and ``derived``
        flag) returns the stored config; different content raises
        ``ValidationError("id", ...)``.  ``derived`` marks a config made for
        one deployment action (listed only with ``include_derived``).
        """
        if not isinstance(config, model.Config):
            raise exceptions.ValidationError("config", "must be a model.Config")
        _check_id("id", config.id)
        created = _naive_utc(config.creation_time) or model.utcnow()
        stored = dataclasses.replace(config, creation_time=created)
        body = self._config_body(config)
        t = self._tables.configs

        def op(conn: sa.Connection) -> model.Config:
            row = conn.execute(sa.select(t).where(t.c.id == config.id)).first()
            if row is not None:
                existing = self._config_from_row(row)
                if row.derived != derived or self._config_content(
                    existing
                ) != self._config_content(config):
                    raise exceptions.ValidationError(
                        "id",
                        f"config {config.id} already exists with different content",
                    )
                return existing
            conn.execute(
                sa.insert(t).values(
                    id=config.id,
                    name=config.name,
                    group=config.group,
                    body=body,
                    derived=derived,
                    created_at=created,
                )
            )
            return stored

        return self._write("create config", op)

    def get_config(self, config_id: str) -> model.Config:
        t = self._tables.configs

        def op(conn: sa.Connection) -> model.Config:
            row = conn.execute(sa.select(t).where(t.c.id == config_id)).first()
            if row is None:
                raise exceptions.ConfigNotFound(config_id)
            return self._config_from_row(row)

        return self._read("get config", op)

    def list_configs(
        self,
        *,
        limit: int | None = None,
        marker: str | None = None,
        include_derived: bool = False,
    ) -> list[model.Config]:
        """Configs ordered by creation time, then id.

        ``marker`` is the last id of the previous page (ConfigNotFound if it
        does not exist); derived configs are left out unless asked for.
        """
        _check_limit(limit)
        t = self._tables.configs

        def op(conn: sa.Connection) -> list[model.Config]:
            query = sa.select(t)
            if not include_derived:
                query = query.where(t.c.derived.is_(sa.false()))
            if marker is not None:
                last = conn.execute(
                    sa.select(t.c.created_at, t.c.id).where(t.c.id == marker)
                ).first()
                if last is None:
                    raise exceptions.ConfigNotFound(marker)
                query = query.where(
                    sa.or_(
                        t.c.created_at > last.created_at,
                        sa.and_(t.c.created_at == last.created_at, t.c.id > last.id),
                    )
                )
            query = query.order_by(t.c.created_at, t.c.id)
            if limit is not None:
                query = query.limit(limit)
            return [self._config_from_row(row) for row in conn.execute(query)]

        return self._read("list configs", op)

    def delete_config(self, config_id: str) -> None:
        """Delete a config; ConfigInUse while a deployment references it."""
        c, d = self._tables.configs, self._tables.deployments

        def op(conn: sa.Connection) -> None:
            if conn.scalar(sa.select(c.c.id).where(c.c.id == config_id)) is None:
                raise exceptions.ConfigNotFound(config_id)
            users = list(
                conn.scalars(
                    sa.select(d.c.id)
                    .where(
                        sa.or_(
                            d.c.config_id == config_id,
                            d.c.source_config_id == config_id,
                        )
                    )
                    .order_by(d.c.id)
                    .limit(20)
                )
            )
            if users:
                raise exceptions.ConfigInUse(config_id, users)
            conn.execute(sa.delete(c).where(c.c.id == config_id))

        self._write("delete config", op)

    # -- servers -----------------------------------------------------------

    def _lock_server(self, conn: sa.Connection, server_id: str) -> Any:
        """The server's row, created if missing, locked for this transaction."""
        s = self._tables.servers
        locked = sa.select(s).where(s.c.server_id == server_id).with_for_update()
        row = conn.execute(locked).first()
        if row is not None:
            return row
        values = {"server_id": server_id, "metadata_version": 0, "published_version": 0}
        dialect = conn.dialect.name
        if dialect == "postgresql":
            conn.execute(
                sa_postgresql.insert(s).values(values).on_conflict_do_nothing()
            )
        elif dialect == "sqlite":
            conn.execute(sa_sqlite.insert(s).values(values).on_conflict_do_nothing())
        elif dialect in ("mysql", "mariadb"):
            ins = sa_mysql.insert(s).values(values)
            conn.execute(ins.on_duplicate_key_update(server_id=ins.inserted.server_id))
        else:
            # a racing insert raises IntegrityError; the transaction is re-run
            conn.execute(sa.insert(s).values(values))
        return conn.execute(locked).one()

    def _bump(self, conn: sa.Connection, server_id: str) -> int:
        """Lock the server's row and bump its metadata_version; the new one."""
        s = self._tables.servers
        row = self._lock_server(conn, server_id)
        version = int(row.metadata_version) + 1
        conn.execute(
            sa.update(s)
            .where(s.c.server_id == server_id)
            .values(metadata_version=version, updated_at=model.utcnow())
        )
        return version

    def _server_from_row(self, row: Any) -> ServerRecord:
        return ServerRecord(
            server_id=row.server_id,
            metadata_version=row.metadata_version,
            published_version=row.published_version,
            config_transport=row.config_transport,
            channel=None if row.channel is None else self._box.decrypt(row.channel),
            updated_time=row.updated_at,
            enrolled_time=row.enrolled_at,
            in_compute=bool(row.in_compute),
        )

    def get_server(self, server_id: str) -> ServerRecord:
        """A server's row (ServerNotFound until it has had a deployment or channel)."""
        s = self._tables.servers

        def op(conn: sa.Connection) -> ServerRecord:
            row = conn.execute(sa.select(s).where(s.c.server_id == server_id)).first()
            if row is None:
                raise exceptions.ServerNotFound(server_id)
            return self._server_from_row(row)

        return self._read("get server", op)

    def list_servers(self) -> list[ServerRecord]:
        s = self._tables.servers

        def op(conn: sa.Connection) -> list[ServerRecord]:
            rows = conn.execute(sa.select(s).order_by(s.c.server_id))
            return [self._server_from_row(row) for row in rows]

        return self._read("list servers", op)

    def set_server_channel(
        self,
        server_id: str,
        config_transport: str | None,
        channel: Mapping[str, Any] | None,
        *,
        enrolled: bool | None = None,
        in_compute: bool | None = None,
    ) -> ServerRecord:
        """Record how a server gets its metadata; the channel is encrypted.

        A changed transport or channel resets ``published_version`` to 0:
        nothing has been published through the new channel yet.
        ``enrolled`` sets (True) or clears (False) the enrollment time;
        ``in_compute`` records whether Nova knows the server; None keeps
        either as it is.
        """
        _check_str("server_id", server_id)
        if config_transport is not None:
            _check_str("config_transport", config_transport)
            if len(config_transport) > _tables.TRANSPORT_LENGTH:
                raise exceptions.ValidationError(
                    "config_transport",
                    f"must be at most {_tables.TRANSPORT_LENGTH} characters",
                )
        if channel is not None and not isinstance(channel, Mapping):
            raise exceptions.ValidationError("channel", "must be a mapping or None")
        new_channel = None if channel is None else dict(channel)
        sealed = None if new_channel is None else self._box.encrypt(new_channel)
        s = self._tables.servers

        def op(conn: sa.Connection) -> ServerRecord:
            row = self._lock_server(conn, server_id)
            old = None if row.channel is None else self._box.decrypt(row.channel)
            values: dict[str, Any] = {
                "config_transport": config_transport,
                "channel": sealed,
                "updated_at": model.utcnow(),
            }
            if old != new_channel or row.config_transport != config_transport:
                values["published_version"] = 0
            if enrolled is not None:
                values["enrolled_at"] = (
                    (row.enrolled_at or model.utcnow()) if enrolled else None
                )
            if in_compute is not None:
                values["in_compute"] = in_compute
            conn.execute(sa.update(s).where(s.c.server_id == server_id).values(values))
            return self._server_from_row(
                conn.execute(sa.select(s).where(s.c.server_id == server_id)).one()
            )

        return self._write("set server channel", op)

    def delete_server(self, server_id: str) -> bool:
        """Remove a server's row; False if there was none.

        Refused with ServerInUse while deployments are on the server.
        """
        s, d = self._tables.servers, self._tables.deployments

        def op(conn: sa.Connection) -> bool:
            exists = conn.scalar(
                sa.select(s.c.server_id).where(s.c.server_id == server_id)
            )
            if exists is None:
                return False
            self._lock_server(conn, server_id)
            on_it = conn.scalars(
                sa.select(d.c.id).where(d.c.server_id == server_id).limit(6)
            ).all()
            if on_it:
                raise exceptions.ServerInUse(server_id, list(on_it))
            conn.execute(sa.delete(s).where(s.c.server_id == server_id))
            return True

        return self._write("delete server", op)

    def compute_servers(self, server_ids: Iterable[str]) -> set[str]:
        """Which of ``server_ids`` Nova knows (``in_compute``), in one query."""
        wanted = sorted(set(server_ids))
        if not wanted:
            return set()
        s = self._tables.servers

        def op(conn: sa.Connection) -> set[str]:
            rows = conn.scalars(
                sa.select(s.c.server_id).where(
                    s.c.server_id.in_(wanted), s.c.in_compute.is_(True)
                )
            )
            return set(rows)

        return self._read("read compute servers", op)

    def server_metadata(self, server_id: str) -> ServerMetadata:
        """The server's metadata document and its version, read in one query.

        A server the store has never seen has version 0 and no deployments.
        A cancelled action's derived config is left out
        (:func:`swflows.states.withdrawn`).
        """
        s, d, c = self._tables.servers, self._tables.deployments, self._tables.configs
        query = (
            sa.select(
                s.c.metadata_version,
                c.c.id,
                c.c.name,
                c.c.group,
                c.c.body,
                c.c.created_at,
                d.c.status,
                d.c.reason,
            )
            .select_from(
                s.outerjoin(d, d.c.server_id == s.c.server_id).outerjoin(
                    c, c.c.id == d.c.config_id
                )
            )
            .where(s.c.server_id == server_id)
            .order_by(d.c.server_seq)
        )

        def op(conn: sa.Connection) -> ServerMetadata:
            rows = conn.execute(query).all()
            if not rows:
                return ServerMetadata(server_id, 0, [])
            configs = [
                self._config_from_row(row)
                for row in rows
                if row.id and not states.withdrawn(row.status, row.reason)
            ]
            # stable: equal names keep creation order (server_seq)
            configs.sort(key=lambda config: config.name)
            return ServerMetadata(
                server_id,
                int(rows[0].metadata_version),
                [config.to_dict() for config in configs],
            )

        return self._read("read server metadata", op)

    def mark_published(self, server_id: str, version: int) -> bool:
        """Record that ``version``'s document reached the server.

        Compare-and-swap: sets ``published_version`` only if ``version`` is
        still the server's ``metadata_version`` and newer than the last one
        published.  ``False`` tells a publisher its copy may be stale: read
        and publish again (:meth:`publish` does the loop).
        """
        s = self._tables.servers

        def op(conn: sa.Connection) -> bool:
            result = conn.execute(
                sa.update(s)
                .where(
                    s.c.server_id == server_id,
                    s.c.metadata_version == version,
                    s.c.published_version < version,
                )
                .values(published_version=version)
            )
            return bool(result.rowcount == 1)

        return self._write("mark published", op)

    def _metadata_version(self, server_id: str) -> int:
        s = self._tables.servers

        def op(conn: sa.Connection) -> int:
            version = conn.scalar(
                sa.select(s.c.metadata_version).where(s.c.server_id == server_id)
            )
            return int(version or 0)

        return self._read("read metadata version", op)

    def publish(
        self, server_id: str, put: Callable[[ServerMetadata], None]
    ) -> ServerMetadata:
        """Publish the server's metadata with ``put`` until the last copy is current.

        Reads (version, document), calls ``put``, then :meth:`mark_published`.
        If that fails and the version has moved on, another write happened
        while ``put`` ran and this copy may have overwritten a newer one: do
        it again.  If the version did not move, someone else confirmed the
        same document: done.  Returns what was put last.  This is Heat's
        §1.5 step 6 (bug 1731032) without its lost-update windows.
        """
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(PUBLISH_ATTEMPTS),
            wait=tenacity.wait_random_exponential(multiplier=0.005, max=0.2),
            retry=tenacity.retry_if_exception_type(_Stale),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    metadata = self.server_metadata(server_id)
                    put(metadata)
                    if self.mark_published(server_id, metadata.version):
                        return metadata
                    if self._metadata_version(server_id) == metadata.version:
                        return metadata
                    raise _Stale
        except _Stale:
            raise exceptions.ConcurrentUpdate(
                f"server {server_id}: metadata kept changing while publishing",
                server_id=server_id,
            ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    # -- deployments -------------------------------------------------------

    def _check_configs_exist(self, conn: sa.Connection, **refs: str | None) -> None:
        c = self._tables.configs
        for field, config_id in refs.items():
            if config_id is None:
                continue
            if conn.scalar(sa.select(c.c.id).where(c.c.id == config_id)) is None:
                raise exceptions.ConfigNotFound(
                    config_id,
                    f"{field}: config {config_id} not found",
                    field=field,
                )

    @staticmethod
    def _check_deployment(dep: model.Deployment) -> None:
        for field in ("config_id", "source_config_id", "parent_id"):
            value = getattr(dep, field)
            if value is not None:
                _check_id(field, value)
        if len(dep.server_id) > _tables.NAME_LENGTH:
            raise exceptions.ValidationError(
                "server_id", f"must be at most {_tables.NAME_LENGTH} characters"
            )
        if not isinstance(dep.output_values, dict):
            raise exceptions.ValidationError("output_values", "must be a mapping")
        if dep.reason is not None and not isinstance(dep.reason, dict):
            raise exceptions.ValidationError("reason", "must be a mapping or None")
        if not isinstance(dep.status_reason, str):
            raise exceptions.ValidationError("status_reason", "must be a string")
        _check_str("signal_transport", dep.signal_transport)
        if dep.name is not None:
            _check_str("name", dep.name)
        if isinstance(dep.actions, str) or not all(
            isinstance(a, str) for a in dep.actions
        ):
            raise exceptions.ValidationError("actions", "must be a list of strings")
        for field in ("generation", "timeout"):
            value = getattr(dep, field)
            if value is None and field == "timeout":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise exceptions.ValidationError(
                    field, "must be a non-negative integer"
                )

    def _deployment_values(self, dep: model.Deployment) -> dict[str, Any]:
        return {
            "config_id": dep.config_id,
            "source_config_id": dep.source_config_id,
            "action": dep.action,
            "status": dep.status,
            "status_reason": dep.status_reason,
            "reason": dep.reason,
            "input_values": self._seal_values(dep.input_values),
            "output_values": dep.output_values,
            "signal_transport": dep.signal_transport,
            "name": dep.name,
            "actions": list(dep.actions),
            "generation": dep.generation,
            "timeout": dep.timeout,
            "parent_id": dep.parent_id,
        }

    def _deployment_from_row(self, row: Any) -> model.Deployment:
        return model.Deployment(
            id=row.id,
            server_id=row.server_id,
            config_id=row.config_id,
            source_config_id=row.source_config_id,
            action=row.action,
            status=row.status,
            status_reason=row.status_reason,
            reason=row.reason,
            input_values=self._open_values(row.input_values or {}),
            output_values=dict(row.output_values or {}),
            signal_transport=row.signal_transport,
            name=row.name,
            actions=tuple(row.actions or ()),
            generation=row.generation,
            timeout=row.timeout,
            parent_id=row.parent_id,
            creation_time=row.created_at,
            updated_time=row.updated_at,
        )

    @staticmethod
    def _deployment_content(dep: model.Deployment) -> dict[str, Any]:
        content = dep.to_dict()
        content.pop("creation_time", None)
        content.pop("updated_time", None)
        return content

    def create_deployment(self, dep: model.Deployment) -> model.Deployment:
        """Store a new deployment and bump its server's metadata_version.

        Its status must be one a deployment may start in
        (``states.check_transition(None, status)``).  ``config_id`` and
        ``source_config_id`` must name stored configs (ConfigNotFound with
        ``field``).  The same id again with the same content returns the
        stored deployment; different content raises ``ValidationError("id")``.
        """
        if not isinstance(dep, model.Deployment):
            raise exceptions.ValidationError("deployment", "must be a model.Deployment")
        _check_id("id", dep.id)
        self._check_deployment(dep)
        created = _naive_utc(dep.creation_time) or model.utcnow()
        stored = dataclasses.replace(dep, creation_time=created, updated_time=None)
        values = self._deployment_values(dep)
        d = self._tables.deployments

        def op(conn: sa.Connection) -> model.Deployment:
            row = conn.execute(sa.select(d).where(d.c.id == dep.id)).first()
            if row is not None:
                existing = self._deployment_from_row(row)
                if self._deployment_content(existing) != self._deployment_content(dep):
                    raise exceptions.ValidationError(
                        "id",
                        f"deployment {dep.id} already exists with different content",
                    )
                return existing
            states.check_transition(None, dep.status, dep.id)
            self._check_configs_exist(
                conn, config_id=dep.config_id, source_config_id=dep.source_config_id
            )
            seq = self._bump(conn, dep.server_id)
            conn.execute(
                sa.insert(d).values(
                    id=dep.id,
                    server_id=dep.server_id,
                    created_at=created,
                    updated_at=None,
                    version=1,
                    server_seq=seq,
                    **values,
                )
            )
            return stored

        return self._write("create deployment", op)

    def get_deployment(self, deployment_id: str) -> model.Deployment:
        d = self._tables.deployments

        def op(conn: sa.Connection) -> model.Deployment:
            row = conn.execute(sa.select(d).where(d.c.id == deployment_id)).first()
            if row is None:
                raise exceptions.DeploymentNotFound(deployment_id)
            return self._deployment_from_row(row)

        return self._read("get deployment", op)

    def update_deployment(
        self,
        deployment_id: str,
        *,
        expected_status: str | None = None,
        expected_generation: int | None = None,
        **changes: Any,
    ) -> model.Deployment:
        """Change some fields of a deployment; return it as stored.

        ``expected_status`` / ``expected_generation``, when given, must match
        the stored values or the call raises ConcurrentUpdate (fields
        ``status``, ``generation``: the current values).  A status change is
        checked against :data:`swflows.states.TRANSITIONS`.  A changed
        ``config_id``, or a status and reason that withdraw the action
        (:func:`swflows.states.withdrawn`), bumps the server's
        metadata_version.  ``updated_time``
        is set; ``id``, ``server_id`` and the times cannot be changed.
        """
        for field in changes:
            if field in _FIXED_FIELDS:
                raise exceptions.ValidationError(field, "cannot be changed")
            if field not in UPDATABLE_FIELDS:
                raise exceptions.ValidationError(field, "unknown deployment field")
        if "actions" in changes and not isinstance(changes["actions"], str):
            changes["actions"] = tuple(changes["actions"])
        d = self._tables.deployments

        # what changes the document: a new config, or a cancel withdrawing it
        # (an action that follows a cancel always brings a new config_id)
        listing = "config_id" in changes or states.withdrawn(
            changes.get("status"), changes.get("reason")
        )

        def op(conn: sa.Connection) -> model.Deployment:
            if listing:
                server_id = conn.scalar(
                    sa.select(d.c.server_id).where(d.c.id == deployment_id)
                )
                if server_id is None:
                    raise exceptions.DeploymentNotFound(deployment_id)
                # lock order everywhere: the server's row, then the deployment's
                self._lock_server(conn, server_id)
            row = conn.execute(
                sa.select(d).where(d.c.id == deployment_id).with_for_update()
            ).first()
            if row is None:
                raise exceptions.DeploymentNotFound(deployment_id)
            current = self._deployment_from_row(row)
            if (expected_status is not None and current.status != expected_status) or (
                expected_generation is not None
                and current.generation != expected_generation
            ):
                raise exceptions.ConcurrentUpdate(
                    f"deployment {deployment_id} is {current.status} at generation "
                    f"{current.generation}, not {expected_status or current.status} "
                    f"at generation {expected_generation}",
                    deployment_id=deployment_id,
                    status=current.status,
                    generation=current.generation,
                    expected_status=expected_status,
                    expected_generation=expected_generation,
                )
            if "status" in changes and changes["status"] != current.status:
                states.check_transition(
                    current.status, changes["status"], deployment_id
                )
            now = model.utcnow()
            updated = dataclasses.replace(current, **changes, updated_time=now)
            self._check_deployment(updated)
            self._check_configs_exist(
                conn,
                **{
                    field: changes[field]
                    for field in ("config_id", "source_config_id")
                    if field in changes and changes[field] != getattr(current, field)
                },
            )
            conn.execute(
                sa.update(d)
                .where(d.c.id == deployment_id)
                .values(
                    updated_at=now,
                    version=row.version + 1,
                    **self._deployment_values(updated),
                )
            )
            if updated.config_id != current.config_id or states.withdrawn(
                updated.status, updated.reason
            ) != states.withdrawn(current.status, current.reason):
                self._bump(conn, current.server_id)
            return updated

        return self._write("update deployment", op)

    def list_deployments(
        self,
        *,
        server_id: str | None = None,
        status: str | None = None,
        parent_id: str | None = None,
        limit: int | None = None,
    ) -> list[model.Deployment]:
        """Deployments matching every filter given, by creation time then id."""
        _check_limit(limit)
        d = self._tables.deployments
        query = sa.select(d)
        for column, value in (
            (d.c.server_id, server_id),
            (d.c.status, status),
            (d.c.parent_id, parent_id),
        ):
            if value is not None:
                query = query.where(column == value)
        query = query.order_by(d.c.created_at, d.c.id)
        if limit is not None:
            query = query.limit(limit)

        def op(conn: sa.Connection) -> list[model.Deployment]:
            return [self._deployment_from_row(row) for row in conn.execute(query)]

        return self._read("list deployments", op)

    def delete_deployment(
        self, deployment_id: str, *, missing_ok: bool = False
    ) -> None:
        """Delete a deployment and bump its server's metadata_version.

        Its configs stay (delete the derived one afterwards if it is done
        with).  DeploymentNotFound unless ``missing_ok``.
        """
        d = self._tables.deployments

        def op(conn: sa.Connection) -> None:
            server_id = conn.scalar(
                sa.select(d.c.server_id).where(d.c.id == deployment_id)
            )
            if server_id is not None:
                self._lock_server(conn, server_id)
                deleted = conn.execute(sa.delete(d).where(d.c.id == deployment_id))
                if deleted.rowcount:
                    self._bump(conn, server_id)
                    return
            if not missing_ok:
                raise exceptions.DeploymentNotFound(deployment_id)

        self._write("delete deployment", op)


class _Stale(Exception):
    """Internal: a published copy may be stale; publish again."""
