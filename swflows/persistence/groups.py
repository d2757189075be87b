"""The groups table: deployment groups and the progress of their operations.

A row holds what the user gave (name, config, members as member name ->
server id, shared and per-member input values, signal transport, timeout,
rollout policy), the id of each member's deployment, and ``operation``:
the last operation (deploy, redeploy, trigger, delete) with each member's
progress in it (see :mod:`swflows.api.groups`).  ``status`` is the group's:
IN_PROGRESS while an operation runs, then COMPLETE or FAILED with
``status_reason`` naming what was exceeded.

Every write is a compare-and-set on ``version``, so two runners never both
record a member's start or end.  An operation is driven by one runner at a
time, the row's ``owner``, under a lease it renews, as a flow is
(:mod:`swflows.persistence.flow_registry`).  Secret-named input values are
encrypted as a deployment's are.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import sqlalchemy as sa

from swflows import exceptions, projects, states
from swflows.persistence import flow_registry, owners

if TYPE_CHECKING:
    from swflows.persistence.store import Store

#: the operations of a group (an operation record's ``kind``)
DEPLOY: Final = "deploy"
REDEPLOY: Final = "redeploy"
TRIGGER: Final = "trigger"
DELETE: Final = "delete"


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC).replace(tzinfo=None)


class MemberState(NamedTuple):
    """What the store says of a running member's deployment."""

    #: its deployment's status ("" when it has none)
    status: str
    #: its deployment's generation (0 when it has none)
    generation: int
    #: whether a RUNNING or PARKED flow works on it
    busy: bool
    #: the note of a flow of its set aside as BROKEN, if one is
    broken: str | None = None


@dataclasses.dataclass(frozen=True)
class GroupRecord:
    """One deployment group as stored."""

    id: str
    name: str
    config_id: str
    servers: dict[str, str]
    input_values: dict[str, Any]
    member_values: dict[str, dict[str, Any]]
    signal_transport: str
    timeout: int | None
    policy: dict[str, Any]
    deployments: dict[str, str]
    operation: dict[str, Any]
    action: str
    status: str
    status_reason: str
    #: the actions of the members' deployments (None: the default ones)
    actions: list[str] | None = None
    owner: str | None = None
    lease_until: float | None = None
    version: int = 0
    created_at: _dt.datetime | None = None
    updated_at: _dt.datetime | None = None

    def member_inputs(self, member: str) -> dict[str, Any]:
        """The input values of ``member``: shared ones, overridden by its own."""
        return {**self.input_values, **self.member_values.get(member, {})}


#: fields :meth:`GroupStore.update` may change
UPDATABLE = frozenset(
    {
        "config_id",
        "servers",
        "input_values",
        "member_values",
        "signal_transport",
        "timeout",
        "actions",
        "policy",
        "deployments",
        "operation",
        "action",
        "status",
        "status_reason",
    }
)


