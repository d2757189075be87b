"""The flows table: who drives each unfinished flow, and what parked ones await.

A row is written before a flow's logbook and removed after it, so every
unfinished flow has one.  Its ``state`` is one of:

``RUNNING``
    an engine is, or was, driving it; ``owner`` holds a lease on it until
    ``lease_until`` and renews it while it drives.  A RUNNING row whose
    lease ran out belongs to a runner that died: another runner may take it
    over (:meth:`FlowRegistry.claim`) and resume the flow from its logbook.
``PARKED``
    it waits for a signal, a timeout or a cancel, and nobody drives it: no
    thread, no lease.  ``waiting`` says what it waits for.  The signal
    watcher claims it when it may go on.
``BROKEN``
    it cannot be resumed (its flow changed version, its logbook is gone);
    ``note`` says why.  Only an operator moves it on.

The ``note`` of a RUNNING or PARKED flow says it was asked to cancel
(``cancelled[: reason]``); only custom flows are.

Claims are compare-and-set updates, so two runners never drive one flow at
once.  With ``[jobboard] enabled`` the claim that counts is the conductor's on
its job (:mod:`swflows.engine.conductor`); the row then mirrors it (owner
and lease follow the claim) and keeps what a jobboard cannot: what a
parked flow awaits, cancels, set-aside flows, and how often a flow was
taken over (the poison count).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import socket
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import sqlalchemy as sa

from swflows import model
from swflows.persistence import direct

if TYPE_CHECKING:
    from swflows.persistence.store import Store

RUNNING: Final = "RUNNING"
PARKED: Final = "PARKED"
BROKEN: Final = "BROKEN"
STATES: Final = (RUNNING, PARKED, BROKEN)
#: the kind of a developer's own flow; its factory's dotted path is in its
#: logbook's meta, its ``deployment_id`` is the deployment it awaits now
#: ("" before its first wait)
CUSTOM: Final = "custom"
#: the kinds of flow that run a deployment's action; other flows that name
#: a deployment (flows a user composed) do not keep its action from ending
ACTION_FLOWS: Final = frozenset({"deploy", "redeploy", "undeploy", "trigger"})
#: how the ``note`` of an unfinished flow says it was asked to cancel
CANCEL_NOTE: Final = "cancelled"
#: how long the failure of a flow that reverted its deployment's creation
#: is kept in its logbook for a caller in another process, in seconds
#: (:func:`forget_kept_failures`)
KEPT_FAILURE_SECONDS: Final = 3600.0
#: the logbook meta key holding swflows' own description of a flow
META_KEY: Final = "swflows"


def new_owner(token: str) -> str:
    """A runner's owner name: ``host:pid:token``, unique per runner."""
    return f"{socket.gethostname()}:{os.getpid()}:{token}"


def owner_is_dead(owner: str | None) -> bool:
    """Whether ``owner`` is a runner of this host whose process is gone.

    Such a lease is not waited out: a runner restarted on the same host
    takes over its predecessor's flows at once.  Owners of other hosts are
    only known dead by their leases running out.
    """
    if not owner:
        return True
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC).replace(tzinfo=None)


@dataclasses.dataclass(frozen=True)
class FlowRow:
    """One unfinished flow, as the flows table holds it."""

    id: str
    kind: str
    deployment_id: str
    server_id: str
    state: str
    owner: str | None
    lease_until: float | None
    waiting: dict[str, Any] | None
    takeovers: int
    note: str | None
    created_at: _dt.datetime
    #: the deployment's status and generation, when read with them
    deployment_status: str | None = None
    deployment_generation: int | None = None

    def lease_expired(self, now: float) -> bool:
        return self.lease_until is None or self.lease_until <= now

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["created_at"] = model.isotime(self.created_at)
        out["lease_until"] = model.isotime(self.lease_until)
        return out


def picked_up(waiting: Mapping[str, Any], now: float) -> dict[str, Any]:
    """A parked flow's ``waiting`` once its server read its metadata
    (``picked_up_at``: the first time, kept)."""
    return {
        **waiting,
        "picked_up": True,
        "picked_up_at": waiting.get("picked_up_at") or now,
    }


