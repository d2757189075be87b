"""What an action returns: a deployment, or a mistral-lib error result."""

from __future__ import annotations

import logging
from typing import Any, Final

from mistral_lib.actions import types

from swflows import callbacks, exceptions, model

LOG = logging.getLogger(__name__)


_ERROR_KINDS: Final[tuple[tuple[type[BaseException], str], ...]] = (
    (exceptions.WaitTimeout, "wait_timeout"),
    (exceptions.SignalRejected, "signal_rejected"),
    (exceptions.ValidationError, "invalid_input"),
    (exceptions.GroupBusy, "group_busy"),
    (exceptions.NotFound, "not_found"),
    (exceptions.ConfigInUse, "config_in_use"),
    (exceptions.InvalidTransition, "invalid_transition"),
    (exceptions.NotSupported, "not_supported"),
    (exceptions.TransportError, "transport_error"),
    (exceptions.CloudError, "cloud_error"),
    (exceptions.FlowError, "flow_error"),
)


def error_of(exc: BaseException) -> dict[str, Any]:
    """The JSON error for an exception: its kind and message, no traceback."""
    if not isinstance(exc, exceptions.SwflowsError):
        # not ours: its text may hold anything, so only its type is told
        return {"kind": "internal_error", "message": type(exc).__name__}
    kind = next((k for cls, k in _ERROR_KINDS if isinstance(exc, cls)), "error")
    out: dict[str, Any] = {"kind": kind, "message": exc.message}
    if exc.retryable:
        out["retryable"] = True
    for name in ("field", "deployment_id", "ident"):
        value = exc.fields.get(name)
        if isinstance(value, str):
            out[name] = value
    if isinstance(exc, exceptions.WaitTimeout):
        # false: no flow wrote the deployment yet (it is queued); a show
        # of it says not_found until it starts
        out["started"] = exc.started
    return out


failure_of = callbacks.failure_of


def outcome_of(deployment: model.Deployment) -> types.Result:
    """A terminal deployment as a Mistral result."""
    state, output = callbacks.outcome(callbacks.DEPLOYMENT, deployment.id, deployment)
    if state == callbacks.ERROR:
        return types.Result(error=output)
    return types.Result(data=output)
