"""TaskFlow's SQL logbook on the store's engine, with its tables built once.

The stock ``impl_sqlalchemy`` backend builds a new ``MetaData`` and new
``Table`` objects in every ``get_connection()``, and TaskFlow's storage asks
for a connection for every read or write, so SQLAlchemy's compiled-statement
cache never hits and a five-task flow spends 100-300 ms of CPU compiling SQL.
:class:`Backend` builds the tables once and every :class:`Connection` reuses
them; the SQL and the stored data are exactly the stock backend's.

The store's backend keeps the logbook in TaskFlow's three tables under the
store's prefix (``<prefix>tf_logbooks``, ``<prefix>tf_flowdetails``,
``<prefix>tf_atomdetails``; :func:`swflows.persistence.tables.
logbook_tables`), created by the store's own migrations, so TaskFlow's
``alembic_version`` is never used and swflows fits in an embedder's
database.

Pinned against taskflow 6.3-6.5 (``requirements.txt``: ``taskflow<7``).
This relies on these names in ``taskflow.persistence.backends``:

* ``impl_sqlalchemy.SQLAlchemyBackend(conf, engine=...)`` and its attributes
  ``_upgrade_lock``, ``_validated``, ``_max_retries`` (read by the stock
  ``get_connection``, which this module's replaces);
* ``impl_sqlalchemy.Connection``, whose methods read the attributes
  ``_backend``, ``_upgrade_lock``, ``_engine``, ``_metadata``, ``_tables``
  and ``_converter`` that its ``__init__`` sets;
* ``impl_sqlalchemy._Alchemist(tables)``, its ``convert_book``,
  ``convert_flow_detail``, ``convert_atom_detail`` and ``populate_book``,
  which call the ``flow_query_iter`` and ``atom_query_iter`` this module's
  converter replaces; and ``sqlalchemy.tables.Tables``.

``tests/unit/test_persistence_logbook.py`` checks these are still there.

Fencing: the engine driving a flow writes through :meth:`Backend.fenced`,
so each of its writes first checks, in the same transaction and holding a
share lock on the flow's row, that the row still names its runner as the
flow's owner.  A runner that lost the flow (its lease ran out, its job's
claim was taken, it was paused) and goes on running a step therefore
cannot write that step's end into the logbook its new owner resumed from:
the write raises :class:`FlowFenced` and the new owner's view stays whole.
"""

from __future__ import annotations

import collections
import json
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import sqlalchemy as sa
from taskflow import exceptions as tf_exc
from taskflow import states as tf_states
from taskflow import storage as tf_storage
from taskflow.persistence import models as tf_models
from taskflow.persistence.backends import impl_sqlalchemy
from taskflow.persistence.backends.sqlalchemy import tables as tf_tables

from swflows.persistence import direct
from swflows.persistence import tables as store_tables

#: TaskFlow's own table names (the store's carry its prefix and ``tf_``)
TASKFLOW_TABLES = ("logbooks", "flowdetails", "atomdetails")
#: the name TaskFlow keeps a flow's inputs under, in an atom of their own
INJECTOR = tf_storage.Storage.injector_name


class FlowFenced(BaseException):
    """A write to a flow's logbook by a runner that no longer owns the flow.

    A :class:`BaseException`, so TaskFlow records no failure (which would
    make the flow revert) and writes nothing more: the engine stops, and
    the flow is its new owner's.
    """

    def __init__(self, flow_id: str, owner: str, holder: str | None) -> None:
        super().__init__(
            f"flow {flow_id}: its logbook is {holder or 'nobody'}'s now, "
            f"not {owner}'s: nothing written"
        )
        self.flow_id = flow_id
        self.owner = owner
        self.holder = holder