def started(waiting: Mapping[str, Any], now: float) -> dict[str, Any]:
    """A parked flow's ``waiting`` once its agent said "started" (so it
    picked the action up too); ``started_at``: the first time, kept."""
    return {**picked_up(waiting, now), "started_at": waiting.get("started_at") or now}


class FlowRegistry:
    """Reads and claims rows of the flows table of one :class:`Store`."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._table = store.tables.flows
        self._parked = ParkedRows(store)

    # -- rows -------------------------------------------------------------
    def add(
        self,
        flow_id: str,
        *,
        kind: str,
        deployment_id: str,
        server_id: str,
        owner: str | None,
        lease_until: float,
    ) -> None:
        """Record a new flow, RUNNING and leased to ``owner`` (None: posted
        to a jobboard, for a conductor to claim by ``lease_until``)."""
        values = new_row(
            flow_id,
            kind=kind,
            deployment_id=deployment_id,
            server_id=server_id,
            owner=owner,
            lease_until=lease_until,
        )
        insert = self._store._statement("add flow", self._table.insert)
        self._store._write("add flow", lambda conn: conn.execute(insert, values))

    def remove(self, flow_id: str) -> bool:
        """Forget a finished flow; False when it was already gone."""
        query = self._table.delete().where(self._table.c.id == flow_id)
        return changed_one(self, "remove flow", query)

    def get(self, flow_id: str) -> FlowRow | None:
        query = self._store._statement(
            "flow by id",
            lambda: self._select().where(self._table.c.id == sa.bindparam("id")),
        )

        def op(conn: sa.Connection) -> FlowRow | None:
            row = conn.execute(query, {"id": flow_id}).first()
            return None if row is None else self._from_row(row)

        return self._store._read("get flow", op)

    def holder(self, flow_id: str) -> str | None:
        """Who holds ``flow_id`` now: its row's owner (None: nobody, or no row)."""
        table = self._table
        query = self._store._statement(
            "flow owner",
            lambda: sa.select(table.c.owner).where(table.c.id == sa.bindparam("id")),
        )

        def op(conn: sa.Connection) -> str | None:
            owner = conn.scalar(query, {"id": flow_id})
            return None if owner is None else str(owner)

        return self._store._read("read flow owner", op)

    def find(
        self,
        *,
        states: Sequence[str] | None = None,
        deployment_id: str | None = None,
        server_id: str | None = None,
    ) -> list[FlowRow]:
        """Unfinished flows, oldest first, with their deployment's status."""
        query = self._select()
        if states:
            query = query.where(self._table.c.state.in_(list(states)))
        if deployment_id is not None:
            query = query.where(self._table.c.deployment_id == deployment_id)
        if server_id is not None:
            query = query.where(self._table.c.server_id == server_id)
        query = query.order_by(self._table.c.created_at, self._table.c.id)

        def op(conn: sa.Connection) -> list[FlowRow]:
            return [self._from_row(row) for row in conn.execute(query)]

        return self._store._read("list flows", op)

    def of_deployments(self, deployment_ids: Iterable[str]) -> list[FlowRow]:
        """The unfinished flows of any of ``deployment_ids``, in one query
        (a chunk of ids per query past a few hundred)."""
        wanted = sorted(set(deployment_ids))
        column = self._table.c.deployment_id

        def op(conn: sa.Connection) -> list[FlowRow]:
            found = []
            for start in range(0, len(wanted), 500):
                query = self._select().where(column.in_(wanted[start : start + 500]))
                found += [self._from_row(row) for row in conn.execute(query)]
            return found

        return self._store._read("list flows", op) if wanted else []

    def parked(self, only: Collection[str] | None = None) -> list[FlowRow]:
        """Every parked flow (those of ``only``), oldest first (read-only)."""
        return self._parked.read(only)

    def any_for_deployment(self, deployment_id: str) -> bool:
        """Whether an unfinished flow works on ``deployment_id``."""

        def op(conn: sa.Connection) -> bool:
            query = (
                sa.select(self._table.c.id)
                .where(self._table.c.deployment_id == deployment_id)
                .limit(1)
            )
            return conn.execute(query).first() is not None

        return self._store._read("find flows", op)

    # -- claims -----------------------------------------------------------
    def claim(
        self,
        flow_id: str,
        owner: str,
        *,
        lease_until: float,
        now: float,
        from_states: Iterable[str] = (RUNNING, PARKED),
        dead_owner: str | None = None,
    ) -> bool:
        """Take the flow for ``owner``; False when someone else holds it.

        A PARKED flow is free; a RUNNING one only once its lease ran out, or
        when its owner is ``dead_owner`` (a runner of this host whose process
        is gone).  A takeover of a RUNNING flow is counted.
        """
        query = self._store._statement(
            "claim flow" if dead_owner is None else "claim a dead owner's flow",
            lambda: claim_statement(self._table, dead_owner is not None),
        )
        params = {
            "flow": flow_id,
            "from_states": list(from_states),
            "claimer": owner,
            "dead_owner": dead_owner,
            "now": now,
            "new_lease": lease_until,
            "updated": _now(),
        }
        return changed_one(self, "claim flow", query, params)

    def renew(
        self, owner: str, flow_ids: Iterable[str], lease_until: float
    ) -> set[str]:
        """Extend ``owner``'s leases; the ids it still holds."""
        ids = list(flow_ids)
        if not ids:
            return set()
        t = self._table

        def op(conn: sa.Connection) -> set[str]:
            conn.execute(
                t.update()
                .where(t.c.id.in_(ids), t.c.owner == owner, t.c.state == RUNNING)
                .values(lease_until=lease_until)
            )
            held = conn.execute(
                sa.select(t.c.id).where(
                    t.c.id.in_(ids), t.c.owner == owner, t.c.state == RUNNING
                )
            )
            return {row.id for row in held}

        return self._store._write("renew leases", op)

    def park(
        self,
        flow_id: str,
        owner: str,
        waiting: Mapping[str, Any],
        *,
        deployment_id: str | None = None,
        server_id: str | None = None,
    ) -> bool:
        """Hand a waiting flow over to the watcher; False if not ``owner``'s.

        A custom flow names the deployment (and server) it awaits now.
        Its count of takeovers starts again: a flow that reached a wait
        got somewhere, and the count is there to set aside one its runners
        die or fail on, not one that lived through many of their deaths.
        """
        query = self._store._statement("park flow", lambda: park_statement(self._table))
        params = park_params(flow_id, owner, waiting, _now())
        if deployment_id is not None:
            params["deployment"] = deployment_id
        if server_id is not None:
            params["server"] = server_id
        return changed_one(self, "park flow", query, params)

    def requeue(
        self,
        flow_id: str,
        *,
        lease_until: float,
        from_state: str = PARKED,
        expired_by: float | None = None,
    ) -> bool:
        """Make a flow RUNNING with no owner, for a conductor to claim from
        a jobboard job by ``lease_until``; False if it is not in
        ``from_state`` (or, with ``expired_by``, its lease has not run out
        by then): someone else requeued or holds it."""
        t = self._table
        where = [t.c.id == flow_id, t.c.state == from_state]
        if expired_by is not None:
            where.append(
                sa.or_(t.c.lease_until.is_(None), t.c.lease_until <= expired_by)
            )
        query = (
            t.update()
            .where(*where)
            .values(
                state=RUNNING, owner=None, lease_until=lease_until, updated_at=_now()
            )
        )
        return changed_one(self, "requeue flow", query)

    def release(self, flow_id: str, owner: str, *, failed: bool = False) -> bool:
        """Give up a RUNNING flow: any runner may resume it.

        ``failed``: its run stopped on an error rather than because the
        runner is stopping.  That counts as a takeover, so a flow failing
        on every run reaches the runner's limit of takeovers and is set
        aside as BROKEN, as one whose runners die on it is.
        """
        t = self._table
        query = (
            t.update()
            .where(t.c.id == flow_id, t.c.owner == owner, t.c.state == RUNNING)
            .values(
                owner=None,
                lease_until=None,
                takeovers=t.c.takeovers + 1 if failed else t.c.takeovers,
                updated_at=_now(),
            )
        )
        return changed_one(self, "release flow", query)

    def update_waiting(
        self, flow_id: str, waiting: Mapping[str, Any], *, expected: Mapping[str, Any]
    ) -> bool:
        """Replace a parked flow's ``waiting`` if it is still ``expected``."""
        t = self._table

        def op(conn: sa.Connection) -> bool:
            row = conn.execute(
                sa.select(t.c.waiting).where(t.c.id == flow_id, t.c.state == PARKED)
            ).first()
            if row is None or row.waiting != dict(expected):
                return False
            conn.execute(
                t.update()
                .where(t.c.id == flow_id, t.c.state == PARKED)
                .values(waiting=dict(waiting), updated_at=_now())
            )
            return True

        return self._store._write("update waiting flow", op)

    def mark_picked_up(self, server_id: str) -> int:
        """Note that ``server_id`` read its metadata: its parked flows were
        picked up.  Returns how many were newly marked."""
        marked = 0
        for row in self.find(states=[PARKED], server_id=server_id):
            waiting = dict(row.waiting or {})
            if waiting.get("picked_up"):
                continue
            assert row.waiting is not None
            if self.update_waiting(
                row.id, picked_up(waiting, time.time()), expected=row.waiting
            ):
                marked += 1
        return marked

    def mark_started(self, deployment_id: str) -> None:
        """Note that the agent said "started" for the action a parked flow
        of ``deployment_id`` waits for."""
        for row in self.find(states=[PARKED], deployment_id=deployment_id):
            assert row.waiting is not None
            now = started(row.waiting, time.time())
            self.update_waiting(row.id, now, expected=row.waiting)

    def request_cancel(self, flow_id: str, note: str = CANCEL_NOTE) -> bool:
        """Mark an unfinished (RUNNING or PARKED) flow as asked to cancel."""
        t = self._table
        query = (
            t.update()
            .where(t.c.id == flow_id, t.c.state.in_([RUNNING, PARKED]))
            .values(note=note[:2000], updated_at=_now())
        )
        return changed_one(self, "cancel flow", query)

    def cancel_note(self, flow_id: str) -> str | None:
        """Why an unfinished flow was asked to cancel; None if it was not."""
        t = self._table
        query = self._store._statement(
            "flow note",
            lambda: sa.select(t.c.note).where(
                t.c.id == sa.bindparam("id"), t.c.state.in_([RUNNING, PARKED])
            ),
        )

        def op(conn: sa.Connection) -> str | None:
            row = conn.execute(query, {"id": flow_id}).first()
            note = None if row is None else row.note
            return note if is_cancel_note(note) else None

        return self._store._read("read flow note", op)

    def cancel_requested(self, flow_id: str) -> bool:
        return self.cancel_note(flow_id) is not None

    def cancelled_among(self, flow_ids: Iterable[str]) -> set[str]:
        """Those of ``flow_ids`` asked to cancel and not ended yet, in one query."""
        ids = list(flow_ids)
        if not ids:
            return set()
        t = self._table
        query = sa.select(t.c.id).where(
            t.c.id.in_(ids),
            t.c.state.in_([RUNNING, PARKED]),
            t.c.note.startswith(CANCEL_NOTE),
        )
        return self._store._read(
            "find cancelled flows",
            lambda conn: {row.id for row in conn.execute(query)},
        )

    def break_flow(self, flow_id: str, note: str) -> None:
        """Set a flow aside as BROKEN with ``note`` saying why."""
        t = self._table
        self._store._write(
            "set flow aside",
            lambda conn: conn.execute(
                t.update()
                .where(t.c.id == flow_id)
                .values(
                    state=BROKEN,
                    owner=None,
                    lease_until=None,
                    note=note[:2000],
                    updated_at=_now(),
                )
            ),
        )

    # -- internals --------------------------------------------------------
    def _select(self) -> sa.Select[Any]:
        t = self._table
        d = self._store.tables.deployments
        return sa.select(t, d.c.status, d.c.generation).select_from(
            t.outerjoin(d, d.c.id == t.c.deployment_id)
        )

    @staticmethod
    def _from_row(row: Any) -> FlowRow:
        return FlowRow(
            id=row.id,
            kind=row.kind,
            deployment_id=row.deployment_id,
            server_id=row.server_id,
            state=row.state,
            owner=row.owner,
            lease_until=row.lease_until,
            waiting=row.waiting,
            takeovers=row.takeovers,
            note=row.note,
            created_at=row.created_at,
            deployment_status=row.status,
            deployment_generation=row.generation,
        )


