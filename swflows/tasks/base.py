"""The base of every swflows task, its naming rule and its revert contract.

Atom names are persisted API: resumption matches stored atom details to
atoms by name, so every task is named by :func:`atom_name` and a name never
changes once released.

The revert contract, for every task: ``revert(self, result, **kwargs)``
removes what the task makes *by its key* (deployment id and generation),
not only by its recorded result, since a task that failed or was killed
right after its side effect has no result; it treats "not found" as done,
never raises, and logs whatever it had to leave behind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from taskflow import task
from taskflow.types import failure

from swflows.services import SERVICES_KEY

LOG = logging.getLogger(__name__)

#: every atom name starts with this
PREFIX = "swflows"


def atom_name(flow: str, task_name: str, discriminator: str | None = None) -> str:
    """``swflows.<flow>.<Task>[:<discriminator>]``."""
    name = f"{PREFIX}.{flow}.{task_name}"
    return f"{name}:{discriminator}" if discriminator else name


class Task(task.Task):  # type: ignore[misc]
    """A swflows task: named by its flow, receives the run-time services."""

    #: the store keys this task provides by default (subclasses set it)
    default_provides: Any = None
    #: the task waits for the server: a runner parks the flow before it
    #: (suspends the engine, frees the thread) and resumes it when the wait
    #: is over, so the task then finds its outcome at once
    parks: bool = False

    def __init__(
        self,
        flow: str,
        *,
        discriminator: str | None = None,
        rebind: dict[str, str] | Iterable[str] | None = None,
        provides: Any = None,
        inject: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            name=atom_name(flow, type(self).__name__, discriminator),
            rebind=rebind,
            provides=provides if provides is not None else self.default_provides,
            inject=inject,
        )
        self.flow_name = flow


class TransportTask(Task):
    """A task that works through one transport, named with its options.

    Name and options are flow-factory arguments, so a rebuilt flow gets the
    same transport; the transport object itself is looked up at run time.
    """

    def __init__(
        self,
        flow: str,
        transport: str,
        options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(flow, **kwargs)
        self.transport_name = transport
        self.transport_options = dict(options or {})


def is_failure(result: Any) -> bool:
    return isinstance(result, failure.Failure)


def revert_quietly(what: str, action: Callable[[], Any]) -> None:
    """Run a revert step; log instead of raising, so other reverts still run."""
    try:
        action()
    except Exception:
        LOG.warning(
            "could not undo %s; it may need removing by hand", what, exc_info=True
        )


__all__ = [
    "SERVICES_KEY",
    "Task",
    "TransportTask",
    "atom_name",
    "is_failure",
    "revert_quietly",
]