class CancelSeen(BaseException):
    """A step's RUNNING not written: the flow's row asks it to cancel.

    Raised by the write that would record a step of a drive that stops on
    a cancel (:attr:`Fenced.stops_on`) as RUNNING, so the step does not
    run and stays PENDING, in the logbook as in the engine's memory.  A
    :class:`BaseException`, so TaskFlow records no failure: the runner
    stops the engine and reverts the flow as it does any cancelled flow.
    """

    def __init__(self, flow_id: str, note: str | None) -> None:
        super().__init__(f"flow {flow_id}: {note}: no further step")
        self.flow_id = flow_id


class _Saved(NamedTuple):
    """What a flow detail's save wrote: its saved atoms, those inserted."""

    atoms: set[str]
    inserted: set[str]


class Connection(impl_sqlalchemy.Connection):  # type: ignore[misc]
    """A stock connection that reuses its backend's table objects."""

    def __init__(self, backend: Backend, upgrade_lock: threading.Lock) -> None:
        # Deliberately not calling super().__init__(): building fresh
        # MetaData/Table objects there is the whole cost being avoided.  The
        # attributes set here are the ones the stock __init__ sets.
        self._backend = backend
        self._upgrade_lock = upgrade_lock
        self._engine = backend.engine
        self._metadata = backend.metadata
        self._tables = backend.tables
        self._converter = backend.converter
        #: (flow id, owner) whose ownership every write checks first
        self.fence: tuple[str, str] | None = None
        #: the drive whose engine writes through this connection (None: no
        #: engine's): only its writes carry its held-back progress
        self.drive: Fenced | None = None

    def _check_fence(self, conn: sa.Connection, atom_detail: Any = None) -> None:
        """Raise :class:`FlowFenced` unless the fenced flow's row still names
        its owner; the row stays share-locked until the write commits, so a
        claim by another runner comes before this write or after it.

        ``atom_detail``: the atom written; a task's RUNNING raises
        :class:`CancelSeen` instead when the row's note stops the drive."""
        if self.fence is None:
            return
        flow_id, owner = self.fence
        row = self._backend.statements.fence.run(conn, {_FLOW_KEY: flow_id}).first()
        holder = None if row is None else row.owner
        if holder != owner:
            raise FlowFenced(flow_id, owner, holder)
        drive = self.drive
        if drive is None:
            return
        note = row.note if row is not None else None
        drive.saw_note(note)
        stops_on = drive.stops_on
        if (
            stops_on is not None
            and isinstance(atom_detail, tf_models.TaskDetail)
            and atom_detail.state == tf_states.RUNNING
            and stops_on(note)
        ):
            raise CancelSeen(flow_id, note)

    def update_atom_details(self, atom_detail: Any) -> Any:
        """Save an atom detail in one UPDATE; a change of its progress alone,
        and the success of a task the drive ran, go with its next write.

        The stock method reads the row back first and merges the given
        detail into it, which yields the given detail's values anyway.
        TaskFlow saves a task's progress (0.0 once it runs, 1.0 once it has
        ended) in transactions of their own around the writes of its
        states.  Those progress-only saves ride along with the drive's
        next write (the next atom's state, or the flow's), and so does the
        SUCCESS, with its result, of a task whose RUNNING the drive wrote
        (:meth:`Fenced.may_hold_success`): the next step's RUNNING, a
        failure, or the flow's state (its end, its parking) carries it in
        the same transaction.  So whatever a later step does comes after
        the earlier step's success is in the database; a drive stopped in
        between (a crash, its claim lost) leaves that step RUNNING, which
        its next owner runs again, as after a crash during the step (the
        tasks are idempotent).  A finished run leaves the rows the stock
        backend leaves.
        """
        values = atom_detail.to_dict()
        fingerprint = _fingerprint(values)
        drive = self.drive
        if drive is not None and (
            self._backend.last_written(atom_detail.uuid) == fingerprint
            or drive.may_hold_success(atom_detail)
        ):
            drive.defer(atom_detail.uuid, values, fingerprint)
            return atom_detail
        held = drive.take_held_flow() if drive else None
        deferred = drive.take_deferred(but=atom_detail.uuid) if drive else {}
        try:
            with self._engine.begin() as conn:
                self._check_fence(conn, atom_detail)
                saved = (
                    None
                    if held is None
                    else self._write_flow(conn, held, {atom_detail.uuid: values})
                )
                # an atom the held flow's save just inserted has these values
                inserted = saved is not None and atom_detail.uuid in saved.inserted
                if not inserted and not self._update_atom(
                    conn, atom_detail.uuid, values
                ):
                    raise tf_exc.NotFound(
                        f"No atom details found with uuid '{atom_detail.uuid}'"
                    )
                self._flush(conn, deferred)
            if held is not None and saved is not None:
                self._backend.saved_atoms_are(held.uuid, saved.atoms)
            self._backend.written(atom_detail.uuid, fingerprint)
            self._remember(deferred)
            if drive is not None:
                drive.wrote(atom_detail)
            return atom_detail
        except sa.exc.SQLAlchemyError:
            if drive is not None:
                drive.restore_deferred(deferred, held)
            tf_exc.raise_with_cause(
                tf_exc.StorageFailure,
                f"Failed updating atom details with uuid '{atom_detail.uuid}'",
            )
        except BaseException:
            if drive is not None:
                drive.restore_deferred(deferred, held)
            raise

    def _update_atom(
        self, conn: sa.Connection, atom_id: str, values: dict[str, Any]
    ) -> bool:
        result = self._backend.statements.update_atom.run(
            conn, {**values, _ATOM_KEY: atom_id}
        )
        return bool(result.rowcount)

    def _flush(self, conn: sa.Connection, deferred: Deferred) -> None:
        """Write held-back saves (an atom gone with its logbook is skipped)."""
        for atom_id, (values, _) in deferred.items():
            self._update_atom(conn, atom_id, values)

    def _remember(self, deferred: Deferred) -> None:
        """Once their transaction committed: held-back saves were written."""
        for atom_id, (_, fingerprint) in deferred.items():
            self._backend.written(atom_id, fingerprint)

    def update_flow_details(self, flow_detail: Any) -> Any:
        """Save a flow detail's own row, and insert its atoms not yet saved;
        a drive's saves of a flow that starts, runs or succeeded are held.

        The stock method reads the flow's row back, and rewrites every saved
        atom of the flow (a SELECT of them all, then an UPDATE each) on
        every flow state change, though TaskFlow's storage saves each atom
        on its own whenever it changes: a five-step flow paid about 35
        redundant UPDATEs.  Here the row's state and meta are written in one
        UPDATE (its name never changes), and the flow's atoms are looked up
        only when one is not known to be saved yet.  Atoms are only ever
        added by the process holding the flow (swflows' flows have one
        owner), so the in-memory atoms are the saved ones.

        A drive holds back (:meth:`Fenced.may_hold_flow`) the saves of its
        flow's preparing and of its RUNNING: they go with its first step's
        RUNNING, before which nothing of the flow has run.  Its SUCCESS is
        never written: the runner records the end by removing the flow's
        steps and detail, fenced on its row (:func:`~swflows.persistence.
        flow_registry.end_flow`), and a drive stopped before that leaves
        its last step RUNNING, which its next owner runs again.
        """
        flow_id = flow_detail.uuid
        drive = self.drive
        if drive is not None and drive.may_hold_flow(flow_detail):
            drive.hold_flow(flow_detail)
            return flow_detail
        # a held save of the flow is superseded by this one
        held = drive.take_held_flow() if drive else None
        deferred = drive.take_deferred() if drive else {}
        try:
            with self._engine.begin() as conn:
                self._check_fence(conn)
                saved = self._write_flow(conn, flow_detail)
                self._flush(conn, deferred)
            self._backend.saved_atoms_are(flow_id, saved.atoms)
            self._remember(deferred)
            return flow_detail
        except sa.exc.SQLAlchemyError:
            if drive is not None:
                drive.restore_deferred(deferred, held)
            tf_exc.raise_with_cause(
                tf_exc.StorageFailure,
                f"Failed updating flow details with uuid '{flow_id}'",
            )
        except BaseException:
            if drive is not None:
                drive.restore_deferred(deferred, held)
            raise

    def _write_flow(
        self,
        conn: sa.Connection,
        flow_detail: Any,
        newer: dict[str, dict[str, Any]] | None = None,
    ) -> _Saved:
        """Update a flow detail's row and insert its atoms not saved yet
        (an atom in ``newer`` with the values given there: the save that
        carries the flow's writes its new state); the uuids of its saved
        atoms (remembered once committed) and of those inserted."""
        flow_id = flow_detail.uuid
        result = self._backend.statements.update_flow.run(
            conn,
            {"state": flow_detail.state, "meta": flow_detail.meta, _FLOW_KEY: flow_id},
        )
        if not result.rowcount:
            raise tf_exc.NotFound(f"No flow details found with uuid '{flow_id}'")
        atoms = {atom.uuid: atom for atom in flow_detail}
        known = self._backend.saved_atoms(flow_id)
        if known is None:  # not remembered: read which are saved
            known = set(
                self._backend.statements.atom_ids_of.run(
                    conn, {_PARENT_KEY: flow_id}
                ).scalars()
            )
        missing = [atom for uuid, atom in atoms.items() if uuid not in known]
        if missing:
            self._insert_atoms(conn, flow_id, missing, newer or {})
        return _Saved(set(atoms) | known, {atom.uuid for atom in missing})

    def _insert_atoms(
        self,
        conn: sa.Connection,
        flow_id: str,
        atoms: list[Any],
        newer: dict[str, dict[str, Any]],
    ) -> None:
        """Insert atom details as the stock backend does, one statement
        for all those of the same columns (an INSERT each, built anew, was
        a new flow's costliest write); an atom in ``newer`` with its
        values there."""
        rows: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for atom in atoms:
            value = {
                **(newer.get(atom.uuid) or atom.to_dict()),
                "parent_uuid": flow_id,
                "atom_type": tf_models.atom_detail_type(atom),
            }
            rows.setdefault(tuple(sorted(value)), []).append(value)
        for same in rows.values():
            self._backend.statements.insert_atoms.run(conn, same)

    def get_logbook(self, book_uuid: str, lazy: bool = False) -> Any:
        """The stock read, with the backend's prebuilt statements; a whole
        logbook (not ``lazy``) in one statement, not one per table."""
        statements = self._backend.statements
        try:
            with self._engine.connect() as conn:
                if lazy:
                    row = statements.book.run(conn, {_BOOK_KEY: book_uuid}).first()
                    if row is None:
                        raise tf_exc.NotFound(
                            f"No logbook found with uuid '{book_uuid}'"
                        )
                    return self._converter.convert_book(row._mapping)
                rows = list(statements.whole_book.run(conn, {_BOOK_KEY: book_uuid}))
                if not rows:
                    raise tf_exc.NotFound(f"No logbook found with uuid '{book_uuid}'")
                return self._converter.whole_book(rows)
        except sa.exc.DBAPIError:
            tf_exc.raise_with_cause(
                tf_exc.StorageFailure, f"Failed getting logbook '{book_uuid}'"
            )

    def destroy_logbook(self, book_uuid: str) -> Any:
        self._backend.forget_book(book_uuid)
        return super().destroy_logbook(book_uuid)