class ParkedRows:
    """Reads every parked flow, decoding only what changed since the last read.

    The signal watcher reads all parked rows at every look.  Decoding each
    row's ``waiting`` JSON and building its :class:`FlowRow` again was most
    of a look's work at 10,000 parked flows, though a parked row seldom
    changes.  Here ``waiting`` is read as text: a row whose columns all
    read as they did the last time is the very :class:`FlowRow` built then
    (its ``waiting`` the same dict), so callers treat rows as read-only.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        t = store.tables.flows
        d = store.tables.deployments
        self._query = (
            sa.select(
                t.c.id,
                t.c.kind,
                t.c.deployment_id,
                t.c.server_id,
                t.c.state,
                t.c.owner,
                t.c.lease_until,
                sa.cast(t.c.waiting, sa.Text).label("waiting"),
                t.c.takeovers,
                t.c.note,
                t.c.created_at,
                d.c.status,
                d.c.generation,
            )
            .select_from(t.outerjoin(d, d.c.id == t.c.deployment_id))
            .where(t.c.state == PARKED)
            .order_by(t.c.created_at, t.c.id)
        )
        self._some = self._query.where(t.c.id.in_(sa.bindparam("ids", expanding=True)))
        #: flow id -> its columns as last read, and the row built from them
        self._last: dict[str, tuple[tuple[Any, ...], FlowRow]] = {}

    def read(self, only: Collection[str] | None = None) -> list[FlowRow]:
        """Every parked flow, or those of ``only`` (what is kept of the
        others is kept)."""

        def op(conn: sa.Connection) -> list[FlowRow]:
            last = self._last
            now: dict[str, tuple[tuple[Any, ...], FlowRow]] = {}
            rows = []
            found = (
                conn.execute(self._query)
                if only is None
                else conn.execute(self._some, {"ids": sorted(only)})
            )
            for raw in found:
                columns = tuple(raw)
                seen = last.get(columns[0])
                if seen is None or seen[0] != columns:
                    seen = (columns, self._build(columns))
                # else what was kept stays as it was: the garbage collector
                # walks every object kept past a few collections, and the
                # columns read anew each look die here instead
                now[columns[0]] = seen
                rows.append(seen[1])
            if only is None:
                self._last = now  # a read racing another keeps either: both right
            else:
                last.update(now)
            return rows

        return self._store._read("list flows", op)

    @staticmethod
    def _build(raw: tuple[Any, ...]) -> FlowRow:
        (flow_id, kind, deployment_id, server_id, state, owner, lease_until,
         waiting, takeovers, note, created_at, status, generation) = raw  # fmt: skip
        return FlowRow(
            id=flow_id,
            kind=kind,
            deployment_id=deployment_id,
            server_id=server_id,
            state=state,
            owner=owner,
            lease_until=lease_until,
            waiting=None if waiting is None else json.loads(waiting),
            takeovers=takeovers,
            note=note,
            created_at=created_at,
            deployment_status=status,
            deployment_generation=generation,
        )


def changed_one(
    registry: FlowRegistry,
    what: str,
    query: Any,
    params: Mapping[str, Any] | None = None,
) -> bool:
    """Run ``query`` (bound with ``params``; a statement, or one run
    :class:`~swflows.persistence.direct.Direct`) in a write of its own:
    whether it changed a row (a compare-and-set won)."""

    def run(conn: sa.Connection) -> Any:
        if isinstance(query, direct.Direct):
            return query.run(conn, params or {})
        return conn.execute(query, params)

    return registry._store._write(what, lambda conn: bool(run(conn).rowcount))


def claim_statement(t: sa.Table, of_dead_owner: bool) -> Any:
    """:meth:`FlowRegistry.claim`'s update, its values bound when it runs."""
    owner: Any = sa.bindparam("claimer")
    free = sa.or_(
        t.c.state == PARKED,
        t.c.owner.is_(None),
        t.c.lease_until <= sa.bindparam("now"),
        t.c.owner == owner,
    )
    if of_dead_owner:
        free = sa.or_(free, t.c.owner == sa.bindparam("dead_owner"))
    takeover = sa.case(
        (
            sa.and_(t.c.state == RUNNING, t.c.owner.is_not(None), t.c.owner != owner),
            t.c.takeovers + 1,
        ),
        else_=t.c.takeovers,
    )
    return (
        t.update()
        .where(
            t.c.id == sa.bindparam("flow"),
            t.c.state.in_(sa.bindparam("from_states", expanding=True)),
            free,
        )
        .values(
            state=RUNNING,
            owner=owner,
            lease_until=sa.bindparam("new_lease"),
            takeovers=takeover,
            updated_at=sa.bindparam("updated"),
        )
    )


