"""TaskFlow's SQL logbook on the store's engine, with its tables built once.

The stock ``impl_sqlalchemy`` backend builds a new ``MetaData`` and new
``Table`` objects in every ``get_connection()``, and TaskFlow's storage asks
for a connection for every read or write, so SQLAlchemy's compiled-statement
cache never hits and a five-task flow spends 100-300 ms of CPU compiling SQL.
:class:`Backend` builds the tables once and every :class:`Connection` reuses
them; the SQL and the stored data are exactly the stock backend's.

TaskFlow's tables (``logbooks``, ``flowdetails``, ``atomdetails``) and its
alembic version table (``alembic_version``) are **not** prefixed: TaskFlow
names them itself.  TaskFlow's SQL backend imports ``alembic``.

Pinned against taskflow 6.3-6.5 (``requirements.txt``: ``taskflow<7``).
This relies on these names in ``taskflow.persistence.backends``:

* ``impl_sqlalchemy.SQLAlchemyBackend(conf, engine=...)`` and its attributes
  ``_upgrade_lock``, ``_validated``, ``_max_retries`` (read by the stock
  ``get_connection``, which this module's replaces);
* ``impl_sqlalchemy.Connection``, whose methods read the attributes
  ``_backend``, ``_upgrade_lock``, ``_engine``, ``_metadata``, ``_tables``
  and ``_converter`` that its ``__init__`` sets;
* ``impl_sqlalchemy._Alchemist(tables)`` and ``sqlalchemy.tables.fetch``.

``tests/unit/test_persistence_logbook.py`` checks these are still there.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import sqlalchemy as sa
from taskflow import exceptions as tf_exc
from taskflow.persistence.backends import impl_sqlalchemy
from taskflow.persistence.backends.sqlalchemy import tables as tf_tables

from swflows.persistence import migrations

#: TaskFlow's own table names (not prefixed)
TASKFLOW_TABLES = ("logbooks", "flowdetails", "atomdetails")


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

    def update_atom_details(self, atom_detail: Any) -> Any:
        """Save an atom detail in one UPDATE.

        The stock method reads the row back first and merges the given
        detail into it, which yields the given detail's values anyway.
        """
        atomdetails = self._tables.atomdetails
        values = atom_detail.to_dict()
        try:
            with self._engine.begin() as conn:
                result = conn.execute(
                    sa.update(atomdetails)
                    .where(atomdetails.c.uuid == atom_detail.uuid)
                    .values(values)
                )
                if not result.rowcount:
                    raise tf_exc.NotFound(
                        f"No atom details found with uuid '{atom_detail.uuid}'"
                    )
            return atom_detail
        except sa.exc.SQLAlchemyError:
            tf_exc.raise_with_cause(
                tf_exc.StorageFailure,
                f"Failed updating atom details with uuid '{atom_detail.uuid}'",
            )

    def update_flow_details(self, flow_detail: Any) -> Any:
        """Save a flow detail's own row, and insert its atoms not yet saved.

        The stock method also rewrites every saved atom of the flow (a
        SELECT of them all, then an UPDATE each) on every flow state change,
        though TaskFlow's storage saves each atom on its own whenever it
        changes: a five-step flow paid about 35 redundant UPDATEs.  Atoms are
        only ever added by the process holding the flow (swflows' flows
        have one owner), so the in-memory atoms are the saved ones.
        """
        flowdetails = self._tables.flowdetails
        atomdetails = self._tables.atomdetails
        try:
            with self._engine.begin() as conn:
                row = conn.execute(
                    sa.select(flowdetails).where(flowdetails.c.uuid == flow_detail.uuid)
                ).first()
                if row is None:
                    raise tf_exc.NotFound(
                        f"No flow details found with uuid '{flow_detail.uuid}'"
                    )
                saved = self._converter.convert_flow_detail(row._mapping)
                saved.merge(flow_detail)
                conn.execute(
                    sa.update(flowdetails)
                    .where(flowdetails.c.uuid == saved.uuid)
                    .values(saved.to_dict())
                )
                present = set(
                    conn.execute(
                        sa.select(atomdetails.c.uuid).where(
                            atomdetails.c.parent_uuid == flow_detail.uuid
                        )
                    ).scalars()
                )
                for atom in flow_detail:
                    if atom.uuid not in present:
                        self._insert_atom_details(conn, atom, flow_detail.uuid)
                    saved.add(atom)
            return saved
        except sa.exc.SQLAlchemyError:
            tf_exc.raise_with_cause(
                tf_exc.StorageFailure,
                f"Failed updating flow details with uuid '{flow_detail.uuid}'",
            )


class Backend(impl_sqlalchemy.SQLAlchemyBackend):  # type: ignore[misc]
    """TaskFlow's SQLAlchemy backend with its table objects built once.

    ``engine`` is usually the store's; TaskFlow then leaves it open on
    ``close()``.  Without an engine, ``conf`` is the stock backend's (a
    ``connection`` URL and the stock options).
    """

    # set by the stock __init__, read by get_connection
    _validated: bool
    _max_retries: int
    _upgrade_lock: threading.Lock

    def __init__(
        self, conf: dict[str, Any] | None = None, engine: sa.Engine | None = None
    ) -> None:
        super().__init__(dict(conf or {}), engine=engine)
        self.metadata = sa.MetaData()
        self.tables = tf_tables.fetch(self.metadata)
        self.converter = impl_sqlalchemy._Alchemist(self.tables)

    def get_connection(self) -> Connection:
        conn = Connection(self, self._upgrade_lock)
        if not self._validated:
            conn.validate(max_retries=self._max_retries)
            self._validated = True
        return conn

    def upgrade(self) -> None:
        """Create or upgrade TaskFlow's tables, once across processes.

        On PostgreSQL TaskFlow runs its alembic migrations; a session-level
        advisory lock keeps two processes from running them together.  On
        SQLite TaskFlow runs ``create_all``, in a ``BEGIN IMMEDIATE``
        transaction when the engine is the store's own.
        """
        with migrations.session_lock(self.engine, "taskflow"):
            with contextlib.closing(self.get_connection()) as conn:
                conn.upgrade()


#: atom states in which an atom is at work
_BUSY = frozenset({"RUNNING", "REVERTING"})


def busy_atoms(backend: Backend, flow_id: str) -> list[tuple[str, str]]:
    """``(atom name, state)`` of a flow's atoms now running or reverting.

    Read from the logbook, so any process sees what the runner driving the
    flow is doing; an unknown flow has none.
    """
    atoms = backend.tables.atomdetails
    query = sa.select(atoms.c.name, atoms.c.state).where(
        atoms.c.parent_uuid == flow_id, atoms.c.state.in_(sorted(_BUSY))
    )
    with backend.engine.connect() as conn:
        return [(row.name, row.state) for row in conn.execute(query)]
