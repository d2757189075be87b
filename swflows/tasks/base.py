"""The base of every swflows task, its naming rule and its revert contract.

Atom names are persisted API: resumption matches stored atom details to
atoms by name, so every task is named by :func:`atom_name` and a name never
changes once released.

The revert contract, for every task: ``revert(self, result, **kwargs)``
removes what the task makes *by its key* (deployment id and generation),
not only by its recorded result, since a task that failed or was killed
right after its side effect has no result; it treats "not found" as done.
A revert that cleans the cloud never raises and logs whatever it had to
leave behind (:func:`revert_quietly`); one that writes the deployment row
must not give up, and raises once :data:`REVERT_PATIENCE` is spent
(:func:`revert_patiently`): its flow is then kept BROKEN, never forgotten
with its deployment IN_PROGRESS.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

from taskflow import task
from taskflow.types import failure

from swflows import failpoints
from swflows.services import SERVICES_KEY

LOG = logging.getLogger(__name__)

_T = TypeVar("_T")

#: how long a revert that writes the deployment row keeps trying (as long
#: as a publisher keeps trying to publish, :data:`swflows.metadata.
#: PUBLISH_PATIENCE`): a row left IN_PROGRESS by a revert that gave up
#: would strand its deployment
REVERT_PATIENCE = 600.0
#: the longest pause between two tries of a patient revert
REVERT_PAUSE_MAX = 5.0

#: every atom name starts with this
PREFIX = "swflows"
#: the most argument mappings kept (:meth:`Task._build_arg_mapping`)
MAPPINGS_KEPT = 1024

_Mapping = tuple["collections.OrderedDict[str, str]", Any, Any]
#: (class, method, what the task was built with) -> the argument mapping
#: TaskFlow derives from that method's signature
_MAPPINGS: dict[Hashable, _Mapping] = {}
_MAPPINGS_LOCK = threading.Lock()


def atom_name(flow: str, task_name: str, discriminator: str | None = None) -> str:
    """``swflows.<flow>.<Task>[:<discriminator>]``."""
    name = f"{PREFIX}.{flow}.{task_name}"
    return f"{name}:{discriminator}" if discriminator else name


class ArgumentsOnce:
    """Mixed into a TaskFlow task class (before ``taskflow.task.Task``):
    the mapping of its methods' arguments is derived once per class and
    set of arguments it is built with, not for every task built.  TaskFlow
    reads the method's signature for each (about a third of a millisecond
    a task, most of the cost of building a flow, which a runner does for
    every flow it resumes or claims).  Every swflows task has it; a custom
    flow's own tasks may too::

        class Backup(ArgumentsOnce, task.Task):
            def execute(self, server_id): ...
    """

    inject: Any

    def _build_arg_mapping(
        self,
        executor: Callable[..., Any],
        requires: Any = None,
        rebind: Any = None,
        auto_extract: bool = True,
        ignore_list: Any = None,
    ) -> _Mapping:
        """TaskFlow's mapping of ``executor``'s arguments, derived once per
        class and set of arguments given, then copied."""
        key = _mapping_key(
            type(self),
            executor,
            requires,
            rebind,
            auto_extract,
            ignore_list,
            self.inject,
        )
        with _MAPPINGS_LOCK:
            found = _MAPPINGS.get(key) if key is not None else None
        if found is None:
            found = super()._build_arg_mapping(  # type: ignore[misc]
                executor,
                requires=requires,
                rebind=rebind,
                auto_extract=auto_extract,
                ignore_list=ignore_list,
            )
            if key is not None:
                with _MAPPINGS_LOCK:
                    if len(_MAPPINGS) >= MAPPINGS_KEPT:
                        _MAPPINGS.clear()
                    _MAPPINGS[key] = found
        rebound, required, optional = found
        # the sets are read-only (TaskFlow's OrderedSet); the mapping is not
        return collections.OrderedDict(rebound), required, optional


class Task(ArgumentsOnce, task.Task):  # type: ignore[misc]
    """A swflows task: named by its flow, receives the run-time services."""

    #: the store keys this task provides by default (subclasses set it)
    default_provides: Any = None
    #: the task waits for the server: a runner parks the flow before it
    #: (suspends the engine, frees the thread) and resumes it when the wait
    #: is over, so the task then finds its outcome at once
    parks: bool = False
    #: the task publishes its server's metadata document (one publish
    #: serves every deployment of the server written before it began)
    publishes: bool = False
    #: the task writes its deployment's row (a new action's generation):
    #: who waits for that row looks at the store once it succeeds
    writes_row: bool = False

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


def _mapping_key(
    cls: type,
    executor: Callable[..., Any],
    requires: Any,
    rebind: Any,
    auto_extract: bool,
    ignore_list: Any,
    inject: Any,
) -> Hashable | None:
    """What an argument mapping depends on, as a key; None when a part of
    it is not plain names (it is then derived every time)."""

    def names(value: Any) -> Hashable:
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, dict):
            return ("dict", tuple(value.items()))
        if isinstance(value, (set, frozenset)):
            return ("set", tuple(sorted(value)))
        return ("seq", tuple(value))

    try:
        key = (
            cls,
            getattr(executor, "__name__", None),
            names(requires),
            names(rebind),
            bool(auto_extract),
            names(ignore_list),
            names(set(inject)) if inject else None,
        )
        hash(key)
    except TypeError:
        return None
    return key


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


def revert_patiently(
    what: str, action: Callable[[], _T], patience: float | None = None
) -> _T:
    """Run a revert step that must not be given up: try again, with growing
    pauses, for up to ``patience`` seconds (:data:`REVERT_PATIENCE`), then
    raise the last error.  A revert that raises makes TaskFlow end the flow
    FAILURE, which the runner keeps as a BROKEN flow an operator can see,
    rather than a REVERTED one it forgets."""
    deadline = time.monotonic() + (REVERT_PATIENCE if patience is None else patience)
    pause = 0.1
    tries = 0
    while True:
        tries += 1
        try:
            failpoints.hit("revert.row")
            return action()
        except Exception as exc:
            if time.monotonic() + pause > deadline:
                LOG.error("could not undo %s after %d tries: %s", what, tries, exc)
                raise
            if tries == 1:
                LOG.warning("undoing %s failed, trying again: %s", what, exc)
            time.sleep(pause)
            pause = min(pause * 2, REVERT_PAUSE_MAX)


def step_of(flow_failures: Any) -> tuple[str, str]:
    """The step that failed (its task's class name) and its error, from
    the ``flow_failures`` TaskFlow hands a revert."""
    if not flow_failures:
        return "", "unknown error"
    items = (
        flow_failures.items()
        if hasattr(flow_failures, "items")
        else ((None, f) for f in flow_failures)
    )
    for atom, fail in items:
        step = str(atom or "").rpartition(".")[2].partition(":")[0]
        text = str(getattr(fail, "exception_str", "") or fail)
        names = getattr(fail, "_exc_type_names", None) or ()
        kind = str(names[0]).rpartition(".")[2] if names else ""
        return step, f"{kind}: {text}" if kind else text
    return "", "unknown error"


__all__ = [
    "REVERT_PATIENCE",
    "SERVICES_KEY",
    "ArgumentsOnce",
    "Task",
    "TransportTask",
    "atom_name",
    "is_failure",
    "revert_patiently",
    "revert_quietly",
    "step_of",
]