def claim_unowned(
    registry: FlowRegistry, flow_id: str, owner: str, *, lease_until: float, below: int
) -> bool:
    """Take a RUNNING flow nobody holds and whose takeovers are fewer than
    ``below`` (a job just posted) for ``owner``, in one write; False for
    any other flow (ended, parked, held, or taken over too often), which
    :meth:`FlowRegistry.get` and :meth:`FlowRegistry.claim` then sort out."""
    t = registry._table
    query = registry._store._statement(
        "claim an unowned flow",
        lambda: direct.Direct(
            t.update()
            .where(
                t.c.id == sa.bindparam("flow"),
                t.c.state == RUNNING,
                t.c.owner.is_(None),
                t.c.takeovers < sa.bindparam("below"),
            )
            .values(
                owner=sa.bindparam("claimer"),
                lease_until=sa.bindparam("new_lease"),
                updated_at=sa.bindparam("updated"),
            )
        ),
    )
    params = {
        "flow": flow_id,
        "below": below,
        "claimer": owner,
        "new_lease": lease_until,
        "updated": _now(),
    }
    return changed_one(registry, "claim flow", query, params)


def is_cancel_note(note: str | None) -> bool:
    """Whether a RUNNING or PARKED row's ``note`` asks it to cancel."""
    return bool(note) and str(note).startswith(CANCEL_NOTE)


