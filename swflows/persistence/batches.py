"""Writes of many new flows at once, each in one transaction.

A burst of deployments launched together (:mod:`swflows.engine.batching`)
records their flows' rows and logbooks in one transaction, and parks
them in another: the logbooks as their engines would have left them,
each row handed to the watcher only if it still names its owner.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

import sqlalchemy as sa
from taskflow.persistence import models as tf_models

from swflows import states
from swflows.persistence import flow_registry as flow_rows
from swflows.persistence import logbook


def record_new(
    registry: flow_rows.FlowRegistry,
    backend: logbook.Backend,
    rows: list[dict[str, Any]],  # flow_registry.new_row's each
    books: list[Any],
    *,
    committing: Callable[[], None] | None = None,
    maybe_written: bool = False,
) -> None:
    """Insert flows' rows (:func:`~swflows.persistence.flow_registry.
    new_row`) and their new logbooks, with their flows and atoms, in one
    transaction.

    ``committing`` is called as the transaction is about to commit (a try
    failing before committed nothing).  ``maybe_written``: an earlier try
    failed as it committed, perhaps after the commit; nothing is written if
    the first row is there already (all are: one transaction wrote them)."""
    store = registry._store
    tables = backend.tables
    insert_row = store._statement("add flow", registry._table.insert)
    insert_book = store._statement("add logbook", tables.logbooks.insert)
    insert_detail = store._statement("add flow detail", tables.flowdetails.insert)
    book_values: list[dict[str, Any]] = []
    detail_values: list[dict[str, Any]] = []
    atom_values: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    saved: dict[str, set[str]] = {}
    for book in books:
        book_values.append(book.to_dict())
        for detail in book:
            detail_values.append({**detail.to_dict(), "parent_uuid": book.uuid})
            saved[detail.uuid] = set()
            for atom in detail:
                _add_atom(atom_values, atom, detail.uuid)
                saved[detail.uuid].add(atom.uuid)

    def op(conn: sa.Connection) -> None:
        if maybe_written and rows and _written(conn, registry, rows[0]["id"]):
            return
        if rows:
            conn.execute(insert_row, rows)
        if book_values:
            conn.execute(insert_book, book_values)
            conn.execute(insert_detail, detail_values)
        for same in atom_values.values():
            conn.execute(backend.statements.insert_atom, same)
        if committing is not None:
            committing()

    store._write("add flows", op)
    for flow_id, atom_ids in saved.items():
        backend.saved_atoms_are(flow_id, atom_ids)


def _written(
    conn: sa.Connection, registry: flow_rows.FlowRegistry, flow_id: str
) -> bool:
    table = registry._table
    found = conn.execute(sa.select(table.c.id).where(table.c.id == flow_id)).first()
    return found is not None


def park_recorded(
    registry: flow_rows.FlowRegistry,
    backend: logbook.Backend,
    owner: str,
    parked: Iterable[tuple[str, Mapping[str, Any], Any]],
    *,
    fresh: Collection[str] = (),
) -> set[str]:
    """Park flows ``(flow id, what it waits for, its flow detail)`` of
    ``owner`` in one transaction: each row still ``owner``'s is handed
    to the watcher, and its logbook written as its detail holds it (its
    atoms that ran, its state).  The ids parked; a row another's now is
    left, with its logbook, to that owner.

    The flows in ``fresh`` have stored only their inputs so far: their
    steps are added, PENDING ones too."""
    store = registry._store
    park = store._statement(
        "park flow", lambda: flow_rows.park_statement(registry._table)
    )
    statements = backend.statements
    now = flow_rows._now()
    items = list(parked)

    def op(conn: sa.Connection) -> set[str]:
        done: set[str] = set()
        new_atoms: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for flow_id, waiting, detail in items:
            values = flow_rows.park_params(flow_id, owner, waiting, now)
            if not conn.execute(park, values).rowcount:
                continue
            for atom in detail:
                if flow_id in fresh and atom.name != logbook.INJECTOR:
                    _add_atom(new_atoms, atom, detail.uuid)
                elif atom.state != "PENDING":
                    statements.update_atom.run(
                        conn, {**atom.to_dict(), logbook.ATOM_KEY: atom.uuid}
                    )
            statements.update_flow.run(
                conn,
                {
                    "state": detail.state,
                    "meta": detail.meta,
                    logbook.FLOW_KEY: flow_id,
                },
            )
            done.add(flow_id)
        for same in new_atoms.values():
            conn.execute(statements.insert_atom, same)
        return done

    parked_now: set[str] = store._write("park flows", op)
    for flow_id, _, detail in items:
        if flow_id in fresh and flow_id in parked_now:
            backend.saved_atoms_are(flow_id, {atom.uuid for atom in detail})
    return parked_now


def _add_atom(
    rows: dict[tuple[str, ...], list[dict[str, Any]]], atom: Any, detail_id: str
) -> None:
    """An atom detail's row to insert, among ``rows`` of the same columns
    (inserted in one statement each)."""
    value = {
        **atom.to_dict(),
        "parent_uuid": detail_id,
        "atom_type": tf_models.atom_detail_type(atom),
    }
    rows.setdefault(tuple(sorted(value)), []).append(value)


def holders(
    registry: flow_rows.FlowRegistry, flow_ids: Iterable[str]
) -> dict[str, str]:
    """The owner of each of ``flow_ids`` that has one now (one read)."""
    t = registry._table
    store = registry._store
    query = store._statement(
        "holders of flows",
        lambda: sa.select(t.c.id, t.c.owner).where(
            t.c.id.in_(sa.bindparam("flows", expanding=True))
        ),
    )
    ids = list(flow_ids)

    def op(conn: sa.Connection) -> dict[str, str]:
        return {
            str(row.id): str(row.owner)
            for row in conn.execute(query, {"flows": ids})
            if row.owner is not None
        }

    return store._read("read holders of flows", op)


def ended_among(registry: flow_rows.FlowRegistry, waits: Mapping[str, int]) -> set[str]:
    """Of the deployments ``waits`` names (id -> the generation of the
    action awaited), those whose action ended: removed, ended, or another
    action of theirs begun (one read; see ``driving.still_waiting``)."""
    d = registry._store.tables.deployments
    store = registry._store
    query = store._statement(
        "status of deployments",
        lambda: sa.select(d.c.id, d.c.status, d.c.generation).where(
            d.c.id.in_(sa.bindparam("deployments", expanding=True))
        ),
    )
    ids = list(waits)

    def op(conn: sa.Connection) -> set[str]:
        waiting = {
            str(row.id)
            for row in conn.execute(query, {"deployments": ids})
            if not states.is_terminal(row.status)
            and int(row.generation) == int(waits[str(row.id)])
        }
        return set(ids) - waiting

    return store._read("read status of deployments", op)


__all__ = [
    "ended_among",
    "holders",
    "park_recorded",
    "record_new",
]
