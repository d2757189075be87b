"""The single-deployment actions: deploy, redeploy, trigger, undeploy, show, cancel."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any, Final

from mistral_lib import actions
from mistral_lib.actions import types

from swflows import callbacks, exceptions, model, trusts
from swflows.api import Swflows
from swflows.embedding.completion import Completions
from swflows.embedding.mistral.callback import (
    callback_url,
    caller_context,
    drop_trust,
    hold_trust,
    name_result,
)
from swflows.embedding.mistral.instances import instance
from swflows.embedding.mistral.results import error_of, outcome_of
from swflows.engine.outbox import Outbox
from swflows.persistence import flow_registry as flow_rows

if TYPE_CHECKING:
    from oslo_context.context import RequestContext

LOG = logging.getLogger(__name__)

#: seconds a synchronous action waits past the deployment's own timeout
WAIT_GRACE: Final = 60


#: inputs of the actions that are text when given
_TEXT_INPUTS: Final = (
    "server_id",
    "config_id",
    "deployment_id",
    "name",
    "action",
    "signal_transport",
    "config_transport",
    "reason",
)


def _check_inputs(action: Any) -> None:
    """Refuse an input of the wrong JSON type before anything is done, so
    it is ``invalid_input`` naming the input, not an internal error."""
    for field in _TEXT_INPUTS:
        value = getattr(action, field, None)
        if value is not None and (not isinstance(value, str) or not value):
            raise exceptions.ValidationError(field, "must be a non-empty string")
    timeout = getattr(action, "timeout", None)
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0
    ):
        raise exceptions.ValidationError("timeout", "must be a positive integer")
    values = getattr(action, "input_values", None)
    if values is not None and not isinstance(values, dict):
        raise exceptions.ValidationError("input_values", "must be an object")
    names = getattr(action, "actions", None)
    if names is not None and (
        not isinstance(names, list | tuple)
        or not all(isinstance(n, str) for n in names)
    ):
        raise exceptions.ValidationError("actions", "must be a list of strings")


class _SwflowsAction(actions.Action):  # type: ignore[misc]
    """Common inputs: ``config_file``, ``wait``, ``wait_timeout``,
    ``callback_base_url``."""

    #: whether ``wait: false`` makes the action asynchronous
    can_wait = True
    #: how the deployment's end reads as the asynchronous result
    shape = callbacks.DEPLOYMENT

    def __init__(
        self,
        config_file: str | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
        callback_base_url: str | None = None,
    ) -> None:
        super().__init__()
        self.config_file = config_file
        self.wait = wait
        self.wait_timeout = wait_timeout
        self.callback_base_url = callback_base_url
        #: the caller's request context, when swflows makes trusts (see run)
        self.request_context: RequestContext | None = None

    def is_sync(self) -> bool:
        return bool(self.wait) or not self.can_wait

    def run(self, context: Any) -> Any:
        try:
            if not isinstance(self.wait, bool):
                raise exceptions.ValidationError("wait", "must be true or false")
            _check_inputs(self)
            sw, completions = instance(self.config_file)
            security = getattr(context, "security", None)
            token = getattr(security, "auth_token", None)
            self.request_context = caller_context(sw, token)
            if self.is_sync():
                return self.call(sw, True)
            return self._start_async(sw, completions, context, token)
        except Exception as exc:
            return types.Result(error=error_of(exc))

    def _start_async(
        self, sw: Swflows, completions: Completions, context: Any, token: str | None
    ) -> None:
        """Start the call and write down where its result goes, with the
        deployment: whichever process sees it end sends it (this one's
        completions first; the elected watcher if this process is gone)."""
        url = callback_url(context, self.callback_base_url)
        result_id = str(uuid.uuid4())
        # the result goes through a trust when swflows makes them: the
        # caller's token may be gone by then
        key = trusts.callback_key(None, result_id)
        held = self.request_context is not None and hold_trust(
            sw, self.request_context, key
        )
        try:
            started = self._start(sw)
        except BaseException:
            if held:
                drop_trust(sw, key)
            raise
        deployment_id = str(started.data["id"])
        if held:
            key = name_result(sw, key, deployment_id, result_id)
        sw.store.add_result(
            result_id,
            deployment_id,
            shape=self.shape,
            url=url,
            token=None if held else token,
            trust_key=key if held else None,
        )
        outbox = Outbox(sw.services, flow_rows.FlowRegistry(sw.store))
        completions.add(deployment_id, lambda _done: outbox.send(result_id))

    def _start(self, sw: Swflows) -> types.Result:
        """:meth:`call` without waiting.  An action whose flow no conductor
        started in time is recorded all the same and runs later: its
        result is reported when it ends, as any other's."""
        try:
            return self.call(sw, False)
        except exceptions.WaitTimeout as exc:
            if exc.started:
                raise
            return types.Result(data={"id": exc.deployment_id})

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        """Run the call; with ``wait`` return the final result, else a
        result whose data names the deployment started."""
        raise NotImplementedError

    def _wait_timeout(self, sw: Swflows, timeout: int | None) -> float:
        if self.wait_timeout is not None:
            value = self.wait_timeout
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise exceptions.ValidationError("wait_timeout", "must be a number")
            if value <= 0:
                raise exceptions.ValidationError("wait_timeout", "must be positive")
            return float(value)
        return float((timeout or sw.conf.deployment_timeout) + WAIT_GRACE)

    @staticmethod
    def _result(deployment: model.Deployment, wait: bool, limit: float) -> types.Result:
        if not wait:
            return types.Result(data=deployment.to_dict())
        if not deployment.is_terminal:
            raise exceptions.WaitTimeout(deployment.id, limit)
        return outcome_of(deployment)


