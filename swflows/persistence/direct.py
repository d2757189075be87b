"""Statements run on the driver's cursor, compiled once.

A conductor's job runs about twenty small statements (claim a flow's
row, fence and write each step, forget the flow at its end), each
through SQLAlchemy's execution: a new execution context, its parameters
looked up and processed through the compiled statement, a result object
built around the cursor.  For these statements that was about a third
of a trivial job's CPU, more than running them.

:class:`Direct` keeps, per set of parameter names, the SQL text, the
parameters' order and their types' processors, compiled once for the
connection's dialect; it runs the text on a cursor of the SQLAlchemy
connection in hand, inside its transaction, through the connection's own
cursor execution (its events, its logging, and its error handling, which
wraps a driver error as SQLAlchemy's own and invalidates a connection
the database dropped); the rows it fetches are converted by their
columns' types, as SQLAlchemy converts them.  A statement it cannot
reproduce faithfully (expanding or literal parameters, values computed
by the database, Python defaults other than a plain callable or scalar)
runs through SQLAlchemy as before.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

#: the connection's own cursor execution (events, logging, error
#: wrapping); without it every statement runs through SQLAlchemy
_CURSOR_EXECUTE: Callable[..., None] | None = getattr(
    sa.Connection, "_cursor_execute", None
)


class Ran:
    """What a statement run directly gave: its row count and rows."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rowcount: int, rows: list[Any]) -> None:
        self.rowcount = rowcount
        self._rows = rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)

    def first(self) -> Any:
        """The first row, or None.  A row is a tuple with the selected
        columns' names as attributes, and ``_mapping``, as SQLAlchemy's."""
        return self._rows[0] if self._rows else None

    def scalars(self) -> list[Any]:
        """The first column of each row."""
        return [row[0] for row in self._rows]


class _Compiled:
    """One statement compiled for one dialect and set of parameter names."""

    __slots__ = ("binds", "computed", "positional", "processors", "row", "sql", "types")

    def __init__(
        self,
        sql: str,
        binds: list[tuple[str, str, bool, Any, Callable[[Any], Any] | None]],
        positional: bool,
        row: Callable[..., Any] | None,
        computed: list[tuple[str, Callable[[], Any]]],
        types: list[Any],
    ) -> None:
        self.sql = sql
        #: (name in the SQL, key in the parameters, whether it must be
        #: given, its value when not, its type's processor), in the SQL's
        #: order
        self.binds = binds
        self.positional = positional
        #: builds a row from a fetched tuple (None: the statement returns none)
        self.row = row
        #: parameters a Python default computes (``onupdate``), by key
        self.computed = computed
        #: the selected columns' types, for this dialect
        self.types = types
        #: their result processors, known once the driver described them
        self.processors: list[Callable[[Any], Any] | None] | None = None

    def rows(self, cursor: Any, dialect: sa.Dialect) -> list[Any]:
        """The fetched rows, their values converted by their types."""
        assert self.row is not None
        fetched = cursor.fetchall()
        processors = self.processors
        if processors is None:
            processors = self.processors = [
                typ.result_processor(dialect, described[1])
                for typ, described in zip(self.types, cursor.description, strict=True)
            ]
        if not any(processors):
            return [self.row(values) for values in fetched]
        return [
            self.row(
                value if process is None else process(value)
                for process, value in zip(processors, values, strict=True)
            )
            for values in fetched
        ]

    def parameters(self, given: Mapping[str, Any]) -> Any:
        values = given
        if self.computed:  # a Python default made only where none was given
            values = dict(given)
            for key, make in self.computed:
                if key not in values:
                    values[key] = make()
        bound = []
        for name, key, required, default, process in self.binds:
            if key in values:
                value = values[key]
            elif required:
                raise sa.exc.InvalidRequestError(
                    f"A value is required for bind parameter {key!r}"
                )
            else:
                value = default
            bound.append((name, value if process is None else process(value)))
        if self.positional:
            return tuple(value for _, value in bound)
        return dict(bound)


_UNSUPPORTED: Any = object()
#: what a compiled statement has when SQLAlchemy's execution does more than
#: bind its parameters (expands or renders them at execution, escapes
#: their names, fetches values the database or Python defaults make)
_NOT_REPRODUCED = (
    "_numeric_binds",
    "literal_execute_params",
    "post_compile_params",
    "escaped_bind_names",
    "insert_prefetch",
    "postfetch",
    "returning",
    "effective_returning",
)


def _compile(statement: Any, dialect: sa.Dialect, keys: Sequence[str]) -> Any:
    """``statement`` compiled for ``dialect`` with ``keys`` given; the
    sentinel :data:`_UNSUPPORTED` when running it directly would not do
    what SQLAlchemy does."""
    compiled: Any = statement.compile(dialect=dialect, column_keys=list(keys))
    if any(getattr(compiled, name, None) for name in _NOT_REPRODUCED) or (
        compiled.positional and compiled.positiontup is None
    ):
        return _UNSUPPORTED
    computed = []
    for column in getattr(compiled, "update_prefetch", None) or ():
        made = _python_default(column.onupdate)
        if made is None:
            return _UNSUPPORTED
        computed.append((column.key, made))
    by_name = {name: bind for bind, name in compiled.bind_names.items()}
    order = compiled.positiontup if compiled.positional else list(by_name)
    binds = []
    for name in order:
        bind = by_name[name]
        if bind.expanding or bind.literal_execute or bind.callable is not None:
            return _UNSUPPORTED
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        binds.append((name, bind.key, bind.required, bind.value, process))
    row = None
    types: list[Any] = []
    if isinstance(statement, sa.Select):
        names: list[str] = []
        for column in statement.selected_columns:
            types.append(column.type.dialect_impl(dialect))
            names.append(str(column.key))
        row = _row_type(tuple(names))
    return _Compiled(compiled.string, binds, compiled.positional, row, computed, types)