#: how many atoms' and flows' last writes a backend remembers
REMEMBERED = 4096
#: atom meta keys whose change alone is not worth a write of its own
PROGRESS_KEYS = frozenset({"progress"})


#: atom uuid -> (values, fingerprint) of a save held back for a drive's
#: next write
Deferred = dict[str, tuple[dict[str, Any], str]]


#: the names the prebuilt statements bind a flow's and an atom's uuid to
_FLOW_KEY = "fenced_flow_uuid"
_ATOM_KEY = "updated_atom_uuid"
_BOOK_KEY = "read_book_uuid"
#: what the prebuilt updates of a flow detail and an atom detail bind
#: their uuid to (:class:`_Statements`)
FLOW_KEY = _FLOW_KEY
ATOM_KEY = _ATOM_KEY
_PARENT_KEY = "read_parent_uuid"
#: the prefixes of a logbook's, a flow's and an atom's columns in a read
#: of a logbook whole (:attr:`_Statements.whole_book`)
BOOK_PREFIX, FLOW_PREFIX, ATOM_PREFIX = "b_", "f_", "a_"


class _Statements:
    """The logbook's statements run for every step, built once: built for
    each call, building them and their cache keys took more of a step's
    CPU than running them (their values are bound at execution)."""

    def __init__(self, flows: sa.Table, tables: Any) -> None:
        #: a flow row's owner and note, share-locked (the fence)
        self.fence = direct.Direct(
            sa.select(flows.c.owner, flows.c.note)
            .where(flows.c.id == sa.bindparam(_FLOW_KEY))
            .with_for_update(read=True)
        )
        atoms, details = tables.atomdetails, tables.flowdetails
        #: an atom detail's row (its columns: the parameters given)
        self.update_atom = direct.Direct(
            sa.update(atoms).where(atoms.c.uuid == sa.bindparam(_ATOM_KEY))
        )
        #: a flow detail's row
        self.update_flow = direct.Direct(
            sa.update(details).where(details.c.uuid == sa.bindparam(_FLOW_KEY))
        )
        #: new atom details (their columns: the parameters given)
        self.insert_atom = sa.insert(atoms)
        #: a flow's new atom details, of the same columns, in one statement
        self.insert_atoms = direct.Inserts(atoms)
        books = tables.logbooks
        #: a logbook's row, its flows' and their atoms' (as the stock reads,
        #: for a lazy read and a flow's own)
        self.book = direct.Direct(
            sa.select(books).where(books.c.uuid == sa.bindparam(_BOOK_KEY))
        )
        self.flows_of = direct.Direct(
            sa.select(details).where(details.c.parent_uuid == sa.bindparam(_PARENT_KEY))
        )
        self.atoms_of = direct.Direct(
            sa.select(atoms).where(atoms.c.parent_uuid == sa.bindparam(_PARENT_KEY))
        )
        #: a logbook whole: a row for each atom of each of its flows (one
        #: with no atom for a flow that has none, one with no flow for a
        #: logbook that has none), each table's columns under its prefix
        self.whole_book = direct.Direct(
            sa.select(
                *[column.label(BOOK_PREFIX + column.name) for column in books.c],
                *[column.label(FLOW_PREFIX + column.name) for column in details.c],
                *[column.label(ATOM_PREFIX + column.name) for column in atoms.c],
            )
            .select_from(
                books.outerjoin(
                    details, details.c.parent_uuid == books.c.uuid
                ).outerjoin(atoms, atoms.c.parent_uuid == details.c.uuid)
            )
            .where(books.c.uuid == sa.bindparam(_BOOK_KEY))
        )
        #: the uuids of a flow detail's saved atoms
        self.atom_ids_of = direct.Direct(
            sa.select(atoms.c.uuid).where(
                atoms.c.parent_uuid == sa.bindparam(_PARENT_KEY)
            )
        )