def end_flow(
    registry: FlowRegistry,
    flow_id: str,
    *,
    keep_book: bool = False,
    result: tuple[str, Mapping[str, Any]] | None = None,
    owner: str | None = None,
) -> bool:
    """Forget an ended flow in one transaction: its row, its logbook's
    steps and its logbook; with ``keep_book`` the logbook stays, and
    ``result`` (a meta key and values) is merged into its meta (a
    developer's flow keeps its outcome there).  False when its row was
    already gone.  A crash leaves the flow whole or gone, never a row
    without its logbook or an outcome without the end of its row.

    ``owner``: the runner whose drive ended the flow; its row is removed
    only while it names that owner, else nothing is and
    :class:`~swflows.persistence.logbook.FlowFenced` is raised (the end
    is the drive's last write to the flow, fenced as the others).
    """
    t = registry._table
    tables = registry._store.tables
    flow_param: Any = sa.bindparam("flow")
    books, details, atoms = (
        tables.tf_logbooks,
        tables.tf_flowdetails,
        tables.tf_atomdetails,
    )

    def removal(name: str, table: sa.Table, column: Any) -> Any:
        return registry._store._statement(
            f"remove {name} of a flow",
            lambda: direct.Direct(table.delete().where(column == flow_param)),
        )

    removals = [
        # the row first: a write fenced on it waits, then finds no owner
        removal("the row", t, t.c.id),
        removal("the steps", atoms, atoms.c.parent_uuid),
        removal("the detail", details, details.c.uuid),
        removal("the logbook", books, books.c.uuid),
    ]
    by_id = {"flow": flow_id}
    owned = registry._store._statement(
        "remove the row of a flow its owner ended",
        lambda: direct.Direct(
            t.delete().where(t.c.id == flow_param, t.c.owner == sa.bindparam("owner"))
        ),
    )

    book_meta = registry._store._statement(
        "the meta of a flow's logbook",
        lambda: direct.Direct(
            sa.select(books.c.meta).where(books.c.uuid == flow_param)
        ),
    )
    new_book_meta = registry._store._statement(
        "write the meta of a flow's logbook",
        lambda: direct.Direct(
            books.update()
            .where(books.c.uuid == flow_param)
            .values(meta=sa.bindparam("book_meta", type_=books.c.meta.type))
        ),
    )

    def op(conn: sa.Connection) -> bool:
        if owner is None:
            removed = removals[0].run(conn, by_id).rowcount
        else:
            removed = owned.run(conn, {**by_id, "owner": owner}).rowcount
            if not removed:
                holder = conn.execute(
                    sa.select(t.c.owner).where(t.c.id == flow_id)
                ).first()
                if holder is not None:
                    # taskflow's, loaded by then: not by every reader of rows
                    from swflows.persistence import logbook

                    raise logbook.FlowFenced(flow_id, owner, holder.owner)
        if conn.dialect.name == "sqlite":
            # a server database removes the steps with their detail (their
            # key cascades); SQLite only on connections enforcing foreign
            # keys, which an embedder's may have opened before the hooks
            removals[1].run(conn, by_id)
        removals[2].run(conn, by_id)
        if not keep_book:
            removals[3].run(conn, by_id)
        elif result is not None:
            key, values = result
            found = book_meta.run(conn, by_id).first()
            if found is not None:
                meta = dict(found.meta or {})
                meta[key] = {**dict(meta.get(key) or {}), **values}
                new_book_meta.run(conn, {**by_id, "book_meta": meta})
        return bool(removed)

    return registry._store._write("end flow", op)


