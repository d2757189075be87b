"""The facade's deployments: deploy, redeploy, undeploy, trigger, signal, cancel.

Each operation checks its input, resolves its plan (:mod:`swflows.api.plans`)
and starts a flow on the runner; :mod:`swflows.api.results` waits for it.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from swflows import (
    bootdata,
    derive,
    exceptions,
    metadata,
    model,
    outcomes,
    policies,
    projects,
    signals,
    states,
)
from swflows.api.base import FIRST_GENERATION, checked_input_values
from swflows.api.idempotence import Idempotence
from swflows.api.plans import Plans

if TYPE_CHECKING:
    from oslo_context.context import RequestContext

    from swflows.flows import common


class Deployments(Plans, Idempotence):
    """Starts the flows of single-server deployments."""

    def deploy(
        self,
        server_id: str,
        config_id: str,
        *,
        input_values: Mapping[str, Any] | None = None,
        name: str | None = None,
        action: str = model.CREATE,
        actions: Sequence[str] | None = None,
        signal_transport: str | None = None,
        config_transport: str | None = None,
        timeout: int | None = None,
        deployment_id: str | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
        context: RequestContext | None = None,
    ) -> model.Deployment:
        """Deploy ``config_id`` to ``server_id``: its ``action`` (CREATE) runs.

        With ``context``, the deployment is its project's, and the server's
        deployment policy must admit that project and config (Forbidden
        naming the rule otherwise).

        A ``deployment_id`` the caller chose makes the call idempotent: made
        again with the same server, config, action and inputs (after a
        :class:`~swflows.exceptions.WaitTimeout`, or a crash), it starts
        nothing and returns that deployment (waiting for it as asked); with
        others, it raises :class:`~swflows.exceptions.DeploymentExists`.
        With ``wait=False`` the deployment is returned once its flow wrote
        it; if that takes longer than ``wait_timeout`` (a busy installation,
        no conductor free), :class:`~swflows.exceptions.WaitTimeout` with
        ``started`` false names it: it runs later all the same.
        """
        self._allow(context, "swflows:deployment:create")
        source = self._visible_config(context, config_id)
        self._check_deploy_policy(context, server_id, config_id)
        model.check_name("server_id", server_id)
        model.check_name("name", name)
        given = checked_input_values(input_values)
        derive.check_values(source, self._opened_values(given))
        derive.check_action(source, action, actions)
        values = self._sealed_values(source, given)
        server = metadata.find_server(self.services, server_id)
        transport = self._signal_transport(signal_transport, server_id, server=server)
        plan = self._plan(server_id, transport, config_transport, server=server)
        chosen = deployment_id is not None
        deployment_id = deployment_id or model.new_id()
        inputs: dict[str, Any] = {
            "deployment_id": deployment_id,
            "server_id": server_id,
            "source_config_id": config_id,
            "action": action,
            "input_values": values,
            "name": name or source.name,
            "timeout": self._timeout(timeout),
            "generation": FIRST_GENERATION,
            "signal_transport": transport,
            "parent_id": None,
        }
        if actions is not None:
            inputs["actions"] = list(actions)
        if chosen:
            again = self._deployed_already(context, deployment_id, inputs)
            if again is not None:
                return self._again(deployment_id, again, wait, wait_timeout)
        self._own(context, projects.DEPLOYMENT, deployment_id)
        started = self._start_delegated(context, deployment_id, "deploy", plan, inputs)
        return self._result(deployment_id, started, wait, wait_timeout)

    def redeploy(
        self,
        deployment_id: str,
        *,
        input_values: Mapping[str, Any] | None = None,
        config_id: str | None = None,
        action: str = model.UPDATE,
        timeout: int | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
        context: RequestContext | None = None,
    ) -> model.Deployment:
        """Run ``action`` (UPDATE) with new inputs or a new config.

        When an input marked ``replace_on_change`` changes, a new deployment
        replaces this one: it is deployed first, then this one undeployed,
        and the new deployment is returned.
        """
        current = self.store.get_deployment(deployment_id)
        self._visible(
            context, projects.DEPLOYMENT, deployment_id, "swflows:deployment:update"
        )
        self._refuse_running(current)
        source_id = config_id or current.source_config_id
        if source_id is None:
            raise exceptions.ValidationError(
                "config_id", f"deployment {deployment_id} has no config to redeploy"
            )
        source = (
            self._visible_config(context, source_id)
            if config_id is not None
            else self.store.get_config(source_id)
        )
        self._check_deploy_policy(context, current.server_id, source_id)
        given = checked_input_values(input_values)
        values = self._sealed_values(source, given, current.input_values)
        opened = self._opened_values(values)
        derive.check_values(source, opened)
        derive.check_action(source, action, current.actions)
        self._refuse_for_agent(
            current.signal_transport,
            metadata.server_agent(self.services, current.server_id),
            current.server_id,
        )
        if derive.replace_on_change_changed(
            source, self._opened_values(current.input_values), opened
        ):
            replacement = self.deploy(
                current.server_id,
                source_id,
                input_values=opened,
                name=current.name,
                signal_transport=current.signal_transport,
                timeout=timeout or current.timeout,
                wait=True,
                wait_timeout=wait_timeout,
                context=context,
            )
            self.undeploy(deployment_id, context=context)
            return replacement
        plan = self._plan(current.server_id, current.signal_transport, None)
        inputs = {
            "deployment_id": deployment_id,
            "server_id": current.server_id,
            "source_config_id": source_id,
            "action": action,
            "input_values": values,
            "name": current.name,
            "timeout": self._timeout(timeout or current.timeout),
            "generation": current.generation + 1,
            "signal_transport": current.signal_transport,
        }
        started = self._start("redeploy", plan, inputs)
        return self._result(
            deployment_id, started, wait, wait_timeout, current.generation + 1
        )

    def suspend(self, deployment_id: str, **kwargs: Any) -> model.Deployment:
        return self.redeploy(deployment_id, action=model.SUSPEND, **kwargs)

    def resume_deployment(self, deployment_id: str, **kwargs: Any) -> model.Deployment:
        return self.redeploy(deployment_id, action=model.RESUME, **kwargs)

    def undeploy(
        self,
        deployment_id: str,
        *,
        timeout: int | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
        context: RequestContext | None = None,
    ) -> model.Deployment | None:
        """Run DELETE when the config has it, then remove the deployment.

        A deployment made by :meth:`trigger` is only removed: its DELETE is
        not run.  Returns the DELETE action's final state (None when there was none).
        """
        current: model.Deployment = self.store.get_deployment(deployment_id)
        self._visible(
            context, projects.DEPLOYMENT, deployment_id, "swflows:deployment:delete"
        )
        self._refuse_running(current)
        plan = self._plan(current.server_id, current.signal_transport, None)
        run_delete, inputs = self._undeploy_inputs(
            current,
            timeout=self._timeout(timeout or current.timeout),
            generation=current.generation + 1,
        )
        flow_id, _ = self._start(
            "undeploy", {**plan.to_kwargs(), "run_delete_action": run_delete}, inputs
        )
        if not wait:
            return current
        self.runner.wait(flow_id, wait_timeout)
        return None

    def _undeploy_inputs(
        self, current: model.Deployment, *, timeout: int, generation: int
    ) -> tuple[bool, dict[str, Any]]:
        """Whether undeploying ``current`` runs its DELETE action, and the
        undeploy flow's inputs (the DELETE action's, at ``generation``)."""
        run_delete = self._runs_delete(current)
        inputs: dict[str, Any] = {
            "deployment_id": current.id,
            "server_id": current.server_id,
            "current_config_id": current.config_id,
        }
        if run_delete:
            inputs.update(
                source_config_id=current.source_config_id,
                action=model.DELETE,
                input_values=current.input_values,
                name=current.name,
                timeout=timeout,
                generation=generation,
                signal_transport=current.signal_transport,
            )
        return run_delete, inputs

    def trigger(
        self,
        deployment_id: str,
        action: str,
        *,
        input_values: Mapping[str, Any] | None = None,
        signal_transport: str | None = None,
        timeout: int | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
        context: RequestContext | None = None,
    ) -> model.Deployment:
        """Run ``action`` of the deployment's config now, as a new deployment.

        The new deployment is named ``<original>-<ACTION>``; its inputs are
        the original's, overridden by ``input_values``.  The original
        deployment is left untouched.  The rule of :meth:`redeploy` decides
        which actions run: a component config's entries, or for any other
        config the deployment's ``actions``.
        """
        original = self.store.get_deployment(deployment_id)
        self._visible(
            context, projects.DEPLOYMENT, deployment_id, "swflows:deployment:trigger"
        )
        if original.source_config_id is None:
            raise exceptions.ValidationError(
                "deployment_id", f"deployment {deployment_id} has no config"
            )
        source = self.store.get_config(original.source_config_id)
        self._check_deploy_policy(context, original.server_id, source.id)
        values = self._sealed_values(
            source, checked_input_values(input_values), original.input_values
        )
        derive.check_values(source, self._opened_values(values))
        derive.check_action(source, action, original.actions)
        transport = self._signal_transport(
            signal_transport or original.signal_transport, original.server_id
        )
        plan = self._plan(original.server_id, transport, None)
        new_id = model.new_id()
        inputs = {
            "deployment_id": new_id,
            "server_id": original.server_id,
            "source_config_id": source.id,
            "action": action,
            "input_values": values,
            "name": f"{original.name or source.name}-{action}",
            "timeout": self._timeout(timeout or original.timeout),
            "generation": FIRST_GENERATION,
            "signal_transport": transport,
            "parent_id": deployment_id,
        }
        self._own(context, projects.DEPLOYMENT, new_id)
        started = self._start_delegated(context, new_id, "trigger", plan, inputs)
        return self._result(new_id, started, wait, wait_timeout)

    def server_metadata(self, server_id: str) -> list[dict[str, Any]]:
        """The server's metadata list, as POLL_SERVER_HEAT embedders serve it.

        Serving it counts as the server picking up its waiting deployments
        (for the delivery timeout).
        """
        found = self.store.server_metadata(server_id).deployments
        agent = metadata.server_agent(self.services, server_id)
        self.store.saw_server(server_id)
        self.runner.registry.mark_picked_up(server_id)
        return derive.for_agent(found, heat_agents=agent == bootdata.HEAT_AGENTS)

    def signal(
        self,
        deployment_id: str,
        payload: bytes | str | Mapping[str, Any],
        *,
        generation: int | None = None,
        context: RequestContext | None = None,
    ) -> bool:
        """Deliver a signal an embedder received (HEAT_SIGNAL and friends).

        Returns False when the deployment is not waiting (the signal is
        ignored, as Heat ignores it), or, with ``generation``, when the
        action waiting is not that one (a signal of an earlier action's
        store).  A payload swflows cannot use (not JSON, or not a JSON
        object) is an outcome, not an error: the action ends FAILED with
        reason kind ``signal_rejected``, and True is returned.  The flow
        goes on at once, without waiting for the watcher.
        """
        current = self.store.get_deployment(deployment_id)
        if context is not None:
            # the signaller is the deployment's stack user, in a project of
            # its own: the rule decides, not the deployment's project
            policies.authorize(
                self.conf,
                context,
                "swflows:deployment:signal",
                {"project_id": self._project_of(projects.DEPLOYMENT, deployment_id)},
            )
        if current.status != states.IN_PROGRESS or (
            generation is not None and current.generation != generation
        ):
            return False
        raw = payload if isinstance(payload, (bytes, str)) else dict(payload)
        outcome = outcomes.outcome_from_payload(self.services, current, raw)
        self.store.saw_server(current.server_id)
        if outcome is None:  # a progress signal: "started"
            self.runner.registry.mark_started(deployment_id)
            return True
        recorded = outcomes.record_outcome(
            self.services, deployment_id, current.generation, outcome
        )
        if recorded:  # its flow goes on now, not at the watcher's next look
            self.runner.resume_ended(deployment_id)
        return recorded

    def cancel(
        self,
        deployment_id: str,
        reason: str | None = None,
        *,
        context: RequestContext | None = None,
    ) -> model.Deployment:
        """End a running action FAILED, kind ``cancelled``.

        Its derived config is withdrawn from the server's metadata, which
        is published again before this returns: no agent starts it any
        more, and swflows' agent stops its hook if it is running.
        """
        current = self.store.get_deployment(deployment_id)
        self._visible(
            context, projects.DEPLOYMENT, deployment_id, "swflows:deployment:cancel"
        )
        if current.status != states.IN_PROGRESS:
            raise nothing_to_cancel(deployment_id, current.status)
        outcome = signals.cancelled_outcome(reason)
        if not outcomes.record_outcome(
            self.services, deployment_id, current.generation, outcome
        ):
            raise nothing_to_cancel(deployment_id, self.show(deployment_id).status)
        self.runner.wake()
        metadata.withdraw_cancelled(self.services, deployment_id)
        return self.show(deployment_id)

    def republish(self, server_id: str) -> int:
        """Publish a server's metadata again (after a transport outage)."""
        name = self._config_transport(server_id, None)
        return metadata.publish_server(
            self.services, server_id, name, self._config_options(name)
        )

    def _runs_delete(self, current: model.Deployment) -> bool:
        """Whether undeploying ``current`` runs its config's DELETE action.

        A triggered action's record is removed without running DELETE:
        removing a BACKUP's record must not uninstall what was backed up.
        Nor is a deployment whose first action never reached its server (its
        flow failed and it points at no config): there is nothing to undo.
        """
        if (
            current.source_config_id is None
            or current.parent_id is not None
            or current.config_id is None
        ):
            return False
        source = self.store.get_config(current.source_config_id)
        return bool(source.handles(model.DELETE, current.actions))

    @staticmethod
    def _refuse_running(current: model.Deployment) -> None:
        if current.status == states.IN_PROGRESS:
            raise exceptions.InvalidTransition(
                current.id,
                current.status,
                states.IN_PROGRESS,
                f"deployment {current.id} is already running an action "
                f"({current.action}): wait for it to end, or cancel it",
            )

    def _start_delegated(
        self,
        context: RequestContext | None,
        deployment_id: str,
        kind: str,
        plan: common.Plan | dict[str, Any],
        inputs: dict[str, Any],
    ) -> tuple[str, concurrent.futures.Future[str]]:
        """Start a new deployment's first flow, its work acting through a
        trust of the caller's when trusts are configured (see
        :mod:`swflows.trusts`)."""
        if self._delegate(context, projects.DEPLOYMENT, deployment_id) is None:
            return self._start(kind, plan, inputs)
        try:
            return self._start(kind, plan, inputs)
        except BaseException:
            self._undelegate(projects.DEPLOYMENT, deployment_id)
            raise

    def _start(
        self,
        kind: str,
        plan: common.Plan | dict[str, Any],
        inputs: dict[str, Any],
    ) -> tuple[str, concurrent.futures.Future[str]]:
        kwargs = plan if isinstance(plan, dict) else plan.to_kwargs()
        return self.runner.launch(kind, kwargs, inputs)


def nothing_to_cancel(
    deployment_id: str, status: str | None
) -> exceptions.InvalidTransition:
    """Cancelling a deployment that runs no action."""
    return exceptions.InvalidTransition(
        deployment_id,
        status,
        states.FAILED,
        f"deployment {deployment_id} is already {status or 'gone'}: nothing to cancel",
    )
