"""Whether a failure is an outage, to wait out, or the data's own fault.

Pure: it only looks at exceptions.  Where one loop serves many deployments
(the watcher, resuming, timeouts), a failure handling one of them is either

- an **outage**: the database or a service could not be reached, or stayed
  busy (a dropped or refused connection, a timeout, a retryable swflows
  error).  Every deployment meets it alike; it is retried, and never held
  against a deployment;
- a **data** fault: anything else (a value the database refuses, a stored
  document that does not read back, a bug met by one row's values).  It
  is held against the deployment whose data caused it, which ends FAILED
  (``internal_error``) once it failed that way a few times in a row.

The exception's whole chain is read (``__cause__``, ``__context__``, and
the wrapped ``orig`` or ``cause`` of SQLAlchemy's and TaskFlow's errors),
so a storage failure caused by a lost connection is an outage.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from swflows import exceptions

OUTAGE: Final = "outage"
DATA: Final = "data"

#: exception class names (of DB-API drivers, SQLAlchemy, requests and the
#: standard library) meaning the other end could not be reached
_OUTAGE_NAMES: Final = frozenset(
    {
        "OperationalError",
        "InterfaceError",
        "DisconnectionError",
        "ConnectionError",
        "TimeoutError",
        "ConnectTimeout",
        "ReadTimeout",
    }
)
#: class names meaning the data itself was refused: no retry will help
_DATA_NAMES: Final = frozenset(
    {"DataError", "IntegrityError", "ProgrammingError", "NotSupportedError"}
)
#: the longest description :func:`describe` gives
DESCRIBE_CHARS: Final = 300


def classify(exc: BaseException) -> str:
    """:data:`OUTAGE` or :data:`DATA`."""
    for link in _chain(exc):
        if isinstance(link, exceptions.SwflowsError):
            if link.retryable:
                return OUTAGE
            continue  # it may wrap what caused it
        if getattr(link, "connection_invalidated", False):
            return OUTAGE
        names = {cls.__name__ for cls in type(link).__mro__}
        if names & _DATA_NAMES:
            return DATA
        if names & _OUTAGE_NAMES:
            return OUTAGE
    return DATA


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` is an outage, worth retrying as it is."""
    return classify(exc) == OUTAGE


def describe(exc: BaseException) -> str:
    """``Class: first line of the message``, short enough for one log line.

    Only the first line: SQLAlchemy's next lines hold the statement and its
    parameters, which may carry what a server sent.
    """
    text = str(exc).strip().splitlines()
    line = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    if len(line) > DESCRIBE_CHARS:
        line = line[: DESCRIBE_CHARS - 3] + "..."
    return line


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        link = pending.pop(0)
        if id(link) in seen:
            continue
        seen.add(id(link))
        yield link
        for attr in ("orig", "cause", "__cause__", "__context__"):
            found = getattr(link, attr, None)
            if isinstance(found, BaseException):
                pending.append(found)


__all__ = ["DATA", "OUTAGE", "classify", "describe", "is_outage"]