def forget_kept_failures(
    registry: FlowRegistry, now: _dt.datetime | None = None
) -> int:
    """Remove the failures kept longer than :data:`KEPT_FAILURE_SECONDS`
    (a deploy's, kept by :func:`end_flow` with ``keep_book``); how many.
    Only a logbook with no flow row, last written before the cutoff, not
    a developer's flow's (its outcome stays until it is asked to go), and
    whose meta holds an ended state, is removed."""
    t = registry._table
    books = registry._store.tables.tf_logbooks
    cutoff = (now or model.utcnow()) - _dt.timedelta(seconds=KEPT_FAILURE_SECONDS)
    candidates = (
        sa.select(books.c.uuid, books.c.meta)
        .where(
            sa.func.coalesce(books.c.updated_at, books.c.created_at) < cutoff,
            sa.not_(books.c.name.like(f"swflows-{CUSTOM}-%")),
            sa.not_(sa.exists().where(t.c.id == books.c.uuid)),
        )
        .limit(1000)
    )

    def op(conn: sa.Connection) -> int:
        kept = [
            row.uuid
            for row in conn.execute(candidates)
            if "state" in dict((row.meta or {}).get(META_KEY) or {})
        ]
        if kept:
            conn.execute(books.delete().where(books.c.uuid.in_(kept)))
        return len(kept)

    return registry._store._write("forget kept failures", op)


