"""The store's deployments: created, updated by checked transitions, deleted."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from typing import Any, Final

import sqlalchemy as sa

from swflows import exceptions, model, projects, states
from swflows.persistence import owners
from swflows.persistence import tables as _tables
from swflows.persistence.database import check_id, check_limit, check_str, naive_utc
from swflows.persistence.servers import ServerRows

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
#: how long a deleted deployment is remembered past its timeout at least:
#: past the signal URLs it handed out (valid for its timeout plus
#: ``tempurl_grace_period``, 600 s by default)
REMEMBER_DELETED: Final = 86400.0


class DeploymentRows(ServerRows):
    """Deployments in the database; each write bumps its server's version."""

    def _check_configs_exist(self, conn: sa.Connection, **refs: str | None) -> None:
        """Raise ConfigNotFound (with its ``field``) unless every config
        named in ``refs`` is stored: one SELECT for them all."""
        wanted = sorted(
            {config_id for config_id in refs.values() if config_id is not None}
        )
        if not wanted:
            return
        if len(wanted) > 2:
            raise ValueError(f"at most two configs are checked at once: {wanted}")
        c = self._tables.configs
        # two fixed parameters (one id is given twice): built and cached once,
        # where a list of any length is rendered again at every run
        exist = self._statement(
            "configs exist",
            lambda: sa.select(c.c.id).where(
                c.c.id.in_([sa.bindparam("first"), sa.bindparam("second")])
            ),
        )
        found = set(conn.scalars(exist, {"first": wanted[0], "second": wanted[-1]}))
        for field, config_id in refs.items():
            if config_id is not None and config_id not in found:
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
                check_id(field, value)
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
        check_str("signal_transport", dep.signal_transport)
        if dep.name is not None:
            check_str("name", dep.name)
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

    def _deployment_by_id(self) -> Any:
        """A deployment's row by its id (bound as ``id``), built once."""
        d = self._tables.deployments
        return self._statement(
            "deployment by id",
            lambda: sa.select(d).where(d.c.id == sa.bindparam("id")),
        )

    def create_deployment(
        self, dep: model.Deployment, *, keep_existing: bool = False
    ) -> model.Deployment:
        """Store a new deployment and bump its server's metadata_version.

        Its status must be one a deployment may start in; ``config_id`` and
        ``source_config_id`` must name stored configs (ConfigNotFound with
        ``field``).  The same id again with the same content returns the
        stored deployment, different content raises ``ValidationError("id")``,
        unless ``keep_existing``: the stored one is then returned as it is
        (its action, run again, finds what its first run stored and did).
        Only an id taken or a config missing costs reads (:meth:`_write_first`).
        """
        if not isinstance(dep, model.Deployment):
            raise exceptions.ValidationError("deployment", "must be a model.Deployment")
        check_id("id", dep.id)
        self._check_deployment(dep)
        created = naive_utc(dep.creation_time) or model.utcnow()
        stored = dataclasses.replace(dep, creation_time=created, updated_time=None)
        values = self._deployment_values(dep)
        by_id = self._deployment_by_id()
        insert = self._statement("insert deployment", self._tables.deployments.insert)

        def add(conn: sa.Connection) -> model.Deployment:
            seq = self._bump(conn, dep.server_id)
            conn.execute(
                insert,
                {
                    "id": dep.id,
                    "server_id": dep.server_id,
                    "created_at": created,
                    "updated_at": None,
                    "version": 1,
                    "server_seq": seq,
                    **values,
                },
            )
            return stored

        def op(conn: sa.Connection) -> model.Deployment:
            row = conn.execute(by_id, {"id": dep.id}).first()
            if row is not None:
                existing = self._deployment_from_row(row)
                if keep_existing:
                    return existing
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
            return add(conn)

        if dep.status in states.TRANSITIONS[None]:  # inserted at once
            return self._write_first("create deployment", add, op)
        return self._write("create deployment", op)

    def generations(self, deployment_ids: Iterable[str]) -> dict[str, int]:
        """The generation of each of ``deployment_ids`` that has a row, in
        one statement (those without one are left out)."""
        ids = sorted(set(deployment_ids))
        if not ids:
            return {}
        d = self._tables.deployments
        query = self._statement(
            "deployments' generations",
            lambda: sa.select(d.c.id, d.c.generation).where(
                d.c.id.in_(sa.bindparam("ids", expanding=True))
            ),
        )
        return self._read(
            "read deployments' generations",
            lambda conn: {
                row.id: int(row.generation) for row in conn.execute(query, {"ids": ids})
            },
        )

    def get_deployment(self, deployment_id: str) -> model.Deployment:
        query = self._deployment_by_id()

        def op(conn: sa.Connection) -> model.Deployment:
            row = conn.execute(query, {"id": deployment_id}).first()
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
        project: str | None = None,
        unowned: bool = False,
    ) -> list[model.Deployment]:
        """Deployments matching every filter given, by creation time then id
        (``project`` and ``unowned``: see :func:`owners.in_project`)."""
        check_limit(limit)
        d = self._tables.deployments
        query = sa.select(d)
        for column, value in (
            (d.c.server_id, server_id),
            (d.c.status, status),
            (d.c.parent_id, parent_id),
        ):
            if value is not None:
                query = query.where(column == value)
        if project is not None:
            query = query.where(
                owners.in_project(
                    self._tables, projects.DEPLOYMENT, d.c.id, project, unowned=unowned
                )
            )
        query = query.order_by(d.c.created_at, d.c.id)
        if limit is not None:
            query = query.limit(limit)

        def op(conn: sa.Connection) -> list[model.Deployment]:
            return [self._deployment_from_row(row) for row in conn.execute(query)]

        return self._read("list deployments", op)

    def delete_deployment(
        self,
        deployment_id: str,
        *,
        missing_ok: bool = False,
        keep_owner: bool = False,
        remember: float = 0.0,
    ) -> None:
        """Delete a deployment and bump its server's metadata_version.

        Its configs stay (delete the derived one afterwards if it is done
        with).  Its owner row goes with it, unless ``keep_owner`` (its trust
        is still needed: a revert removes the row before the signal store
        the trust reaches).  It is remembered as deleted for its timeout
        plus ``remember`` seconds, a day at least (see
        :meth:`deleted_generation`).
        DeploymentNotFound unless ``missing_ok``.
        """
        d = self._tables.deployments
        gone = self._tables.deleted

        def op(conn: sa.Connection) -> None:
            row = conn.execute(
                sa.select(d.c.server_id, d.c.generation, d.c.timeout).where(
                    d.c.id == deployment_id
                )
            ).first()
            if row is not None:
                self._lock_server(conn, row.server_id)
                deleted = conn.execute(sa.delete(d).where(d.c.id == deployment_id))
                if deleted.rowcount:
                    if not keep_owner:
                        self._forget(conn, "deployment", deployment_id)
                    self._bump(conn, row.server_id)
                    now = time.time()
                    # a caller-given id may be deleted again after a redeploy
                    conn.execute(
                        sa.delete(gone).where(gone.c.deployment_id == deployment_id)
                    )
                    conn.execute(
                        sa.insert(gone).values(
                            deployment_id=deployment_id,
                            generation=row.generation,
                            deleted_at=now,
                            forget_at=now
                            + (row.timeout or 0)
                            + max(remember, REMEMBER_DELETED),
                        )
                    )
                    return
            if not missing_ok:
                raise exceptions.DeploymentNotFound(deployment_id)

        self._write("delete deployment", op)

    def deleted_generation(self, deployment_id: str) -> int | None:
        """The generation a deployment was deleted at, while it is
        remembered (None: never deleted here, or forgotten)."""
        gone = self._tables.deleted
        return self._read(
            "read a deleted deployment",
            lambda conn: conn.scalar(
                sa.select(gone.c.generation).where(
                    gone.c.deployment_id == deployment_id
                )
            ),
        )

    def forget_deleted(self, now: float | None = None) -> int:
        """Forget the deleted deployments whose time has passed; how many."""
        gone = self._tables.deleted
        cutoff = time.time() if now is None else now
        return self._write(
            "forget deleted deployments",
            lambda conn: (
                conn.execute(sa.delete(gone).where(gone.c.forget_at < cutoff)).rowcount
            ),
        )
