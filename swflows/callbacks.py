"""A result an outside caller waits for, as it is sent when its
deployment's action ends (pure: no I/O).

A Mistral action's result is PUT to its action execution as ``{"state":
"SUCCESS" | "ERROR", "output": ...}``: the output is the deployment (its
:meth:`~swflows.model.Deployment.to_dict`), or for an undeploy ``{"id":
..., "undeployed": true}``; an error is ``{"kind": ..., "message": ...}``
(the deployment's reason kind when its action ended FAILED, with the
deployment under ``deployment``).
"""

from __future__ import annotations

from typing import Any, Final

from swflows import model, states

#: the deployment is the result (deploy, redeploy, trigger)
DEPLOYMENT: Final = "deployment"
#: the deployment's removal is the result (undeploy)
REMOVAL: Final = "removal"
SHAPES: Final = frozenset({DEPLOYMENT, REMOVAL})

SUCCESS: Final = "SUCCESS"
ERROR: Final = "ERROR"


def failure_of(deployment: model.Deployment) -> dict[str, Any]:
    """The error for a deployment whose action ended FAILED."""
    reason = dict(deployment.reason or {})
    return {
        "kind": str(reason.get("kind") or "failed"),
        "message": deployment.status_reason,
        "deployment": deployment.to_dict(),
    }


def outcome(
    shape: str,
    deployment_id: str,
    deployment: model.Deployment | None,
    broken: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """``(state, output)`` of a result once no flow works on the
    deployment: ``deployment`` is its last state (None: removed),
    ``broken`` what set its flow aside when one could not finish."""
    if broken is not None:
        return ERROR, {"kind": "flow_error", "message": broken}
    if shape == REMOVAL:
        if deployment is None:
            return SUCCESS, {"id": deployment_id, "undeployed": True}
        return ERROR, {
            "kind": "flow_error",
            "message": f"deployment {deployment_id} was not removed",
            "deployment": deployment.to_dict(),
        }
    if deployment is None:
        return ERROR, {
            "kind": "not_found",
            "message": f"deployment {deployment_id} was removed",
        }
    if deployment.status == states.FAILED:
        return ERROR, failure_of(deployment)
    return SUCCESS, deployment.to_dict()


def body(state: str, output: Any) -> dict[str, Any]:
    """The PUT's body, as Mistral's action executions take it."""
    return {"state": state, "output": output}


__all__ = [
    "DEPLOYMENT",
    "ERROR",
    "REMOVAL",
    "SHAPES",
    "SUCCESS",
    "body",
    "failure_of",
    "outcome",
]