def park_statement(t: sa.Table) -> Any:
    """The update parking a flow (:meth:`FlowRegistry.park`), built once:
    its values are bound when it runs (:func:`park_params`); a deployment
    or server bound as None leaves the row's own."""
    return (
        t.update()
        .where(
            t.c.id == sa.bindparam("flow"),
            t.c.owner == sa.bindparam("owner_was"),
            t.c.state == RUNNING,
        )
        .values(
            state=PARKED,
            owner=None,
            lease_until=None,
            takeovers=0,
            waiting=sa.bindparam("waiting"),
            updated_at=sa.bindparam("updated"),
            deployment_id=sa.func.coalesce(
                sa.bindparam("deployment", type_=t.c.deployment_id.type),
                t.c.deployment_id,
            ),
            server_id=sa.func.coalesce(
                sa.bindparam("server", type_=t.c.server_id.type), t.c.server_id
            ),
        )
    )


def park_params(
    flow_id: str, owner: str, waiting: Mapping[str, Any], now: Any
) -> dict[str, Any]:
    """:func:`park_statement`'s values for ``flow_id`` of ``owner``."""
    return {
        "flow": flow_id,
        "owner_was": owner,
        "waiting": dict(waiting),
        "updated": now,
        "deployment": None,
        "server": None,
    }


