"""A deployment action's outcome: decided from a signal, recorded once.

Every path that ends a running action -- a signal read by the watcher or
the flow's wait step, one delivered through the API or the signal
endpoint, a cancel, a timeout, a flow that could not go on -- writes its
outcome with :func:`record_outcome`, which ends only the action running
now, so the first outcome recorded wins.  :func:`outcome_from_payload` is
how a raw signal becomes an outcome.
"""

from __future__ import annotations

from typing import Any

from swflows import exceptions, masking, signals, states
from swflows.model import Deployment, OutputSpec
from swflows.services import Services

#: the ``reason`` kind of :func:`removed_outcome` (never stored on a row)
REMOVED = "removed"


def record_outcome(
    services: Services,
    deployment_id: str,
    generation: int,
    outcome: signals.Outcome,
) -> bool:
    """Apply ``outcome`` to a running action; False if it had already ended.

    Only the action that is running (its generation, IN_PROGRESS) can be
    ended, so a late or repeated signal, a cancel and a timeout never
    overwrite one another: the first one recorded wins.  What is stored is
    :func:`~swflows.signals.storable_outcome`: the same on every database.
    """
    outcome = signals.storable_outcome(outcome)
    try:
        services.store.update_deployment(
            deployment_id,
            expected_status=states.IN_PROGRESS,
            expected_generation=generation,
            status=outcome.status,
            status_reason=outcome.status_reason,
            reason=dict(outcome.reason),
            output_values=dict(outcome.output_values),
        )
    except exceptions.ConcurrentUpdate as exc:
        if "expected_status" not in exc.fields:
            raise  # the database stayed busy: nothing was decided
        return False
    return True


def outcome_of(deployment: Deployment) -> dict[str, Any]:
    return {
        "status": deployment.status,
        "status_reason": deployment.status_reason,
        "reason": deployment.reason,
        "output_values": deployment.output_values,
    }


def removed_outcome(deployment_id: str) -> dict[str, Any]:
    """What a flow's wait returns when its deployment's record is gone.

    A record is removed only once its action has ended (an undeploy
    refuses a running one), so the flow has nothing left to end: its
    outcome, recorded before, went with the record.  No status is given.
    """
    return {
        "status": None,
        "status_reason": f"deployment {deployment_id} was removed",
        "reason": {"kind": REMOVED},
        "output_values": {},
    }


def outcome_from_payload(
    services: Services, deployment: Deployment, raw: bytes | str | dict[str, Any]
) -> signals.Outcome | None:
    """The outcome a raw signal gives, None for a progress signal.

    The secrets the server was given (its signal URL's signature, its
    password, the values of hidden inputs) and anything shaped like a
    signature or a token are masked in the values it sent, so the outcome
    can be stored and logged.
    """
    try:
        payload = signals.parse_payload(raw)
    except exceptions.SignalRejected as exc:
        return signals.rejected_outcome(str(exc))
    if payload is None or signals.is_progress(payload):
        return None
    outputs: tuple[OutputSpec, ...] = ()
    secrets: frozenset[str] = frozenset()
    if deployment.config_id:
        derived = services.store.get_config(deployment.config_id)
        outputs = derived.outputs
        secrets = masking.known_secrets(
            masking.input_values(derived.inputs), masking.hidden_names(derived.inputs)
        )
    return signals.outcome(masking.mask_outputs(payload, secrets), outputs)