class _Converter(impl_sqlalchemy._Alchemist):  # type: ignore[misc]
    """The stock converter, reading a logbook's flows and atoms with the
    backend's prebuilt statements (a takeover, a resume and a conductor's
    every job load a logbook)."""

    def __init__(self, tables: Any, statements: _Statements) -> None:
        super().__init__(tables)
        self._statements = statements

    def atom_query_iter(self, conn: sa.Connection, parent_uuid: str) -> Any:
        rows = self._statements.atoms_of.run(conn, {_PARENT_KEY: parent_uuid})
        for row in rows:
            yield self.convert_atom_detail(row._mapping)

    def flow_query_iter(self, conn: sa.Connection, parent_uuid: str) -> Any:
        rows = self._statements.flows_of.run(conn, {_PARENT_KEY: parent_uuid})
        for row in rows:
            yield self.convert_flow_detail(row._mapping)

    def whole_book(self, rows: list[Any]) -> Any:
        """A logbook with its flows and their atoms, from the rows of
        :attr:`_Statements.whole_book` (at least one), converted as the
        stock reads convert each table's rows."""
        book = self.convert_book(_columns(rows[0], BOOK_PREFIX))
        flows: dict[str, Any] = {}
        for row in rows:
            flow_id = row._mapping[FLOW_PREFIX + "uuid"]
            if flow_id is None:
                continue  # a logbook without flows
            flow = flows.get(flow_id)
            if flow is None:
                flow = flows[flow_id] = self.convert_flow_detail(
                    _columns(row, FLOW_PREFIX)
                )
                book.add(flow)
            if row._mapping[ATOM_PREFIX + "uuid"] is not None:
                flow.add(self.convert_atom_detail(_columns(row, ATOM_PREFIX)))
        return book


