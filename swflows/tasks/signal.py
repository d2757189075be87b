"""Tasks for a deployment action's signal: its store, and waiting for it."""

from __future__ import annotations

import logging
import time
from typing import Any

import tenacity

from swflows import exceptions, metadata, signals, states
from swflows.clients.identity import StackUser
from swflows.outcomes import (
    outcome_from_payload,
    outcome_of,
    record_outcome,
    removed_outcome,
)
from swflows.services import Services
from swflows.tasks import base
from swflows.transports.base import SignalRef, SignalTransport

LOG = logging.getLogger(__name__)


class _TransportTask(base.TransportTask):
    def transport(self, services: Services) -> SignalTransport:
        return services.signal_transport(self.transport_name, self.transport_options)


class CreateSignalStore(_TransportTask):
    """Make the place the server will signal to (object, queue, or nothing)."""

    default_provides = "signal_store"

    def execute(
        self,
        services: Services,
        deployment_id: str,
        generation: int,
        timeout: int,
        stack_user: dict[str, Any] | None,
    ) -> dict[str, Any]:
        ref = SignalRef(deployment_id, generation, timeout)
        transport = self.transport(services)
        services.check_fence()
        store = transport.create_store(services, ref, StackUser.from_dict(stack_user))
        return {"ref": ref.to_dict(), **store}

    def revert(
        self,
        result: Any,
        services: Services,
        deployment_id: str,
        generation: int,
        timeout: int,
        stack_user: dict[str, Any] | None,
        **kwargs: Any,
    ) -> None:
        transport = self.transport(services)
        if base.is_failure(result) or not result:
            # the store may exist even though its creation was not recorded
            ref = SignalRef(deployment_id, generation, timeout)
            result = transport.describe_store(ref, StackUser.from_dict(stack_user))
        store = result
        base.revert_quietly(
            f"signal store {store}", lambda: delete_store(services, transport, store)
        )


class DeleteSignalStore(_TransportTask):
    """Remove the signal store once its signal has been read."""

    def execute(self, services: Services, signal_store: dict[str, Any]) -> None:
        delete_store(services, self.transport(services), signal_store)


def delete_store(
    services: Services, transport: SignalTransport, store: dict[str, Any]
) -> None:
    """Remove a signal store, unless the flow removing it was lost: its new
    owner may be waiting on a store of the same name (a re-run makes it
    again)."""
    services.check_fence()
    transport.delete_store(services, store)


class AwaitSignal(_TransportTask):
    """End the action from its signal, or from its timeout.

    The deployment row is the truth: whatever ended the action first (a
    signal read here or by the runner's watcher, a signal pushed through the
    API, a cancel, a timeout) is what this task returns.  Under swflows'
    runner the flow is parked before this task, so it runs only once the
    action has ended; in a plain TaskFlow engine it polls until then.  A
    record removed in between (an undeploy right after a cancel) gives
    :func:`~swflows.outcomes.removed_outcome`: the action had ended.
    """

    default_provides = "outcome"
    parks = True

    def __init__(
        self,
        flow: str,
        transport: str,
        options: dict[str, Any] | None = None,
        *,
        config_transport: str | None = None,
        config_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(flow, transport, options, **kwargs)
        #: how the server's metadata is published (None: as configured)
        self.config_transport = config_transport
        self.config_options = None if config_options is None else dict(config_options)

    def execute(
        self,
        services: Services,
        deployment_id: str,
        generation: int,
        timeout: int,
        signal_store: dict[str, Any],
        action_started: float,
    ) -> dict[str, Any]:
        transport = self.transport(services)
        deadline = action_started + timeout
        conf = services.conf
        interval = float(conf.watcher.poll_interval)

        def check() -> dict[str, Any] | None:
            return check_signal(
                services,
                transport,
                deployment_id,
                generation,
                signal_store,
                deadline,
                timeout,
            )

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_result(lambda result: result is None),
            wait=tenacity.wait_exponential(
                multiplier=interval,
                min=interval,
                max=float(conf.watcher.max_poll_interval),
                exp_base=float(conf.watcher.backoff_multiplier),
            )
            + tenacity.wait_random(0, interval * float(conf.watcher.poll_jitter)),
        )
        result = retrying(check)
        assert result is not None
        if states.withdrawn(result["status"], result["reason"]):
            metadata.withdraw_cancelled(
                services, deployment_id, self.config_transport, self.config_options
            )
        return result


def check_signal(
    services: Services,
    transport: SignalTransport,
    deployment_id: str,
    generation: int,
    signal_store: dict[str, Any],
    deadline: float,
    timeout: int,
) -> dict[str, Any] | None:
    """One look at a waiting action; its outcome once it has ended, else None
    (also when the database stayed busy: the next look tries again)."""
    try:
        return _look(
            services,
            transport,
            deployment_id,
            generation,
            signal_store,
            deadline,
            timeout,
        )
    except exceptions.ConcurrentUpdate:
        return None


def _look(
    services: Services,
    transport: SignalTransport,
    deployment_id: str,
    generation: int,
    signal_store: dict[str, Any],
    deadline: float,
    timeout: int,
) -> dict[str, Any] | None:
    try:
        deployment = services.store.get_deployment(deployment_id)
    except exceptions.DeploymentNotFound:
        # undeployed once its action ended (a cancel, then at once an
        # undeploy): the flow only removes its store and ends
        return removed_outcome(deployment_id)
    if deployment.generation != generation or deployment.is_terminal:
        return outcome_of(deployment)
    stage = None  # a pushed signal's transport cannot tell
    if transport.pulled:
        stage = signals.PUBLISHED
        read = transport.read(services, signal_store)
        if read.payload is not None:
            outcome = outcome_from_payload(services, deployment, read.payload)
            if outcome is not None:
                record_outcome(services, deployment_id, generation, outcome)
                return outcome_of(services.store.get_deployment(deployment_id))
            stage = signals.STARTED  # its "started" signal stays in the store
    if time.time() >= deadline:
        record_outcome(
            services,
            deployment_id,
            generation,
            signals.timeout_outcome(timeout, stage),
        )
        return outcome_of(services.store.get_deployment(deployment_id))
    return None
