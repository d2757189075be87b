"""The lifecycle of a Heat-like resource, mapped onto swflows' flows.

An embedder's resource goes through CREATE, UPDATE, DELETE, SUSPEND and
RESUME; each maps onto one swflows call, started without waiting, and a
``check_<action>_complete`` that the embedder polls (Heat's scheduler
calls it about once a second).  A check costs two small queries.  A
Lifecycle given a :class:`~swflows.embedding.Completions` also waits, in
a check given ``wait``, that long at most for an action whose flow waits
for its agent (parked, whichever runner resumes it) to end: the embedder
learns of the outcome as soon as a look of the Completions sees it, and
checks less often while the agent works.  A check raises
:class:`DeploymentFailed` when the action ended FAILED, with the
machine-readable reason (exit code, timeout, cancelled).

==========  ============================  ==================================
embedder    swflows                       complete when
==========  ============================  ==================================
CREATE      ``deploy``                    no flow left, deployment COMPLETE
UPDATE      ``redeploy``                  the same (a replaced deployment:
                                          the new one)
DELETE      ``undeploy``                  no flow left, deployment gone
SUSPEND     ``suspend``                   no flow left, deployment COMPLETE
RESUME      ``resume_deployment``         no flow left, deployment COMPLETE
==========  ============================  ==================================

As in Heat, an action the config does not handle (SUSPEND of a config
without it) does nothing: ``handle_suspend`` returns None and the check
says complete at once.  Waiting for a callback instead of polling: see
:mod:`swflows.embedding.completion`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import tenacity

from swflows import derive, exceptions, model, states
from swflows.embedding.completion import Completion, Completions, action_flows
from swflows.persistence import flow_registry as flow_rows

if TYPE_CHECKING:
    from swflows.api import Swflows

#: the embedder's action -> the swflows call it maps onto
ACTIONS: Final = {
    model.CREATE: "deploy",
    model.UPDATE: "redeploy",
    model.DELETE: "undeploy",
    model.SUSPEND: "suspend",
    model.RESUME: "resume_deployment",
}


#: seconds between the first two looks of :meth:`Lifecycle.settle` (then
#: doubled, up to :data:`SETTLE_MAX_PAUSE`): a flow parks within a few
#: tenths of a second of its start
SETTLE_FIRST_PAUSE: Final = 0.02
SETTLE_MAX_PAUSE: Final = 0.2


class DeploymentFailed(exceptions.SwflowsError):
    """A deployment's action ended FAILED; ``kind`` says why (a ReasonKind)."""

    def __init__(self, deployment: model.Deployment) -> None:
        reason = dict(deployment.reason or {})
        kind = str(reason.get("kind") or "unknown")
        super().__init__(
            f"deployment {deployment.id} {deployment.action} failed: "
            f"{deployment.status_reason or kind}",
            deployment_id=deployment.id,
            kind=kind,
        )
        self.deployment = deployment
        self.kind = kind
        self.reason = reason