def _columns(row: Any, prefix: str) -> dict[str, Any]:
    """One table's columns of a joined row, under their own names."""
    return {
        key[len(prefix) :]: value
        for key, value in row._mapping.items()
        if key.startswith(prefix)
    }


def _fingerprint(values: dict[str, Any]) -> str:
    """An atom detail's values, progress left out, as comparable text."""
    meta = values.get("meta") or {}
    kept = {
        **values,
        "meta": {k: v for k, v in meta.items() if k not in PROGRESS_KEYS},
    }
    return json.dumps(kept, sort_keys=True, default=repr)


class Backend(impl_sqlalchemy.SQLAlchemyBackend):  # type: ignore[misc]
    """TaskFlow's SQLAlchemy backend with its table objects built once.

    ``engine`` is the store's (TaskFlow leaves it open on ``close()``) and
    ``tables`` its tables, the logbook's among them, which the store's
    migrations made: there is nothing for TaskFlow to create or upgrade.
    """

    # set by the stock __init__, read by get_connection
    _validated: bool
    _max_retries: int
    _upgrade_lock: threading.Lock

    def __init__(self, engine: sa.Engine, tables: store_tables.Tables) -> None:
        super().__init__({}, engine=engine)
        self.metadata = tables.metadata
        #: the flows' registry, whose owners fence the logbook's writes
        self.flows = tables.flows
        self.tables = tf_tables.Tables(
            tables.tf_logbooks, tables.tf_flowdetails, tables.tf_atomdetails
        )
        self.statements = _Statements(self.flows, self.tables)
        self.converter = _Converter(self.tables, self.statements)
        self._memo_lock = threading.Lock()
        #: atom uuid -> fingerprint of the values this backend last wrote
        self._atoms_written: collections.OrderedDict[str, str] = (
            collections.OrderedDict()
        )
        #: flow uuid -> uuids of its atoms known to be saved
        self._flow_atoms: collections.OrderedDict[str, set[str]] = (
            collections.OrderedDict()
        )

    def last_written(self, atom_id: str) -> str | None:
        with self._memo_lock:
            return self._atoms_written.get(atom_id)

    def written(self, atom_id: str, fingerprint: str) -> None:
        with self._memo_lock:
            self._atoms_written[atom_id] = fingerprint
            self._atoms_written.move_to_end(atom_id)
            while len(self._atoms_written) > REMEMBERED:
                self._atoms_written.popitem(last=False)

    def saved_atoms(self, flow_id: str) -> set[str] | None:
        """The uuids of a flow's saved atoms, as this backend knows them
        (its writes, or the load of the flow by its owner); None: unknown."""
        with self._memo_lock:
            known = self._flow_atoms.get(flow_id)
            return None if known is None else set(known)

    def saved_atoms_are(self, flow_id: str, atom_ids: set[str]) -> None:
        with self._memo_lock:
            self._flow_atoms[flow_id] = atom_ids
            self._flow_atoms.move_to_end(flow_id)
            while len(self._flow_atoms) > REMEMBERED:
                self._flow_atoms.popitem(last=False)

    def forget_book(self, book_id: str) -> None:
        """Drop what is remembered of a logbook's flow (swflows: same uuid)."""
        with self._memo_lock:
            atoms = self._flow_atoms.pop(book_id, set())
            for atom_id in atoms:
                self._atoms_written.pop(atom_id, None)

    def get_connection(self) -> Connection:
        conn = Connection(self, self._upgrade_lock)
        if not self._validated:
            conn.validate(max_retries=self._max_retries)
            self._validated = True
        return conn

    def fenced(self, flow_id: str, owner: str, loaded: Any = None) -> Fenced:
        """This backend as the engine ``owner`` drives ``flow_id`` with:
        every write checks ``owner`` still holds the flow.

        ``loaded``: the flow's detail as ``owner`` read it from its
        logbook, once it held the flow: its atoms are the saved ones (only
        the flow's owner adds atoms), so its first write need not read
        them again."""
        writes = Fenced(self, flow_id, owner)
        if loaded is not None:
            self.saved_atoms_are(flow_id, {atom.uuid for atom in loaded})
        return writes

    def unfenced(self) -> Fenced:
        """This backend as one engine drives a flow nobody else may: its
        progress-only saves are held back for its next write all the same
        (an engine on the backend itself writes each save at once)."""
        return Fenced(self, None, None)