class DeployAction(_SwflowsAction):
    """Deploy a config to a server; the result is the deployment.

    Given a ``deployment_id`` that exists already (the action run again
    after an executor restart), it is not deployed twice: its current
    state is waited for and returned.
    """

    def __init__(
        self,
        server_id: str,
        config_id: str,
        input_values: dict[str, Any] | None = None,
        name: str | None = None,
        action: str = model.CREATE,
        actions: list[str] | None = None,
        signal_transport: str | None = None,
        config_transport: str | None = None,
        timeout: int | None = None,
        deployment_id: str | None = None,
        config_file: str | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
        callback_base_url: str | None = None,
    ) -> None:
        super().__init__(config_file, wait, wait_timeout, callback_base_url)
        self.server_id = server_id
        self.config_id = config_id
        self.input_values = input_values
        self.name = name
        self.action = action
        self.actions = actions
        self.signal_transport = signal_transport
        self.config_transport = config_transport
        self.timeout = timeout
        self.deployment_id = deployment_id

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        limit = self._wait_timeout(sw, self.timeout)
        if self.deployment_id is not None:
            try:
                sw.show(self.deployment_id, context=self.request_context)
            except exceptions.DeploymentNotFound:
                pass
            else:
                found = (
                    sw.wait(self.deployment_id, limit)
                    if wait
                    else sw.show(self.deployment_id, context=self.request_context)
                )
                return self._result(found, wait, limit)
        made = sw.deploy(
            self.server_id,
            self.config_id,
            input_values=self.input_values,
            name=self.name,
            action=self.action,
            actions=self.actions,
            signal_transport=self.signal_transport,
            config_transport=self.config_transport,
            timeout=self.timeout,
            deployment_id=self.deployment_id,
            wait=wait,
            wait_timeout=limit,
            context=self.request_context,
        )
        return self._result(made, wait, limit)


class RedeployAction(_SwflowsAction):
    """Run UPDATE (or ``action``) with new inputs or a new config."""

    def __init__(
        self,
        deployment_id: str,
        input_values: dict[str, Any] | None = None,
        config_id: str | None = None,
        action: str = model.UPDATE,
        timeout: int | None = None,
        config_file: str | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
        callback_base_url: str | None = None,
    ) -> None:
        super().__init__(config_file, wait, wait_timeout, callback_base_url)
        self.deployment_id = deployment_id
        self.input_values = input_values
        self.config_id = config_id
        self.action = action
        self.timeout = timeout

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        limit = self._wait_timeout(sw, self.timeout)
        made = sw.redeploy(
            self.deployment_id,
            input_values=self.input_values,
            config_id=self.config_id,
            action=self.action,
            timeout=self.timeout,
            wait=wait,
            wait_timeout=limit,
            context=self.request_context,
        )
        return self._result(made, wait, limit)


class TriggerAction(_SwflowsAction):
    """Run an action (BACKUP...) of a deployment's config, as a new deployment."""

    def __init__(
        self,
        deployment_id: str,
        action: str,
        input_values: dict[str, Any] | None = None,
        signal_transport: str | None = None,
        timeout: int | None = None,
        config_file: str | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
        callback_base_url: str | None = None,
    ) -> None:
        super().__init__(config_file, wait, wait_timeout, callback_base_url)
        self.deployment_id = deployment_id
        self.action = action
        self.input_values = input_values
        self.signal_transport = signal_transport
        self.timeout = timeout

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        limit = self._wait_timeout(sw, self.timeout)
        made = sw.trigger(
            self.deployment_id,
            self.action,
            input_values=self.input_values,
            signal_transport=self.signal_transport,
            timeout=self.timeout,
            wait=wait,
            wait_timeout=limit,
            context=self.request_context,
        )
        return self._result(made, wait, limit)


class UndeployAction(_SwflowsAction):
    """Remove a deployment, running its DELETE action when the config has one."""

    shape = callbacks.REMOVAL

    def __init__(
        self,
        deployment_id: str,
        timeout: int | None = None,
        config_file: str | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
        callback_base_url: str | None = None,
    ) -> None:
        super().__init__(config_file, wait, wait_timeout, callback_base_url)
        self.deployment_id = deployment_id
        self.timeout = timeout

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        limit = self._wait_timeout(sw, self.timeout)
        sw.undeploy(
            self.deployment_id,
            timeout=self.timeout,
            wait=wait,
            wait_timeout=limit,
            context=self.request_context,
        )
        if not wait:
            return types.Result(data={"id": self.deployment_id})
        return self.removed(self.deployment_id)

    @staticmethod
    def removed(deployment_id: str) -> types.Result:
        return types.Result(data={"id": deployment_id, "undeployed": True})


class ShowAction(_SwflowsAction):
    """A deployment as it is now."""

    can_wait = False

    def __init__(self, deployment_id: str, config_file: str | None = None) -> None:
        super().__init__(config_file)
        self.deployment_id = deployment_id

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        return types.Result(
            data=sw.show(self.deployment_id, context=self.request_context).to_dict()
        )


class CancelAction(_SwflowsAction):
    """End a running action FAILED, kind ``cancelled``; the result is the
    deployment so ended (a success: the cancel did what was asked)."""

    can_wait = False

    def __init__(
        self,
        deployment_id: str,
        reason: str | None = None,
        config_file: str | None = None,
    ) -> None:
        super().__init__(config_file)
        self.deployment_id = deployment_id
        self.reason = reason

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        return types.Result(
            data=sw.cancel(
                self.deployment_id, self.reason, context=self.request_context
            ).to_dict()
        )
