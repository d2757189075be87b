"""Tasks that write the deployment row."""

from __future__ import annotations

import datetime
import logging
import math
import time
from typing import Any

from swflows import (
    derive,
    exceptions,
    failpoints,
    metadata,
    model,
    projects,
    states,
    trusts,
)
from swflows.services import Services
from swflows.tasks import base, config, identity

LOG = logging.getLogger(__name__)

NOT_WAITING = "Not waiting for outputs signal"
DEPLOY_DATA_AVAILABLE = "Deploy data available"


def _initial_status(waits: bool) -> tuple[str, str, dict[str, Any] | None]:
    if waits:
        return states.IN_PROGRESS, DEPLOY_DATA_AVAILABLE, None
    return (
        states.COMPLETE,
        NOT_WAITING,
        {"kind": states.ReasonKind.NOT_WAITING.value},
    )


class _PublishingTask(base.Task):
    writes_row = True

    def __init__(
        self,
        flow: str,
        *,
        waits: bool = True,
        config_transport: str,
        config_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(flow, **kwargs)
        self.waits = waits
        self.config_transport = config_transport
        self.config_options = dict(config_options or {})

    def republish(self, services: Services, server_id: str) -> None:
        """After a revert: publish to the server's channel, if it still has one."""
        base.revert_quietly(
            f"metadata of server {server_id}",
            lambda: metadata.publish_server(
                services,
                server_id,
                self.config_transport,
                self.config_options,
                create=False,
            ),
        )


class CreateDeployment(_PublishingTask):
    """Insert the deployment row pointing at its derived config."""

    default_provides = "action_started"

    def execute(
        self,
        services: Services,
        deployment_id: str,
        server_id: str,
        derived_config_id: str,
        source_config_id: str | None,
        action: str,
        input_values: dict[str, Any],
        name: str | None,
        timeout: int,
        generation: int,
        signal_transport: str,
        parent_id: str | None = None,
        actions: list[str] | None = None,
    ) -> float:
        failpoints.hit("deployment.create")
        status, reason_text, reason = _initial_status(self.waits)
        extra: dict[str, Any] = {"actions": tuple(actions)} if actions else {}
        started = time.time()
        # one transaction: a row of this id stored already (by this step's
        # run before a crash) is returned as it is, not written again
        stored = services.store.create_deployment(
            model.Deployment(
                id=deployment_id,
                server_id=server_id,
                config_id=derived_config_id,
                source_config_id=source_config_id,
                action=action,
                status=status,
                status_reason=reason_text,
                reason=reason,
                input_values=dict(input_values),
                signal_transport=signal_transport,
                name=name,
                generation=generation,
                timeout=timeout,
                parent_id=parent_id,
                **extra,
            ),
            keep_existing=True,
        )
        if stored.generation != generation:
            raise exceptions.ValidationError(
                "deployment_id", f"deployment {deployment_id} already exists"
            )
        # rows keep whole seconds: one made in an earlier second than this
        # call is its first run's, whose action started then
        made_at = _epoch(stored.creation_time)
        return made_at if made_at < math.floor(started) else started

    def revert(
        self,
        result: Any,
        services: Services,
        deployment_id: str,
        server_id: str,
        generation: int,
        action: str,
        flow_failures: Any = None,
        **kwargs: Any,
    ) -> None:
        """Keep the row this flow made, FAILED, naming the step that failed
        and why (as Heat keeps a resource CREATE_FAILED): the user finds
        out what happened, and deletes the record.  It points at no config,
        so the server's metadata drops it; its owner row and trust stay
        with it (an undeploy removes them)."""
        step, error = base.step_of(flow_failures)
        base.revert_patiently(
            f"deployment {deployment_id}",
            lambda: fail_new_deployment(
                services, deployment_id, generation, action, step, error
            ),
        )
        self.republish(services, server_id)


def fail_new_deployment(
    services: Services,
    deployment_id: str,
    generation: int,
    action: str,
    step: str,
    error: str,
) -> None:
    """End a deployment a reverted flow made FAILED, kind ``infrastructure``,
    unless it is not that flow's (another generation) or its action ended
    on the server's own signal (it did run)."""
    for _ in range(3):  # a signal or a cancel may end it meanwhile
        try:
            row = services.store.get_deployment(deployment_id)
        except exceptions.DeploymentNotFound:
            return
        if row.generation != generation:
            return
        reason = dict(row.reason or {})
        if row.is_terminal and not (
            row.config_id is not None
            and reason.get("kind") == states.ReasonKind.NOT_WAITING.value
        ):
            return  # its outcome was recorded: the server ran it
        if row.status == states.COMPLETE:
            # NO_SIGNAL: COMPLETE from the start, never published
            try:
                services.store.update_deployment(
                    deployment_id,
                    expected_status=states.COMPLETE,
                    expected_generation=generation,
                    status=states.IN_PROGRESS,
                )
            except exceptions.ConcurrentUpdate:
                continue
        if _end_failed(services, deployment_id, generation, action, step, error, None):
            return
    raise _kept_changing(deployment_id)


def _end_failed(
    services: Services,
    deployment_id: str,
    generation: int,
    action: str,
    step: str,
    error: str,
    config_id: str | None,
) -> bool:
    """End the running action FAILED, kind ``infrastructure``, naming the
    step and the error, pointing at ``config_id``; False if it changed
    meanwhile (a compare-and-set on status and generation)."""
    where = f" at {step}" if step else ""
    try:
        services.store.update_deployment(
            deployment_id,
            expected_status=states.IN_PROGRESS,
            expected_generation=generation,
            status=states.FAILED,
            status_reason=f"{action} failed{where}: {error}",
            reason={
                "kind": states.ReasonKind.INFRASTRUCTURE.value,
                "step": step or None,
                "error": error,
            },
            config_id=config_id,
        )
    except exceptions.ConcurrentUpdate:
        return False
    return True


def _kept_changing(deployment_id: str) -> exceptions.ConcurrentUpdate:
    return exceptions.ConcurrentUpdate(
        f"deployment {deployment_id} kept changing while its flow reverted",
        deployment_id=deployment_id,
    )


class StartAction(_PublishingTask):
    """Point an existing deployment at this action's derived config.

    Provides the config it pointed at before (found by generation, so a
    re-run knows it too), which the flow deletes once the new one is
    published.  A revert, keyed by the generation (so it also undoes an
    update whose result was never recorded), tells the truth:

    * an action still running is marked FAILED with the infrastructure
      error and the row points back at the previous config.  Its generation
      stays used up: the next action gets a new derived config id and new
      signal store names, so neither an agent that saw this action's config
      (Heat's agents skip a config id they have run) nor a late signal to
      its store can be taken for the next action;
    * an action that already ended (its signal, a timeout or a cancel was
      recorded) keeps its outcome, since the server did run it; only the
      config it replaced is dropped, as the flow would have done.
    """

    default_provides = ("action_started", "previous_config_id")

    def execute(
        self,
        services: Services,
        deployment_id: str,
        derived_config_id: str,
        action: str,
        input_values: dict[str, Any],
        generation: int,
        timeout: int,
        source_config_id: str | None,
    ) -> tuple[float, str | None]:
        current = services.store.get_deployment(deployment_id)
        if current.generation == generation and current.config_id == derived_config_id:
            # a re-run
            previous = previous_config(services, deployment_id, generation)
            return _epoch(current.updated_time), previous
        if current.generation != generation - 1:
            raise exceptions.ConcurrentUpdate(
                f"deployment {deployment_id} is at generation {current.generation}"
                f", not {generation - 1}: another action started",
                deployment_id=deployment_id,
            )
        status, reason_text, reason = _initial_status(self.waits)
        try:
            updated = services.store.update_deployment(
                deployment_id,
                expected_generation=generation - 1,
                status=status,
                status_reason=reason_text,
                reason=reason,
                config_id=derived_config_id,
                source_config_id=source_config_id,
                action=action,
                input_values=dict(input_values),
                output_values={},
                generation=generation,
                timeout=timeout,
            )
        except exceptions.ConcurrentUpdate:
            # a write whose commit was not acknowledged (a connection reset
            # as it committed) is tried again by the store, and the second
            # try finds the first one's row: this action's own generation
            # and derived config (unique to it) are proof it started
            updated = services.store.get_deployment(deployment_id)
            if not (
                updated.generation == generation
                and updated.config_id == derived_config_id
            ):
                raise
        return _epoch(updated.updated_time), current.config_id

    def revert(
        self,
        result: Any,
        services: Services,
        deployment_id: str,
        server_id: str,
        generation: int,
        action: str,
        flow_failures: Any = None,
        **kwargs: Any,
    ) -> None:
        step, why = base.step_of(flow_failures)

        def restore() -> None:
            if result and not base.is_failure(result):
                previous = result[1]
            else:  # the update may have happened without its result recorded
                previous = previous_config(services, deployment_id, generation)
            for _ in range(3):  # again if a signal ends the action meanwhile
                try:
                    row = services.store.get_deployment(deployment_id)
                except exceptions.DeploymentNotFound:
                    return  # removed since (an undeploy got past the row)
                if row.generation != generation:
                    return  # this action never started
                if row.is_terminal:
                    if previous and previous != row.config_id:
                        config.delete_config(services, previous)
                    return
                if _end_failed(
                    services, deployment_id, generation, action, step, why, previous
                ):
                    return
            raise _kept_changing(deployment_id)

        base.revert_patiently(f"deployment {deployment_id}", restore)
        self.republish(services, server_id)


class DeleteDeployment(_PublishingTask):
    """Delete the deployment row and republish the server without it.

    A removal cannot be undone, so once the row is gone a revert finishes
    what the flow would have removed after it (the derived config
    ``config_id`` and the stack user), instead of leaving them with
    nothing pointing at them; while the row is there it does nothing.
    """

    def __init__(self, flow: str, *, stack_user: bool = False, **kwargs: Any) -> None:
        super().__init__(flow, **kwargs)
        self.stack_user = stack_user

    def execute(
        self,
        services: Services,
        deployment_id: str,
        server_id: str,
        config_id: str | None,
    ) -> None:
        # its signal stores are gone: the last thing that needed its trust
        trusts.release(services, projects.DEPLOYMENT, deployment_id)
        # remembered as deleted while a signal URL it handed out is valid
        services.store.delete_deployment(
            deployment_id,
            missing_ok=True,
            remember=float(services.conf.tempurl_grace_period),
        )
        # the server may be unenrolled as soon as the row is gone: no
        # channel is made for it, and one removed meanwhile stays removed
        metadata.publish_server(
            services,
            server_id,
            self.config_transport,
            self.config_options,
            create=False,
        )

    def revert(
        self,
        result: Any,
        services: Services,
        deployment_id: str,
        server_id: str,
        config_id: str | None,
        **kwargs: Any,
    ) -> None:
        def row_gone() -> bool:
            try:
                services.store.get_deployment(deployment_id)
            except exceptions.DeploymentNotFound:
                return True
            return False

        if not base.revert_patiently(f"deployment {deployment_id}", row_gone):
            return
        if config_id:
            base.revert_quietly(
                f"derived config {config_id}",
                lambda: config.delete_config(services, config_id),
            )
        self.republish(services, server_id)
        if self.stack_user:
            # patient, and raised at last: the flow is then kept BROKEN,
            # never forgotten with the user left behind
            identity.delete_stack_user(services, deployment_id)


def previous_config(
    services: Services, deployment_id: str, generation: int
) -> str | None:
    """The derived config of the latest action before ``generation`` that stays.

    Usually generation - 1's; a reverted action used up its generation and
    its config is gone, so earlier ones are looked at in turn.
    """
    for earlier in range(generation - 1, 0, -1):
        config_id = derive.derived_config_id(deployment_id, earlier)
        try:
            return str(services.store.get_config(config_id).id)
        except exceptions.ConfigNotFound:
            continue
    return None


def _epoch(when: Any) -> float:
    if when is None:
        return time.time()
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return float(when.timestamp())
