"""The store's software configs: immutable once made, removed when unused."""

from __future__ import annotations

import collections
import dataclasses
import json
import threading
import time
from typing import Any

import sqlalchemy as sa

from swflows import exceptions, model, projects
from swflows.persistence import owners
from swflows.persistence.database import (
    Database,
    check_id,
    check_limit,
    is_secret_shaped,
    naive_utc,
)

#: configs read from their stored text kept parsed, per store (a server's
#: document reads every config of its deployments at each publish)
PARSED_KEPT = 4096
#: configs last read by id, per store, for
#: ``get_config(max_age=...)`` (a burst of deploys of one config)
RECENT_KEPT = 256


class ConfigRows(Database):
    """Software configs in the database."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._parsed: collections.OrderedDict[tuple[Any, ...], model.Config] = (
            collections.OrderedDict()
        )
        self._parsed_lock = threading.Lock()
        #: config id -> (``time.monotonic()`` when read or stored, config)
        self._recent: collections.OrderedDict[str, tuple[float, model.Config]] = (
            collections.OrderedDict()
        )

    def _config_by_id(self) -> Any:
        """A config's row by its id (bound as ``id``), built once."""
        t = self._tables.configs
        return self._statement(
            "config by id", lambda: sa.select(t).where(t.c.id == sa.bindparam("id"))
        )

    def _config_from_text(self, row: Any) -> model.Config:
        """:meth:`_config_from_row` of a row whose body was read as its
        stored text (``body_text``): a config is immutable, so the same
        id, text, name, group and time give the same config, parsed once."""
        key = (row.id, row.body_text, row.name, row.group, row.created_at)
        with self._parsed_lock:
            found = self._parsed.get(key)
            if found is not None:
                self._parsed.move_to_end(key)
                return found
        body = row.body_text
        parsed = self._config_from_row(
            _Row(
                row.id,
                row.name,
                row.group,
                json.loads(body) if isinstance(body, str) else body,
                row.created_at,
            )
        )
        with self._parsed_lock:
            _keep(self._parsed, key, parsed, PARSED_KEPT)
        return parsed

    def _config_body(self, config: model.Config) -> dict[str, Any]:
        inputs = []
        for spec in config.inputs:
            item = spec.to_dict(reveal=True)
            for key in ("value", "default"):
                value = item.get(key)
                if value is not None and (
                    spec.hidden
                    or spec.name in self._secret_names
                    or is_secret_shaped(value)
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
        content = config.to_dict(reveal=True)
        del content["creation_time"]
        return content

    def create_config(
        self,
        config: model.Config,
        *,
        derived: bool = False,
        keep_existing: bool = False,
    ) -> model.Config:
        """Store an immutable config; there is no update.

        Creating the same id again with the same content (and ``derived``
        flag) returns the stored config; different content raises
        ``ValidationError("id", ...)``, unless ``keep_existing``: then the
        stored config is returned as it is (a derived config's id names its
        deployment's action, and a run of that action again keeps the one
        its first run stored, whose signal URLs may already be in use).
        ``derived`` marks a config made for one deployment action (listed
        only with ``include_derived``).
        """
        if not isinstance(config, model.Config):
            raise exceptions.ValidationError("config", "must be a model.Config")
        check_id("id", config.id)
        created = naive_utc(config.creation_time) or model.utcnow()
        stored = dataclasses.replace(config, creation_time=created)
        body = self._config_body(config)
        t = self._tables.configs

        by_id = self._config_by_id()
        insert = self._statement("insert config", t.insert)

        def add(conn: sa.Connection) -> model.Config:
            conn.execute(
                insert,
                {
                    "id": config.id,
                    "name": config.name,
                    "group": config.group,
                    "body": body,
                    "derived": derived,
                    "created_at": created,
                },
            )
            return stored

        def op(conn: sa.Connection) -> model.Config:
            row = conn.execute(by_id, {"id": config.id}).first()
            if row is not None:
                existing = self._config_from_row(row)
                if keep_existing and row.derived == derived:
                    return existing
                if row.derived != derived or self._config_content(
                    existing
                ) != self._config_content(config):
                    raise exceptions.ValidationError(
                        "id",
                        f"config {config.id} already exists with different content",
                    )
                return existing
            return add(conn)

        # inserted at once: an id already taken is read the careful way
        return self._write_first("create config", add, op)

    def get_config(self, config_id: str, *, max_age: float = 0.0) -> model.Config:
        """The config ``config_id``; ConfigNotFound if there is none.

        ``max_age``: a config this store read by id less than that many
        seconds ago is returned without reading it again.  A
        config never changes; it can only be deleted, and whoever takes a
        kept one must write it into a row that is checked against the
        stored configs (a deployment's, :meth:`create_deployment`), which
        finds it gone."""
        if max_age > 0:
            with self._parsed_lock:
                kept = self._recent.get(config_id)
            if kept is not None and time.monotonic() - kept[0] < max_age:
                return kept[1]
        query = self._config_by_id()

        def op(conn: sa.Connection) -> model.Config:
            row = conn.execute(query, {"id": config_id}).first()
            if row is None:
                raise exceptions.ConfigNotFound(config_id)
            return self._config_from_row(row)

        return self._recently(self._read("get config", op))

    def _recently(self, config: model.Config) -> model.Config:
        """Keep ``config`` as read now (:meth:`get_config`)."""
        with self._parsed_lock:
            _keep(self._recent, config.id, (time.monotonic(), config), RECENT_KEPT)
        return config

    def list_configs(
        self,
        *,
        limit: int | None = None,
        marker: str | None = None,
        include_derived: bool = False,
        project: str | None = None,
        unowned: bool = False,
    ) -> list[model.Config]:
        """Configs ordered by creation time, then id.

        ``marker`` is the last id of the previous page (ConfigNotFound if it
        does not exist); derived configs are left out unless asked for.
        With ``project``, only that project's (and, with ``unowned``, those
        with no recorded owner: see :func:`owners.in_project`).
        """
        check_limit(limit)
        t = self._tables.configs

        def op(conn: sa.Connection) -> list[model.Config]:
            query = sa.select(t)
            if not include_derived:
                query = query.where(t.c.derived.is_(sa.false()))
            if project is not None:
                query = query.where(
                    owners.in_project(
                        self._tables, projects.CONFIG, t.c.id, project, unowned=unowned
                    )
                )
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
            self._forget(conn, "config", config_id)

        self._write("delete config", op)
        with self._parsed_lock:
            self._recent.pop(config_id, None)


def _keep(
    kept: collections.OrderedDict[Any, Any], key: Any, value: Any, most: int
) -> None:
    """Put ``value`` in ``kept`` as its newest entry, the oldest dropped
    past ``most`` (the caller holds the lock guarding ``kept``)."""
    kept[key] = value
    kept.move_to_end(key)
    while len(kept) > most:
        kept.popitem(last=False)


@dataclasses.dataclass(frozen=True)
class _Row:
    """A config row's columns :meth:`ConfigRows._config_from_row` reads."""

    id: str
    name: str
    group: str
    body: Any
    created_at: Any
