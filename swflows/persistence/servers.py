"""The store's servers: channels, metadata documents and their versions.

Every write that changes what a server sees (a deployment created or
deleted, its ``config_id`` changed, or its action cancelled, which
withdraws it: :func:`swflows.states.withdrawn`) locks the server's row
(``SELECT ... FOR UPDATE``; SQLite: the whole database, ``BEGIN IMMEDIATE``)
and bumps its ``metadata_version`` in the same transaction, so versions
count those writes exactly and :meth:`ServerRows.server_metadata` reads a
document and its version together.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import sqlalchemy as sa
import tenacity
from sqlalchemy.dialects import mysql as sa_mysql
from sqlalchemy.dialects import postgresql as sa_postgresql
from sqlalchemy.dialects import sqlite as sa_sqlite

from swflows import exceptions, model, projects, states
from swflows.persistence import tables as _tables
from swflows.persistence.configs import ConfigRows
from swflows.persistence.database import check_str
from swflows.persistence.owners import in_project

#: attempts of :meth:`ServerRows.publish` before ConcurrentUpdate
PUBLISH_ATTEMPTS: Final = 50
#: seconds within which a server seen again is not written again
#: (:meth:`ServerRows.saw_server`): ``last_seen`` is that precise
SEEN_EVERY: Final = 5


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
    #: the version whose document was last published (0: none yet); not
    #: part of what is compared: the document is the same either way
    published: int = dataclasses.field(default=0, compare=False)


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
    #: whose Nova listing shows it: a project's (read through a trust of
    #: that project), None: swflows' own compute login's
    compute_project: str | None = None
    #: when it last read its metadata through swflows or signalled (None:
    #: never, or only read its channel where swflows cannot see it)
    last_seen: _dt.datetime | None = None


class ServerRows(ConfigRows):
    """Servers, their channels and metadata documents, in the database."""

    def _lock_server(self, conn: sa.Connection, server_id: str) -> Any:
        """The server's row, created if missing, locked for this transaction."""
        s = self._tables.servers
        locked = self._statement(
            "server by id, locked",
            lambda: (
                sa.select(s)
                .where(s.c.server_id == sa.bindparam("locked_server"))
                .with_for_update()
            ),
        )
        by_id = {"locked_server": server_id}
        row = conn.execute(locked, by_id).first()
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
        return conn.execute(locked, by_id).one()

    def _bump(self, conn: sa.Connection, server_id: str) -> int:
        """Lock the server's row and bump its metadata_version; the new one.

        Where the database returns what an UPDATE wrote (PostgreSQL,
        SQLite), the bump is that one statement, which locks the row as
        it writes it; else, or when the row is missing, the row is locked
        (made if missing) and read first."""
        s = self._tables.servers
        params = {"bumped_server": server_id, "stamp": model.utcnow()}

        def bump() -> Any:
            return (
                sa.update(s)
                .where(s.c.server_id == sa.bindparam("bumped_server"))
                .values(
                    metadata_version=s.c.metadata_version + 1,
                    updated_at=sa.bindparam("stamp"),
                )
            )

        if conn.dialect.update_returning:
            returning = self._statement(
                "bump server, returning",
                lambda: bump().returning(s.c.metadata_version),
            )
            found = conn.execute(returning, params).first()
            if found is not None:
                return int(found.metadata_version)
        row = self._lock_server(conn, server_id)
        conn.execute(self._statement("bump server", bump), params)
        return int(row.metadata_version) + 1

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
            compute_project=row.compute_project,
            last_seen=row.last_seen_at,
        )

    def get_server(self, server_id: str) -> ServerRecord:
        """A server's row (ServerNotFound until it has had a deployment or channel)."""
        s = self._tables.servers
        query = self._statement(
            "server by id",
            lambda: sa.select(s).where(s.c.server_id == sa.bindparam("id")),
        )

        def op(conn: sa.Connection) -> ServerRecord:
            row = conn.execute(query, {"id": server_id}).first()
            if row is None:
                raise exceptions.ServerNotFound(server_id)
            return self._server_from_row(row)

        return self._read("get server", op)

    def list_servers(
        self, *, project: str | None = None, unowned: bool = False
    ) -> list[ServerRecord]:
        """Every server's row, by id (``project`` and ``unowned``: see
        :func:`swflows.persistence.owners.in_project`)."""
        s = self._tables.servers
        query = sa.select(s).order_by(s.c.server_id)
        if project is not None:
            mine = in_project(
                self._tables, projects.SERVER, s.c.server_id, project, unowned=unowned
            )
            query = query.where(mine)

        def op(conn: sa.Connection) -> list[ServerRecord]:
            return [self._server_from_row(row) for row in conn.execute(query)]

        return self._read("list servers", op)

    def deployment_counts(self) -> dict[str, int]:
        """How many deployments each server has (servers with none left out)."""
        d = self._tables.deployments
        query = sa.select(d.c.server_id, sa.func.count()).group_by(d.c.server_id)

        def op(conn: sa.Connection) -> dict[str, int]:
            return {row[0]: int(row[1]) for row in conn.execute(query)}

        return self._read("count deployments", op)

    def saw_server(self, server_id: str) -> None:
        """Note that the server showed it is alive now (it read its metadata
        through swflows, or it signalled); nothing for an unknown server.
        Written at most every :data:`SEEN_EVERY` seconds: a server polling
        its metadata through an embedder does not write at each poll."""
        s = self._tables.servers
        now = model.utcnow()
        stale = now - _dt.timedelta(seconds=SEEN_EVERY)
        seen = sa.update(s).where(
            s.c.server_id == server_id,
            sa.or_(s.c.last_seen_at.is_(None), s.c.last_seen_at <= stale),
        )

        def op(conn: sa.Connection) -> None:
            conn.execute(seen.values(last_seen_at=now))

        self._write("note server seen", op)

    def set_server_channel(
        self,
        server_id: str,
        config_transport: str | None,
        channel: Mapping[str, Any] | None,
        *,
        enrolled: bool | None = None,
        in_compute: bool | None = None,
        compute_project: str | None = None,
    ) -> ServerRecord:
        """Record how a server gets its metadata; the channel is encrypted.

        A changed transport or channel resets ``published_version`` to 0:
        nothing has been published through the new channel yet.
        ``enrolled`` sets (True) or clears (False) the enrollment time;
        ``in_compute`` records whether Nova knows the server, together
        with ``compute_project``, whose listing shows it (None: swflows'
        own compute login's); None keeps each as it is.
        """
        check_str("server_id", server_id)
        if config_transport is not None:
            check_str("config_transport", config_transport)
            if len(config_transport) > _tables.TRANSPORT_LENGTH:
                raise exceptions.ValidationError(
                    "config_transport",
                    f"must be at most {_tables.TRANSPORT_LENGTH} characters",
                )
        if compute_project is not None:
            check_str("compute_project", compute_project)
            if not in_compute:
                raise exceptions.ValidationError(
                    "compute_project", "is recorded with in_compute True"
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
                values["compute_project"] = compute_project
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

    def compute_servers(self, server_ids: Iterable[str]) -> dict[str, str | None]:
        """Which of ``server_ids`` Nova knows (``in_compute``), each with
        the project whose listing shows it (None: swflows' own), in one
        query."""
        wanted = sorted(set(server_ids))
        if not wanted:
            return {}
        s = self._tables.servers

        def op(conn: sa.Connection) -> dict[str, str | None]:
            rows = conn.execute(
                sa.select(s.c.server_id, s.c.compute_project).where(
                    s.c.server_id.in_(wanted), s.c.in_compute.is_(True)
                )
            )
            return {row.server_id: row.compute_project for row in rows}

        return self._read("read compute servers", op)

    def server_metadata(self, server_id: str) -> ServerMetadata:
        """The server's metadata document and its version, read in one query.

        A server the store has never seen has version 0 and no deployments.
        A cancelled action's derived config is left out
        (:func:`swflows.states.withdrawn`).
        """
        s, d, c = self._tables.servers, self._tables.deployments, self._tables.configs
        query = self._statement(
            "server metadata",
            lambda: (
                sa.select(
                    s.c.metadata_version,
                    s.c.published_version,
                    c.c.id,
                    c.c.name,
                    c.c.group,
                    sa.cast(c.c.body, sa.Text).label("body_text"),
                    c.c.created_at,
                    d.c.status,
                    d.c.reason,
                )
                .select_from(
                    s.outerjoin(d, d.c.server_id == s.c.server_id).outerjoin(
                        c, c.c.id == d.c.config_id
                    )
                )
                .where(s.c.server_id == sa.bindparam("id"))
                .order_by(d.c.server_seq)
            ),
        )

        def op(conn: sa.Connection) -> ServerMetadata:
            rows = conn.execute(query, {"id": server_id}).all()
            if not rows:
                return ServerMetadata(server_id, 0, [])
            configs = [
                self._config_from_text(row)
                for row in rows
                if row.id and not states.withdrawn(row.status, row.reason)
            ]
            # stable: equal names keep creation order (server_seq)
            configs.sort(key=lambda config: config.name)
            return ServerMetadata(
                server_id,
                int(rows[0].metadata_version),
                [config.to_dict(reveal=True) for config in configs],
                int(rows[0].published_version),
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


class _Stale(Exception):
    """Internal: a published copy may be stale; publish again."""
