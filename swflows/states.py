"""Deployment statuses, reason kinds and the allowed transitions.

The transition table is the documentation: a status change not listed in
:data:`TRANSITIONS` is refused by :func:`check_transition`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Final

from swflows import exceptions

IN_PROGRESS: Final = "IN_PROGRESS"
COMPLETE: Final = "COMPLETE"
FAILED: Final = "FAILED"

STATUSES: Final = frozenset({IN_PROGRESS, COMPLETE, FAILED})
TERMINAL: Final = frozenset({COMPLETE, FAILED})

#: status -> the statuses it may move to.  ``None`` is "no row yet".
#: A deployment is created IN_PROGRESS (or COMPLETE when nothing will signal);
#: a running one ends COMPLETE or FAILED; a finished one may run a new action.
TRANSITIONS: Final[dict[str | None, frozenset[str]]] = {
    None: frozenset({IN_PROGRESS, COMPLETE}),
    IN_PROGRESS: frozenset({COMPLETE, FAILED}),
    COMPLETE: frozenset({IN_PROGRESS, COMPLETE}),
    FAILED: frozenset({IN_PROGRESS, COMPLETE}),
}


class ReasonKind(enum.StrEnum):
    """Why a deployment ended where it did, machine-readable."""

    #: the agent signalled success
    OUTPUTS_RECEIVED = "outputs_received"
    #: nothing will signal (NO_SIGNAL): complete as soon as published
    NOT_WAITING = "not_waiting"
    #: deploy_status_code was non-zero
    EXIT_CODE = "exit_code"
    #: an output declared ``error_output`` carried a value
    ERROR_OUTPUT = "error_output"
    #: no final signal within the deployment timeout
    TIMEOUT = "timeout"
    #: the server never read its metadata nor said "started"
    NEVER_PICKED_UP = "never_picked_up"
    #: an operator or embedder cancelled it
    CANCELLED = "cancelled"
    #: the server was deleted or went to ERROR while the deployment waited
    SERVER_GONE = "server_gone"
    #: the server's signal was unusable (too large, not a JSON object)
    SIGNAL_REJECTED = "signal_rejected"
    #: the flow could not create what the deployment needs and reverted
    INFRASTRUCTURE = "infrastructure"
    #: swflows failed handling this deployment's own data, again and again
    #: (a stored value it cannot read or write): it was ended rather than
    #: left waiting forever
    INTERNAL_ERROR = "internal_error"
    #: its flow failed and could not undo a step: the flow is kept BROKEN
    #: (``swflows flow list``) for an operator, the action withdrawn
    FLOW_BROKEN = "flow_broken"
    #: IN_PROGRESS with no flow left to end it (found by the watcher's
    #: reconciler): ended rather than left waiting forever, the action
    #: withdrawn
    ORPHANED = "orphaned"


def check_transition(
    current: str | None, new: str, deployment_id: str | None = None
) -> None:
    """Raise :class:`~swflows.exceptions.InvalidTransition` unless allowed."""
    if new not in STATUSES:
        raise exceptions.ValidationError("status", f"unknown status {new!r}")
    if new not in TRANSITIONS.get(current, frozenset()):
        raise exceptions.InvalidTransition(deployment_id, current, new)


def is_terminal(status: str | None) -> bool:
    return status in TERMINAL


#: reason kinds whose action is withdrawn from the server's metadata
WITHDRAWN_KINDS: Final = frozenset(
    {
        ReasonKind.CANCELLED.value,
        ReasonKind.FLOW_BROKEN.value,
        ReasonKind.ORPHANED.value,
    }
)


def withdrawn(status: str | None, reason: Mapping[str, Any] | None) -> bool:
    """Whether an action so ended leaves its server's metadata document.

    A cancelled action must not run on the server any more: its derived
    config is left out of the document, so no agent starts it (again, after
    a restart), and swflows' agent stops it if it is running.
    """
    if status != FAILED or not isinstance(reason, Mapping):
        return False
    return reason.get("kind") in WITHDRAWN_KINDS