class Lifecycle:
    """``handle_<action>`` starts, ``check_<action>_complete`` polls."""

    def __init__(self, sw: Swflows, completions: Completions | None = None) -> None:
        self.sw = sw
        self.completions = completions

    # -- starting ---------------------------------------------------------
    def handle_create(
        self,
        server_id: str,
        config_id: str,
        *,
        input_values: Mapping[str, Any] | None = None,
        name: str | None = None,
        actions: Sequence[str] | None = None,
        signal_transport: str | None = None,
        config_transport: str | None = None,
        timeout: int | None = None,
        deployment_id: str | None = None,
    ) -> str | None:
        """Start the CREATE action; returns the deployment id (the embedder's
        resource id), None when the config does not handle CREATE.

        Given the ``deployment_id`` of a deployment that exists already (a
        create started again after the embedder restarted), nothing new is
        started and that id is returned.
        """
        if deployment_id is not None:
            try:
                return self.sw.show(deployment_id).id
            except exceptions.DeploymentNotFound:
                pass
        if not self._handles(config_id, model.CREATE, actions):
            return None
        try:
            made = self.sw.deploy(
                server_id,
                config_id,
                input_values=input_values,
                name=name,
                actions=actions,
                signal_transport=signal_transport,
                config_transport=config_transport,
                timeout=timeout,
                deployment_id=deployment_id,
                wait=False,
            )
        except exceptions.WaitTimeout as exc:
            return _queued(exc)
        return made.id

    def handle_update(
        self,
        deployment_id: str,
        *,
        input_values: Mapping[str, Any] | None = None,
        config_id: str | None = None,
        timeout: int | None = None,
    ) -> str | None:
        """Start the UPDATE action; returns the deployment id to check (a
        new one when a ``replace_on_change`` input changed), None when the
        config does not handle UPDATE."""
        current = self.sw.show(deployment_id)
        source = config_id or current.source_config_id
        if source is None or not self._handles(source, model.UPDATE, current.actions):
            return None
        try:
            made = self.sw.redeploy(
                deployment_id,
                input_values=input_values,
                config_id=config_id,
                timeout=timeout,
                wait=False,
            )
        except exceptions.WaitTimeout as exc:
            return _queued(exc)
        return made.id

    def handle_delete(self, deployment_id: str, *, timeout: int | None = None) -> None:
        """Start removing the deployment (running its DELETE action, if any).

        A deployment already gone is fine: deleting is idempotent.  One
        whose action is still running (a stack deleted while it creates) is
        cancelled first, as Heat cancels the action in flight when a stack
        is deleted.
        """
        try:
            current = self.sw.show(deployment_id)
            if current.status == states.IN_PROGRESS:
                try:
                    self.sw.cancel(deployment_id, "deleted while in progress")
                except exceptions.InvalidTransition:
                    pass  # it ended meanwhile
            self.sw.undeploy(deployment_id, timeout=timeout, wait=False)
        except exceptions.DeploymentNotFound:
            return

    def handle_suspend(self, deployment_id: str) -> str | None:
        return self._other(deployment_id, model.SUSPEND)

    def handle_resume(self, deployment_id: str) -> str | None:
        return self._other(deployment_id, model.RESUME)

    def _other(self, deployment_id: str, action: str) -> str | None:
        current = self.sw.show(deployment_id)
        source = current.source_config_id
        if source is None or not self._handles(source, action, current.actions):
            return None
        call = getattr(self.sw, ACTIONS[action])
        try:
            made: model.Deployment = call(deployment_id, wait=False)
        except exceptions.WaitTimeout as exc:
            return _queued(exc)
        return made.id

    def _handles(
        self, config_id: str, action: str, actions: Sequence[str] | None
    ) -> bool:
        config = self.sw.get_config(config_id)
        try:
            derive.check_action(config, action, actions)
        except exceptions.ValidationError:
            return False
        return True

    # -- checking ---------------------------------------------------------
    def check_complete(self, deployment_id: str | None, *, wait: float = 0.0) -> bool:
        """True once the action ended COMPLETE; raises DeploymentFailed when
        it ended FAILED.  None (nothing was started) is complete.  With
        ``wait`` (and a Completions), an action waiting for its agent is
        waited for up to that many seconds before the answer."""
        if deployment_id is None:
            return True
        if self._unfinished(deployment_id, wait):
            return False
        current = self.sw.show(deployment_id)
        if current.status == states.FAILED:
            raise DeploymentFailed(current)
        return current.status == states.COMPLETE

    def _unfinished(self, deployment_id: str, wait: float) -> bool:
        """Whether flows still run the deployment's action, once those
        left, all parked, were given ``wait`` seconds to end (a flow at
        work is not waited for: what it does next may need the embedder)."""
        flows = action_flows(self.sw, deployment_id)
        completions = self.completions
        if not (flows and wait > 0 and completions is not None):
            return bool(flows)
        if any(row.state != flow_rows.PARKED for row in flows):
            return True
        ended = threading.Event()

        def told(completion: Completion) -> None:
            ended.set()

        completions.add(deployment_id, told)
        try:
            if not ended.wait(wait):
                return True
        finally:
            completions.discard(deployment_id, told)
        return bool(action_flows(self.sw, deployment_id))

    def settle(self, deployment_id: str | None, timeout: float) -> bool:
        """Wait, ``timeout`` seconds at most, until the deployment's action
        is waiting for its agent (its flow parked, so the server's metadata
        holds it) or has ended; whether it has."""
        if deployment_id is None:
            return True
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_result(lambda parked: not parked),
            stop=tenacity.stop_before_delay(timeout),
            wait=tenacity.wait_exponential(
                multiplier=SETTLE_FIRST_PAUSE, max=SETTLE_MAX_PAUSE
            ),
            retry_error_callback=lambda state: False,
        )
        parked: bool = retrying(
            lambda: all(
                row.state == flow_rows.PARKED
                for row in action_flows(self.sw, deployment_id)
            )
        )
        return parked

    check_create_complete = check_complete
    check_update_complete = check_complete
    check_suspend_complete = check_complete
    check_resume_complete = check_complete

    def check_delete_complete(
        self, deployment_id: str | None, *, wait: float = 0.0
    ) -> bool:
        """True once the deployment is gone (a FAILED DELETE action removes
        it too).  Raises FlowError when the removal reverted and left it.
        ``wait`` as for :meth:`check_complete`."""
        if deployment_id is None:
            return True
        if self._unfinished(deployment_id, wait):
            return False
        try:
            self.sw.show(deployment_id)
        except exceptions.DeploymentNotFound:
            return True
        raise exceptions.FlowError(
            None, f"deployment {deployment_id}: undeploy ended and left it in place"
        )


def _queued(exc: exceptions.WaitTimeout) -> str:
    """The id of an action whose flow is recorded but not started yet
    (no conductor took it in time): ``check_*_complete`` follows it as any
    other, since its flow is there."""
    if exc.started:
        raise exc
    return exc.deployment_id


__all__ = ["ACTIONS", "DeploymentFailed", "Lifecycle"]