def _python_default(default: Any) -> Callable[[], Any] | None:
    """A column default as a function of nothing, if it is one."""
    if default is None:
        return None
    if default.is_scalar:
        value = default.arg
        return lambda: value
    if default.is_callable:
        arg = default.arg
        return lambda: arg(None)
    return None


_ROW_TYPES: dict[tuple[str, ...], Any] = {}


def _row_type(names: tuple[str, ...]) -> Any:
    found: Any = _ROW_TYPES.get(names)
    if found is None:
        plain = collections.namedtuple("Row", names, rename=True)  # type: ignore[misc]
        found = _ROW_TYPES[names] = type(
            "Row",
            (plain,),
            {"__slots__": (), "_mapping": property(plain._asdict)},
        )
    return found._make


class Direct:
    """A statement built once, run on the cursor of the connection given
    (see the module's text); its values are bound when it runs."""

    def __init__(self, statement: Any) -> None:
        self.statement = statement
        self._compiled: dict[tuple[str, frozenset[str]], Any] = {}
        self._lock = threading.Lock()

    def _for(self, dialect: sa.Dialect, keys: frozenset[str]) -> Any:
        key = (dialect.name, keys)
        found = self._compiled.get(key)
        if found is None:
            with self._lock:
                found = self._compiled.get(key)
                if found is None:
                    found = _compile(self.statement, dialect, sorted(keys))
                    self._compiled[key] = found
        return found

    def run(self, conn: sa.Connection, params: Mapping[str, Any]) -> Any:
        """Run with ``params`` in ``conn``'s transaction: a :class:`Ran`,
        or SQLAlchemy's own result where it ran the statement."""
        compiled = self._for(conn.dialect, frozenset(params))
        if compiled is _UNSUPPORTED or _CURSOR_EXECUTE is None:
            return conn.execute(self.statement, params)
        parameters = compiled.parameters(params)
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            _CURSOR_EXECUTE(conn, cursor, compiled.sql, parameters)
            rows = [] if compiled.row is None else compiled.rows(cursor, conn.dialect)
            return Ran(cursor.rowcount, rows)
        finally:
            cursor.close()


class Inserts:
    """Rows of the same columns inserted into ``table`` in one statement
    (a multi-row VALUES, at most ``most`` rows each), run :class:`Direct`.

    SQLAlchemy's own many-row insert batches the rows into one statement
    too, at more cost than running it; a column the rows leave out gets
    its Python default (a plain callable or scalar) for each row, as
    SQLAlchemy gives it."""

    def __init__(self, table: sa.Table, most: int = 100) -> None:
        self.table = table
        self.most = most
        self._statements: dict[tuple[int, tuple[str, ...]], Direct] = {}
        self._defaults: dict[tuple[str, ...], list[tuple[str, Callable[[], Any]]]] = {}

    def _filled(self, keys: tuple[str, ...]) -> list[tuple[str, Callable[[], Any]]]:
        found = self._defaults.get(keys)
        if found is None:
            found = []
            for column in self.table.columns:
                made = None if column.key in keys else _python_default(column.default)
                if made is not None:
                    found.append((column.key, made))
            self._defaults[keys] = found
        return found

    def _statement(self, count: int, keys: tuple[str, ...]) -> Direct:
        found = self._statements.get((count, keys))
        if found is None:
            columns = self.table.c
            found = Direct(
                sa.insert(self.table).values(
                    [
                        {
                            key: sa.bindparam(f"r{i}_{key}", type_=columns[key].type)
                            for key in keys
                        }
                        for i in range(count)
                    ]
                )
            )
            self._statements[(count, keys)] = found
        return found

    def run(self, conn: sa.Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert ``rows`` (each with the same keys) in ``conn``'s
        transaction."""
        if not rows:
            return
        given = tuple(sorted(rows[0]))
        filled = self._filled(given)
        keys = given + tuple(key for key, _ in filled)
        for start in range(0, len(rows), self.most):
            chunk = rows[start : start + self.most]
            params: dict[str, Any] = {}
            for i, row in enumerate(chunk):
                if len(row) != len(given) or any(key not in row for key in given):
                    raise sa.exc.ArgumentError(
                        f"rows inserted into {self.table.name} together must "
                        f"have the same columns: {sorted(row)} against {list(given)}"
                    )
                for key in given:
                    params[f"r{i}_{key}"] = row[key]
                for key, make in filled:
                    params[f"r{i}_{key}"] = make()
            self._statement(len(chunk), keys).run(conn, params)
