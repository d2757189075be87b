"""The store's owners: the project and user that made each object, and
each server's deployment policy (see :mod:`swflows.projects`)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from swflows import model, projects
from swflows.persistence import tables as _tables
from swflows.persistence.database import Database


def in_project(
    tables: _tables.Tables,
    kind: str,
    object_id: sa.ColumnElement[Any],
    project: str,
    *,
    unowned: bool,
) -> sa.ColumnElement[bool]:
    """A clause keeping the rows whose object (its id in ``object_id``)
    belongs to ``project``; with ``unowned``, the rows with no recorded
    owner too (``project`` is the default one).  Filtering in the query,
    not after it, keeps a limited listing's pages full."""
    o = tables.owners
    owner = (
        sa.select(o.c.project_id)
        .where(o.c.kind == kind, o.c.object_id == object_id)
        .scalar_subquery()
    )
    if unowned:
        return sa.or_(owner == project, owner.is_(None))
    return owner == project


class OwnerRows(Database):
    """Owners of configs, deployments, servers and groups."""

    def set_owner(self, kind: str, object_id: str, owner: projects.Owner) -> None:
        """Record ``owner`` for the object unless it has one already (the
        first maker stays its owner)."""
        o = self._tables.owners

        def op(conn: sa.Connection) -> None:
            found = conn.scalar(
                sa.select(o.c.project_id).where(
                    o.c.kind == kind, o.c.object_id == object_id
                )
            )
            if found is None:
                conn.execute(
                    sa.insert(o).values(
                        kind=kind,
                        object_id=object_id,
                        project_id=owner.project_id,
                        user_id=owner.user_id,
                        created_at=model.utcnow(),
                    )
                )

        self._write("set owner", op)

    def get_owner(self, kind: str, object_id: str) -> projects.Owner | None:
        """The object's recorded owner; None when none was recorded."""
        o = self._tables.owners

        def op(conn: sa.Connection) -> projects.Owner | None:
            row = conn.execute(
                sa.select(o.c.project_id, o.c.user_id).where(
                    o.c.kind == kind, o.c.object_id == object_id
                )
            ).first()
            return None if row is None else projects.Owner(row.project_id, row.user_id)

        return self._read("get owner", op)

    def owners(self, kind: str, object_ids: Iterable[str]) -> dict[str, str]:
        """Object id -> project id, for those of ``object_ids`` with an owner."""
        o = self._tables.owners
        found = self._column_of("list owners", kind, object_ids, o.c.project_id)
        return {object_id: str(project) for object_id, project in found.items()}

    def _column_of(
        self,
        what: str,
        kind: str,
        object_ids: Iterable[str],
        column: sa.Column[Any],
    ) -> dict[str, Any]:
        """Object id -> ``column``, for those of ``object_ids`` whose row
        has a value there (read 500 ids at a time)."""
        wanted = list(dict.fromkeys(object_ids))
        o = self._tables.owners

        def op(conn: sa.Connection) -> dict[str, Any]:
            found: dict[str, Any] = {}
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                for row in conn.execute(
                    sa.select(o.c.object_id, column).where(
                        o.c.kind == kind,
                        o.c.object_id.in_(chunk),
                        column.is_not(None),
                    )
                ):
                    found[row[0]] = row[1]
            return found

        return self._read(what, op) if wanted else {}

    def set_trust(self, kind: str, object_id: str, trust_id: str | None) -> bool:
        """Record (or with None, clear) the Keystone trust the object's
        deferred work acts through, sealed; False when the object has no
        owner row to keep it with."""
        if trust_id is None:
            values: dict[str, Any] = {"trust": None, "trust_ref": None}
        else:
            values = {
                "trust": self._seal(trust_id),
                "trust_ref": self.trust_ref(trust_id),
            }
        return self._update_owner("set trust", kind, object_id, values)

    def trust_ref(self, trust_id: str) -> str:
        """The reference rows acting through ``trust_id`` share: a digest
        keyed by the store's secret (the id itself is never written)."""
        return hmac.new(
            self.derivation_key(), b"trust\0" + trust_id.encode(), hashlib.sha256
        ).hexdigest()

    def let_go_if_shared(self, kind: str, object_id: str) -> bool:
        """Clear the object's trust if another row still acts through it
        (the trust must then outlive this object): whether it did.  False
        when this row is the last with its trust (or has none): its caller
        deletes the trust, then clears the row.  The rows sharing the trust
        are locked while deciding, so two objects letting go of one trust
        at once cannot each leave it to the other."""
        o = self._tables.owners

        def op(conn: sa.Connection) -> bool:
            ref = conn.scalar(
                sa.select(o.c.trust_ref).where(
                    o.c.kind == kind, o.c.object_id == object_id
                )
            )
            if ref is None:
                return False
            sharing = conn.execute(
                sa.select(o.c.kind, o.c.object_id)
                .where(o.c.trust_ref == ref, o.c.trust.is_not(None))
                .with_for_update()
            ).all()
            if not any((k, i) != (kind, object_id) for k, i in sharing):
                return False
            conn.execute(
                sa.update(o)
                .where(o.c.kind == kind, o.c.object_id == object_id)
                .values(trust=None, trust_ref=None)
            )
            return True

        return self._write("let go of a shared trust", op)

    def _update_owner(
        self, what: str, kind: str, object_id: str, values: dict[str, Any]
    ) -> bool:
        """Set ``values`` on the object's owner row; False when it has none."""
        o = self._tables.owners

        def op(conn: sa.Connection) -> bool:
            done = conn.execute(
                sa.update(o)
                .where(o.c.kind == kind, o.c.object_id == object_id)
                .values(values)
            )
            return bool(done.rowcount)

        return self._write(what, op)

    def get_trust(self, kind: str, object_id: str) -> str | None:
        """The object's trust id; None when it has none."""
        return self.trusts(kind, [object_id]).get(object_id)

    def trusts(self, kind: str, object_ids: Iterable[str]) -> dict[str, str]:
        """Object id -> trust id, for those of ``object_ids`` with a trust."""
        o = self._tables.owners
        found = self._column_of("list trusts", kind, object_ids, o.c.trust)
        return {
            object_id: str(self._open(sealed)) for object_id, sealed in found.items()
        }

    def project_trusts(
        self,
        project_ids: Iterable[str],
        kinds: Iterable[str],
        *,
        skip: str | None = None,
    ) -> dict[str, str]:
        """Project id -> a trust recorded for an object of that project
        (of one of ``kinds``), for those of ``project_ids`` with one; a
        trust whose id starts with ``skip`` (a reference, not a trust) is
        passed over.  The newest object's trust is chosen."""
        wanted = sorted(set(project_ids))
        kinds = sorted(set(kinds))
        o = self._tables.owners

        def op(conn: sa.Connection) -> dict[str, str]:
            found: dict[str, str] = {}
            for start in range(0, len(wanted), 500):
                rows = conn.execute(
                    sa.select(o.c.project_id, o.c.trust)
                    .where(
                        o.c.kind.in_(kinds),
                        o.c.project_id.in_(wanted[start : start + 500]),
                        o.c.trust.is_not(None),
                    )
                    .order_by(o.c.created_at.desc(), o.c.object_id)
                )
                for row in rows:
                    if row.project_id in found:
                        continue
                    trust = str(self._open(row.trust))
                    if skip is None or not trust.startswith(skip):
                        found[row.project_id] = trust
            return found

        return self._read("list project trusts", op) if wanted and kinds else {}

    def trusting_projects(self, kinds: Iterable[str]) -> list[str]:
        """The distinct project ids of the objects (of one of ``kinds``)
        that hold a trust (or a reference to one), sorted."""
        kinds = sorted(set(kinds))
        o = self._tables.owners
        query = (
            sa.select(o.c.project_id)
            .where(o.c.kind.in_(kinds), o.c.trust.is_not(None))
            .distinct()
            .order_by(o.c.project_id)
        )
        return self._ids("list trusting projects", query) if kinds else []

    def rename_owner(self, kind: str, object_id: str, new_id: str) -> bool:
        """Record the object's owner (and trust) under ``new_id``; False
        when it has none."""
        return self._update_owner(
            "rename owner", kind, object_id, {"object_id": new_id}
        )

    def owned_ids(self, kind: str) -> list[str]:
        """The ids of every object of ``kind`` with an owner row."""
        o = self._tables.owners
        return self._ids(
            "list owners", sa.select(o.c.object_id).where(o.c.kind == kind)
        )

    def _ids(self, what: str, query: sa.Select[Any]) -> list[str]:
        """The one column ``query`` selects, as strings."""

        def op(conn: sa.Connection) -> list[str]:
            return [str(i) for i in conn.execute(query).scalars()]

        return self._read(what, op)

    def ownerless_deployments(self) -> list[str]:
        """Deployment owner rows nothing needs: no deployment row and no
        flow of that deployment (a revert removed the row, and the runner
        stopped before forgetting its owner and trust)."""
        o, d, f = self._tables.owners, self._tables.deployments, self._tables.flows
        query = sa.select(o.c.object_id).where(
            o.c.kind == projects.DEPLOYMENT,
            ~sa.exists().where(d.c.id == o.c.object_id),
            ~sa.exists().where(f.c.deployment_id == o.c.object_id),
        )
        return self._ids("list ownerless deployments", query)

    def forget_owner(self, kind: str, object_id: str) -> None:
        """Remove the object's owner (and a server's policy) with it."""
        o = self._tables.owners

        def op(conn: sa.Connection) -> None:
            conn.execute(
                sa.delete(o).where(o.c.kind == kind, o.c.object_id == object_id)
            )

        self._write("forget owner", op)

    def get_deploy_policy(self, server_id: str) -> dict[str, Any]:
        """The server's deployment policy and its last change: ``policy``
        (:meth:`swflows.projects.DeployPolicy.to_dict`), ``changed_by``,
        ``changed_at`` (None when never changed)."""
        o = self._tables.owners

        def op(conn: sa.Connection) -> dict[str, Any]:
            row = conn.execute(
                sa.select(o).where(
                    o.c.kind == projects.SERVER, o.c.object_id == server_id
                )
            ).first()
            policy = projects.DeployPolicy.from_dict(
                row.deploy_policy if row is not None else None
            )
            return {
                "policy": policy.to_dict(),
                "changed_by": row.policy_changed_by if row is not None else None,
                "changed_at": row.policy_changed_at if row is not None else None,
            }

        return self._read("get deploy policy", op)

    def set_deploy_policy(
        self,
        server_id: str,
        policy: projects.DeployPolicy,
        owner: projects.Owner,
        changed_by: str,
    ) -> None:
        """Set the server's deployment policy, recording who changed it and
        when; a server without an owner row gets ``owner``."""
        o = self._tables.owners
        now = model.utcnow()

        def op(conn: sa.Connection) -> None:
            where = (o.c.kind == projects.SERVER) & (o.c.object_id == server_id)
            values = {
                "deploy_policy": policy.to_dict(),
                "policy_changed_by": changed_by,
                "policy_changed_at": now,
            }
            if conn.scalar(sa.select(o.c.project_id).where(where)) is None:
                conn.execute(
                    sa.insert(o).values(
                        kind=projects.SERVER,
                        object_id=server_id,
                        project_id=owner.project_id,
                        user_id=owner.user_id,
                        created_at=now,
                        **values,
                    )
                )
            else:
                conn.execute(sa.update(o).where(where).values(**values))

        self._write("set deploy policy", op)