class GroupStore:
    """Reads and writes rows of the groups table of one :class:`Store`."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._table = store.tables.groups

    def _values(self, record: GroupRecord) -> dict[str, Any]:
        seal = self._store._seal_values
        return {
            "config_id": record.config_id,
            "servers": dict(record.servers),
            "input_values": seal(record.input_values),
            "member_values": {
                name: seal(values) for name, values in record.member_values.items()
            },
            "signal_transport": record.signal_transport,
            "timeout": record.timeout,
            "actions": None if record.actions is None else list(record.actions),
            "policy": dict(record.policy),
            "deployments": dict(record.deployments),
            "operation": {
                **record.operation,
                "input_values": seal(record.operation.get("input_values") or {}),
            },
            "action": record.action,
            "status": record.status,
            "status_reason": record.status_reason,
        }

    def _from_row(self, row: Any) -> GroupRecord:
        open_values = self._store._open_values
        return GroupRecord(
            id=row.id,
            name=row.name,
            config_id=row.config_id,
            servers=dict(row.servers or {}),
            input_values=open_values(row.input_values or {}),
            member_values={
                name: open_values(values)
                for name, values in (row.member_values or {}).items()
            },
            signal_transport=row.signal_transport,
            timeout=row.timeout,
            actions=None if row.actions is None else list(row.actions),
            policy=dict(row.policy or {}),
            deployments=dict(row.deployments or {}),
            operation=self._open_operation(row.operation or {}),
            action=row.action,
            status=row.status,
            status_reason=row.status_reason,
            owner=row.owner,
            lease_until=row.lease_until,
            version=row.version,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )

    def _open_operation(self, operation: Mapping[str, Any]) -> dict[str, Any]:
        opened = dict(operation)
        if opened.get("input_values"):
            opened["input_values"] = self._store._open_values(opened["input_values"])
        return opened

    # -- rows -------------------------------------------------------------
    def create(self, record: GroupRecord) -> GroupRecord:
        """Store a new group; a name already taken is refused."""
        t = self._table
        now = _now()

        def op(conn: sa.Connection) -> GroupRecord:
            taken = conn.scalar(sa.select(t.c.id).where(t.c.name == record.name))
            if taken is not None:
                raise exceptions.ValidationError(
                    "name", f"a group named {record.name!r} exists ({taken})"
                )
            conn.execute(
                t.insert().values(
                    id=record.id,
                    name=record.name,
                    owner=record.owner,
                    lease_until=record.lease_until,
                    version=1,
                    created_at=now,
                    updated_at=None,
                    **self._values(record),
                )
            )
            return dataclasses.replace(record, version=1, created_at=now)

        return self._store._write("create group", op)

    def get(self, ident: str) -> GroupRecord:
        """The group with id or name ``ident`` (GroupNotFound if none)."""
        t = self._table

        def op(conn: sa.Connection) -> GroupRecord:
            row = conn.execute(
                sa.select(t).where(sa.or_(t.c.id == ident, t.c.name == ident))
            ).first()
            if row is None:
                raise exceptions.GroupNotFound(ident)
            return self._from_row(row)

        return self._store._read("get group", op)

    def find(
        self,
        *,
        status: str | None = None,
        project: str | None = None,
        unowned: bool = False,
    ) -> list[GroupRecord]:
        """Every group (or those of ``status``; ``project`` and ``unowned``:
        see :func:`owners.in_project`), by name."""
        t = self._table
        query = sa.select(t).order_by(t.c.name)
        if status is not None:
            query = query.where(t.c.status == status)
        if project is not None:
            query = query.where(
                owners.in_project(
                    self._store.tables, projects.GROUP, t.c.id, project, unowned=unowned
                )
            )
        return self._store._read(
            "list groups",
            lambda conn: [self._from_row(row) for row in conn.execute(query)],
        )

    def update(self, record: GroupRecord, **changes: Any) -> GroupRecord:
        """Write ``changes`` if the row is still at ``record.version``.

        Raises ConcurrentUpdate when another writer changed it since (read
        it again and decide again), GroupNotFound when it is gone.
        """
        unknown = sorted(set(changes) - UPDATABLE)
        if unknown:
            raise exceptions.ValidationError(unknown[0], "unknown or fixed group field")
        if "status" in changes and changes["status"] not in states.STATUSES:
            raise exceptions.ValidationError(
                "status", f"unknown status {changes['status']!r}"
            )
        updated = dataclasses.replace(
            record, **changes, version=record.version + 1, updated_at=_now()
        )
        t = self._table

        def op(conn: sa.Connection) -> GroupRecord:
            result = conn.execute(
                t.update()
                .where(t.c.id == record.id, t.c.version == record.version)
                .values(
                    version=updated.version,
                    updated_at=updated.updated_at,
                    **self._values(updated),
                )
            )
            if not result.rowcount:
                if conn.scalar(sa.select(t.c.id).where(t.c.id == record.id)) is None:
                    raise exceptions.GroupNotFound(record.id)
                raise exceptions.ConcurrentUpdate(
                    f"group {record.name} changed meanwhile; read it again",
                    group_id=record.id,
                )
            return updated

        return self._store._write("update group", op)

    def delete(self, group_id: str, *, version: int | None = None) -> bool:
        """Remove the group and its owner row; whether it was there.

        With ``version``, only if the row is still at it (ConcurrentUpdate
        otherwise): a finished delete operation removes the group in the
        one write that ends it, so no reader sees it ended and still there.
        """
        t = self._table

        def op(conn: sa.Connection) -> bool:
            query = t.delete().where(t.c.id == group_id)
            if version is not None:
                query = query.where(t.c.version == version)
            if conn.execute(query).rowcount:
                self._store._forget(conn, projects.GROUP, group_id)
                return True
            if version is not None and conn.scalar(
                sa.select(t.c.id).where(t.c.id == group_id)
            ):
                raise exceptions.ConcurrentUpdate(
                    f"group {group_id} changed meanwhile; read it again",
                    group_id=group_id,
                )
            return False

        return self._store._write("delete group", op)

    # -- driving ----------------------------------------------------------
    def claim(
        self,
        group_id: str,
        owner: str,
        *,
        lease_until: float,
        now: float,
        dead_owner: str | None = None,
    ) -> bool:
        """Take an IN_PROGRESS group's operation for ``owner``: free when
        nobody holds it, its lease ran out, or its owner is ``dead_owner``
        (a runner of this host whose process is gone); renews one's own."""
        t = self._table
        free = sa.or_(t.c.owner.is_(None), t.c.lease_until <= now, t.c.owner == owner)
        if dead_owner is not None:
            free = sa.or_(free, t.c.owner == dead_owner)
        query = (
            t.update()
            .where(t.c.id == group_id, t.c.status == states.IN_PROGRESS, free)
            .values(owner=owner, lease_until=lease_until)
        )
        return self._store._write(
            "claim group", lambda conn: bool(conn.execute(query).rowcount)
        )

    def release(self, group_id: str, owner: str) -> None:
        t = self._table
        self._store._write(
            "release group",
            lambda conn: conn.execute(
                t.update()
                .where(t.c.id == group_id, t.c.owner == owner)
                .values(owner=None, lease_until=None)
            ),
        )

    def in_progress(self) -> list[tuple[str, str | None, float | None]]:
        """(id, owner, lease_until) of every group whose operation runs."""
        t = self._table
        query = sa.select(t.c.id, t.c.owner, t.c.lease_until).where(
            t.c.status == states.IN_PROGRESS
        )
        return self._store._read(
            "find running groups",
            lambda conn: [
                (row.id, row.owner, row.lease_until) for row in conn.execute(query)
            ],
        )

    def deployment_states(
        self, deployment_ids: Mapping[str, str]
    ) -> dict[str, MemberState]:
        """For member -> deployment id: member -> its :class:`MemberState`,
        in two queries; members with neither a deployment nor a flow are
        left out."""
        ids = sorted(set(deployment_ids.values()))
        if not ids:
            return {}
        d = self._store.tables.deployments
        f = self._store.tables.flows

        def op(conn: sa.Connection) -> dict[str, MemberState]:
            found: dict[str, tuple[str, int]] = {}
            busy: set[str] = set()
            broken: dict[str, str] = {}
            for chunk in range(0, len(ids), 500):
                part = ids[chunk : chunk + 500]
                for row in conn.execute(
                    sa.select(d.c.id, d.c.status, d.c.generation).where(
                        d.c.id.in_(part)
                    )
                ):
                    found[row.id] = (row.status, row.generation)
                for row in conn.execute(
                    sa.select(f.c.deployment_id, f.c.state, f.c.note).where(
                        f.c.deployment_id.in_(part)
                    )
                ):
                    if row.state == flow_registry.BROKEN:
                        broken[row.deployment_id] = str(row.note or "")
                    else:
                        busy.add(row.deployment_id)
            return {
                member: MemberState(
                    *found.get(dep, ("", 0)), dep in busy, broken.get(dep)
                )
                for member, dep in deployment_ids.items()
                if dep in found or dep in busy or dep in broken
            }

        return self._store._read("read members", op)


__all__ = ["UPDATABLE", "GroupRecord", "GroupStore", "MemberState"]