class Fenced:
    """A :class:`Backend` whose connections write only while a flow's row
    names its owner (see the module's description); all else is the
    backend's."""

    def __init__(
        self, backend: Backend, flow_id: str | None, owner: str | None
    ) -> None:
        self.backend = backend
        self.fence = None if flow_id is None or owner is None else (flow_id, owner)
        #: atom uuid -> saves held back to go with this drive's next write
        #: (progress alone, a task's success).  They belong to this drive:
        #: one that stopped (its claim lost, its step failed) leaves them
        #: unwritten, so they never overwrite what the flow's next owner
        #: wrote since (nor cross into another flow's transaction).
        self._deferred: Deferred = {}
        #: tasks whose RUNNING this drive wrote (their success may wait)
        self._ran: set[str] = set()
        self._lock = threading.Lock()
        #: the flow row's note as the last fenced write read it (a cancel
        #: request), and whether it was read since last taken
        self._note: str | None = None
        self._note_fresh = False
        #: the flow detail's save held back for this drive's next write
        #: (:meth:`may_hold_flow`)
        self._held_flow: Any = None
        #: with it, each step is started only while the row's note does not
        #: satisfy it: the write of the step's RUNNING, reading the note in
        #: its transaction, raises :class:`CancelSeen` instead
        self.stops_on: Callable[[str | None], bool] | None = None
        if flow_id is not None:
            # what this process remembers writing for the flow may be older
            # than its rows: another process may have driven it since
            backend.forget_book(flow_id)

    def get_connection(self) -> Connection:
        conn = self.backend.get_connection()
        conn.fence = self.fence
        conn.drive = self
        return conn

    def defer(self, atom_id: str, values: dict[str, Any], fingerprint: str) -> None:
        """Keep an atom's values to write with this drive's next write.

        The flow's row is not read until then: a cancel noted meanwhile is
        read afresh by whoever asks (:meth:`take_note`)."""
        with self._lock:
            self._deferred[atom_id] = (values, fingerprint)
            self._note_fresh = False

    def wrote(self, atom_detail: Any) -> None:
        """An atom's save reached the database."""
        if isinstance(atom_detail, tf_models.TaskDetail):
            with self._lock:
                if atom_detail.state == tf_states.RUNNING:
                    self._ran.add(atom_detail.uuid)
                else:
                    self._ran.discard(atom_detail.uuid)

    def may_hold_success(self, atom_detail: Any) -> bool:
        """Whether ``atom_detail`` is the success of a task this drive ran
        (its RUNNING written here), which may wait for the drive's next
        write.  Any other SUCCESS is written at once: the engine's stored
        inputs (TaskFlow saves them as a task that succeeded, and a flow
        without them is taken for one that never started), a retry
        controller's (TaskFlow reads its history back)."""
        if not isinstance(atom_detail, tf_models.TaskDetail):
            return False
        with self._lock:
            return (
                atom_detail.state == tf_states.SUCCESS and atom_detail.uuid in self._ran
            )

    def take_deferred(self, but: str | None = None) -> Deferred:
        """The held-back values to write now (``but``'s are superseded)."""
        with self._lock:
            if but is not None:
                self._deferred.pop(but, None)
            taken, self._deferred = self._deferred, {}
        return taken

    def restore_deferred(self, deferred: Deferred, flow: Any = None) -> None:
        """Put back held-back values (and the flow's held save, ``flow``)
        a failed write did not save."""
        with self._lock:
            for atom_id, held in deferred.items():
                self._deferred.setdefault(atom_id, held)
            if flow is not None and self._held_flow is None:
                self._held_flow = flow

    def may_hold_flow(self, flow_detail: Any) -> bool:
        """Whether a save of the flow's detail may wait: while the flow is
        prepared and starts running (its first step's RUNNING carries it),
        and its SUCCESS (the runner's record of the end supersedes it).
        Any other state (suspended, reverting, reverted, failed) is
        written at once: what it stops at is what its next owner reads."""
        return self.fence is not None and flow_detail.state in _HELD_FLOW_STATES

    def hold_flow(self, flow_detail: Any) -> None:
        with self._lock:
            self._held_flow = flow_detail
            self._note_fresh = False

    def take_held_flow(self) -> Any:
        """The flow detail's held save to write now (None: none)."""
        with self._lock:
            held, self._held_flow = self._held_flow, None
        return held

    def saw_note(self, note: str | None) -> None:
        """A fenced write read the flow row's ``note``."""
        with self._lock:
            self._note, self._note_fresh = note, True

    def take_note(self) -> tuple[bool, str | None]:
        """``(read since last taken, note)``: the runner asks whether a
        flow was cancelled after each step, which the write recording the
        step has just read with its fence (no read of its own then)."""
        with self._lock:
            fresh, self._note_fresh = self._note_fresh, False
            return fresh, self._note

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)


#: the states of a flow whose save a drive holds back (see
#: :meth:`Fenced.may_hold_flow`)
_HELD_FLOW_STATES = frozenset(
    {None, tf_states.PENDING, tf_states.RESUMING, tf_states.RUNNING, tf_states.SUCCESS}
)
#: atom states in which an atom is at work (left so by a runner that
#: stopped, a step that runs again once resumed)
BUSY_STATES = frozenset({tf_states.RUNNING, tf_states.REVERTING})


def busy_atoms(backend: Backend, flow_id: str) -> list[tuple[str, str]]:
    """``(atom name, state)`` of a flow's atoms now running or reverting.

    Read from the logbook, so any process sees what the runner driving the
    flow is doing; an unknown flow has none.
    """
    atoms = backend.tables.atomdetails
    query = sa.select(atoms.c.name, atoms.c.state).where(
        atoms.c.parent_uuid == flow_id, atoms.c.state.in_(sorted(BUSY_STATES))
    )
    with backend.engine.connect() as conn:
        return [(row.name, row.state) for row in conn.execute(query)]