def new_row(
    flow_id: str,
    *,
    kind: str,
    deployment_id: str,
    server_id: str,
    owner: str | None,
    lease_until: float,
) -> dict[str, Any]:
    """A new flow's row: RUNNING, leased to ``owner`` (None: posted to a
    jobboard, for a conductor to claim by ``lease_until``)."""
    return {
        "id": flow_id,
        "kind": kind,
        "deployment_id": deployment_id,
        "server_id": server_id,
        "state": RUNNING,
        "owner": owner,
        "lease_until": lease_until,
        "waiting": None,
        "takeovers": 0,
        "note": None,
        "created_at": _now(),
        "updated_at": None,
    }


def unflowed(
    registry: FlowRegistry, idle_seconds: float, *, limit: int = 500
) -> list[tuple[str, int, str | None]]:
    """IN_PROGRESS deployments unchanged for ``idle_seconds`` that no
    RUNNING or PARKED flow names (:mod:`swflows.engine.reconciler`):
    ``(id, generation, note)``, the note of a BROKEN flow naming it,
    if one does.  One statement, so a flow that ends and goes between
    two reads is never taken for missing."""
    t = registry._table
    d = registry._store.tables.deployments
    cutoff = _now() - _dt.timedelta(seconds=idle_seconds)
    live = sa.exists().where(
        t.c.deployment_id == d.c.id, t.c.state.in_([RUNNING, PARKED])
    )
    broken = (
        sa.select(t.c.note)
        .where(t.c.deployment_id == d.c.id, t.c.state == BROKEN)
        .limit(1)
        .scalar_subquery()
    )
    query = (
        sa.select(d.c.id, d.c.generation, broken)
        .where(
            d.c.status == "IN_PROGRESS",
            sa.func.coalesce(d.c.updated_at, d.c.created_at) < cutoff,
            ~live,
        )
        .order_by(d.c.created_at)
        .limit(limit)
    )

    def op(conn: sa.Connection) -> list[tuple[str, int, str | None]]:
        return [(str(r[0]), int(r[1]), r[2]) for r in conn.execute(query)]

    return registry._store._read("find unflowed deployments", op)


def reconciled(registry: FlowRegistry, prefixes: Mapping[str, str]) -> dict[str, int]:
    """How many FAILED deployments' status reasons begin with each prefix
    (``kind -> prefix``): those the reconciler or a broken flow ended."""
    d = registry._store.tables.deployments

    def op(conn: sa.Connection) -> dict[str, int]:
        found = {}
        for kind, prefix in prefixes.items():
            query = (
                sa.select(sa.func.count())
                .select_from(d)
                .where(d.c.status == "FAILED", d.c.status_reason.startswith(prefix))
            )
            found[kind] = int(conn.scalar(query) or 0)
        return found

    return registry._store._read("count reconciled deployments", op)


def custom_running(registry: FlowRegistry) -> bool:
    """Whether a developer's own flow runs now (its deployments are
    not named by its row until it waits)."""

    def op(conn: sa.Connection) -> bool:
        query = (
            sa.select(registry._table.c.id)
            .where(registry._table.c.kind == CUSTOM, registry._table.c.state == RUNNING)
            .limit(1)
        )
        return conn.execute(query).first() is not None

    return registry._store._read("find custom flows", op)


__all__ = [
    "BROKEN",
    "CANCEL_NOTE",
    "CUSTOM",
    "PARKED",
    "RUNNING",
    "FlowRegistry",
    "FlowRow",
    "changed_one",
    "claim_statement",
    "custom_running",
    "end_flow",
    "is_cancel_note",
    "new_owner",
    "new_row",
    "owner_is_dead",
    "park_params",
    "park_statement",
    "reconciled",
    "unflowed",
]
