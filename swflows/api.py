"""The public facade: configs, deploy, redeploy, undeploy, trigger, signal.

Every choice that depends on configuration (which transports, whether a
stack user is needed, the timeout) is resolved here, before a flow starts,
and handed to the flow's factory, so a flow is always rebuilt the same way.
"""

from __future__ import annotations

import concurrent.futures
import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import tenacity

from swflows import (
    bootdata,
    derive,
    exceptions,
    model,
    rollout,
    servers,
    signals,
    states,
)
from swflows.persistence import flows as flow_rows
from swflows.persistence.flows import FlowRow
from swflows.services import Clients, Services
from swflows.tasks import enrollment, metadata
from swflows.tasks import signal as signal_tasks
from swflows.transports import names

if TYPE_CHECKING:
    # TaskFlow and the flows load at first use: a command that only reads
    # the store starts without them
    from swflows.engine import Runner
    from swflows.flows import common
    from swflows.groups import GroupDriver

#: generation of a deployment's first action
FIRST_GENERATION = 1
#: agents that cannot send a ZAQAR_SIGNAL (see Swflows._refuse_for_agent)
_NO_ZAQAR_SIGNAL = frozenset({bootdata.HEAT_AGENTS})


class Swflows:
    """One swflows instance: a store, a cloud and a runner.

    ``wait=True`` (the default) blocks until the deployment is terminal and
    returns it; ``wait=False`` returns the IN_PROGRESS deployment at once
    and lets the runner's threads finish the flow.

    The runner (signal watcher, lease renewal, resume of interrupted flows)
    starts with the instance; with ``start=False`` it starts at the first
    call that needs it, so an instance that only reads the store (list,
    show, outputs) runs no thread and loads no TaskFlow.
    """

    def __init__(
        self,
        store: Any,
        clients: Clients,
        conf: Any,
        *,
        secret: bytes | None = None,
        start: bool = True,
    ) -> None:
        self.services = Services(
            store=store,
            conf=conf,
            clients=clients,
            secret=secret if secret is not None else store.derivation_key(),
        )
        self.store = store
        self.conf = conf
        self._owns_store = False
        self._runner: Runner | None = None
        self._groups: GroupDriver | None = None
        if start:
            self.runner.start()

    @property
    def runner(self) -> Runner:
        """This instance's runner, made and started at first use when the
        instance was made with ``start=False``."""
        if self._runner is None:
            from swflows.engine import Runner

            self._runner = Runner(self.services)
            self._runner.start()
            from swflows.groups import GroupDriver

            self._groups = GroupDriver(self, self._runner.owner)
            self._groups.start()
        return self._runner

    def adopt_runner(self, runner: Runner) -> None:
        """Make ``runner`` this instance's runner (a conductor's, see
        :class:`swflows.engine.conductor.Conductor`) and start it."""
        if self._runner is not None:
            raise exceptions.SwflowsError("this instance already has a runner")
        self._runner = runner
        runner.start()
        from swflows.groups import GroupDriver

        self._groups = GroupDriver(self, runner.owner)
        self._groups.start()

    # -- built from options alone ---------------------------------------
    @classmethod
    def from_conf(cls, conf: Any, store: Any = None, *, start: bool = True) -> Swflows:
        """An instance configured by ``conf`` alone (see :mod:`swflows.conf`).

        The store is opened from ``[database]`` unless ``store`` is given, and
        the cloud clients are built from the client groups and ``[stack_user]``
        (:meth:`swflows.services.Clients.from_conf`).  A store opened here is
        ``sw.store``, closed with the instance.  ``start`` is as for the
        constructor.
        """
        from swflows import conf as sw_conf
        from swflows.persistence.store import Store

        sw_conf.check_values(conf)
        opened = store if store is not None else Store.from_conf(conf)
        try:
            made = cls(opened, Clients.from_conf(conf), conf, start=start)
            made._owns_store = store is None
            return made
        except BaseException:
            if store is None:
                opened.close()
            raise

    def close(self) -> None:
        """Stop the runner (running flows are released for the next one),
        and close the store if :meth:`from_conf` opened it."""
        if self._groups is not None:
            self._groups.close()
        if self._runner is not None:
            self._runner.close()
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Swflows:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- configs --------------------------------------------------------
    def create_config(
        self,
        name: str,
        config: Any = "",
        *,
        group: str | None = None,
        inputs: Sequence[Mapping[str, Any]] | None = None,
        outputs: Sequence[Mapping[str, Any]] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> model.Config:
        built = model.Config.create(
            name, config, group=group, inputs=inputs, outputs=outputs, options=options
        )
        return self.store.create_config(built)  # type: ignore[no-any-return]

    def get_config(self, config_id: str) -> model.Config:
        return self.store.get_config(config_id)  # type: ignore[no-any-return]

    def list_configs(self, **kwargs: Any) -> list[model.Config]:
        return self.store.list_configs(**kwargs)  # type: ignore[no-any-return]

    def delete_config(self, config_id: str) -> None:
        self.store.delete_config(config_id)

    # -- resolving choices ---------------------------------------------
    def _signal_transport(
        self, requested: str | None, server_id: str | None = None
    ) -> str:
        """The signal transport to use, AUTO resolved; one the agent of
        ``server_id`` cannot use is refused (AUTO passes over it)."""
        name = names.normalize_signal_transport(
            requested or self.conf.default_deployment_signal_transport
        )
        agent = (
            metadata.server_agent(self.services, server_id)
            if server_id
            else bootdata.SWFLOWS_AGENT
        )
        if name != names.AUTO:
            self.services.signal_transport(name, self.services.signal_options(name))
            self._refuse_for_agent(name, agent, server_id)
            return name
        offered = {
            names.TEMP_URL_SIGNAL: self.services.clients.offers("object_store"),
            names.ZAQAR_SIGNAL: self.services.clients.offers("messaging")
            and agent not in _NO_ZAQAR_SIGNAL,
            names.HEAT_SIGNAL: self.services.clients.offers("stack_users"),
            names.NO_SIGNAL: True,
        }
        for candidate in self.conf.auto_signal_transport_order:
            candidate = names.normalize_signal_transport(
                candidate, "auto_signal_transport_order"
            )
            if offered.get(candidate):
                return candidate
        raise exceptions.NotSupported(
            "AUTO found no signal transport this cloud offers among "
            + ", ".join(self.conf.auto_signal_transport_order)
        )

    @staticmethod
    def _refuse_for_agent(name: str, agent: str, server_id: str | None) -> None:
        if name == names.ZAQAR_SIGNAL and agent in _NO_ZAQAR_SIGNAL:
            raise exceptions.NotSupported(
                f"server {server_id} runs Heat's agents, which cannot send a "
                "ZAQAR_SIGNAL: heat-config-notify posts it with "
                "python-zaqarclient's v1 API, which current clients no longer "
                "ship and current Zaqar (v2) no longer serves; use "
                "TEMP_URL_SIGNAL (or AUTO, which picks it)"
            )

    def _config_transport(self, server_id: str, requested: str | None) -> str:
        """The server's enrolled transport; else ``requested`` or the default.

        An unknown ``requested`` name is refused even when the server's own
        transport is used."""
        asked = names.normalize_config_transport(requested) if requested else None
        server = metadata.find_server(self.services, server_id)
        if server is not None and server.config_transport:
            return str(server.config_transport)
        return asked or names.normalize_config_transport(
            self.conf.default_software_config_transport
        )

    def _config_options(self, name: str) -> dict[str, Any]:
        return self.services.config_options(name)

    def _plan(
        self, server_id: str, signal_transport: str, config_transport: str | None
    ) -> common.Plan:
        transport = self.services.signal_transport(
            signal_transport, self.services.signal_options(signal_transport)
        )
        from swflows.flows import common

        config_name = self._config_transport(server_id, config_transport)
        return common.Plan(
            signal_transport=signal_transport,
            config_transport=config_name,
            signal_options=self.services.signal_options(signal_transport),
            config_options=self._config_options(config_name),
            needs_stack_user=bool(transport.needs_stack_user),
            waits=bool(transport.waits),
        )

    # -- operations -----------------------------------------------------
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
    ) -> model.Deployment:
        """Deploy ``config_id`` to ``server_id``: its ``action`` (CREATE) runs."""
        source = self.store.get_config(config_id)
        values = _input_values(input_values)
        derive.check_action(source, action, actions)
        transport = self._signal_transport(signal_transport, server_id)
        plan = self._plan(server_id, transport, config_transport)
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
        started = self._start("deploy", plan, inputs)
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
    ) -> model.Deployment:
        """Run ``action`` (UPDATE) with new inputs or a new config.

        When an input marked ``replace_on_change`` changes, a new deployment
        replaces this one: it is deployed first, then this one undeployed,
        and the new deployment is returned.
        """
        current = self.store.get_deployment(deployment_id)
        self._refuse_running(current)
        source_id = config_id or current.source_config_id
        if source_id is None:
            raise exceptions.ValidationError(
                "config_id", f"deployment {deployment_id} has no config to redeploy"
            )
        source = self.store.get_config(source_id)
        values = {**current.input_values, **_input_values(input_values)}
        derive.check_action(source, action, current.actions)
        self._refuse_for_agent(
            current.signal_transport,
            metadata.server_agent(self.services, current.server_id),
            current.server_id,
        )
        if derive.replace_on_change_changed(source, current.input_values, values):
            replacement = self.deploy(
                current.server_id,
                source_id,
                input_values=values,
                name=current.name,
                signal_transport=current.signal_transport,
                timeout=timeout or current.timeout,
                wait=True,
                wait_timeout=wait_timeout,
            )
            self.undeploy(deployment_id)
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
    ) -> model.Deployment | None:
        """Run DELETE when the config has it, then remove the deployment.

        A deployment made by :meth:`trigger` is only removed: its DELETE is
        not run.  Returns the DELETE action's final state (None when there was none).
        """
        current: model.Deployment = self.store.get_deployment(deployment_id)
        self._refuse_running(current)
        run_delete = self._runs_delete(current)
        plan = self._plan(current.server_id, current.signal_transport, None)
        inputs: dict[str, Any] = {
            "deployment_id": deployment_id,
            "server_id": current.server_id,
            "current_config_id": current.config_id,
        }
        if run_delete:
            inputs.update(
                source_config_id=current.source_config_id,
                action=model.DELETE,
                input_values=current.input_values,
                name=current.name,
                timeout=self._timeout(timeout or current.timeout),
                generation=current.generation + 1,
                signal_transport=current.signal_transport,
            )
        flow_id, _ = self._start(
            "undeploy", {**plan.to_kwargs(), "run_delete_action": run_delete}, inputs
        )
        if not wait:
            return current
        self.runner.wait(flow_id, wait_timeout)
        return None

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
    ) -> model.Deployment:
        """Run ``action`` of the deployment's config now, as a new deployment.

        The new deployment is named ``<original>-<ACTION>``; its inputs are
        the original's, overridden by ``input_values``.  The original
        deployment is left untouched.  The rule of :meth:`redeploy` decides
        which actions run: a component config's entries, or for any other
        config the deployment's ``actions``.
        """
        original = self.store.get_deployment(deployment_id)
        if original.source_config_id is None:
            raise exceptions.ValidationError(
                "deployment_id", f"deployment {deployment_id} has no config"
            )
        source = self.store.get_config(original.source_config_id)
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
            "input_values": {**original.input_values, **_input_values(input_values)},
            "name": f"{original.name or source.name}-{action}",
            "timeout": self._timeout(timeout or original.timeout),
            "generation": FIRST_GENERATION,
            "signal_transport": transport,
            "parent_id": deployment_id,
        }
        started = self._start("trigger", plan, inputs)
        return self._result(new_id, started, wait, wait_timeout)

    # -- reading --------------------------------------------------------
    def show(self, deployment_id: str) -> model.Deployment:
        return self.store.get_deployment(deployment_id)  # type: ignore[no-any-return]

    def outputs(self, deployment_id: str) -> dict[str, Any]:
        return dict(self.show(deployment_id).output_values)

    def list_deployments(self, **kwargs: Any) -> list[model.Deployment]:
        return self.store.list_deployments(**kwargs)  # type: ignore[no-any-return]

    def server_metadata(self, server_id: str) -> list[dict[str, Any]]:
        """The server's metadata list, as POLL_SERVER_HEAT embedders serve it.

        Serving it counts as the server picking up its waiting deployments
        (for the delivery timeout).
        """
        found = self.store.server_metadata(server_id).deployments
        agent = metadata.server_agent(self.services, server_id)
        self.runner.registry.mark_picked_up(server_id)
        return derive.for_agent(found, heat_agents=agent == bootdata.HEAT_AGENTS)

    def wait(
        self, deployment_id: str, timeout: float | None = None
    ) -> model.Deployment:
        """Block until no flow works on the deployment any more, and return it.

        Raises WaitTimeout after ``timeout`` seconds, and DeploymentNotFound
        when the flow removed it (an undeploy).
        """
        started = time.monotonic()
        for row in self.runner.registry.find(deployment_id=deployment_id):
            left = None
            if timeout is not None:
                left = max(0.0, timeout - (time.monotonic() - started))
            if row.kind == flow_rows.CUSTOM:
                # a custom flow goes on after this deployment: its outcome is
                # what is waited for here (wait_flow waits for the flow)
                self._wait_outcome(deployment_id, left)
            else:
                self.runner.wait(row.id, left)
        return self.show(deployment_id)

    def _wait_outcome(self, deployment_id: str, timeout: float | None) -> None:
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_result(lambda status: status == states.IN_PROGRESS),
            wait=tenacity.wait_fixed(float(self.conf.watcher.poll_interval)),
            stop=(
                tenacity.stop_after_delay(timeout)
                if timeout is not None
                else tenacity.stop_never
            ),
        )
        try:
            retrying(lambda: self.show(deployment_id).status)
        except tenacity.RetryError:
            raise exceptions.WaitTimeout(deployment_id, timeout or 0) from None

    # -- custom flows ---------------------------------------------------
    def run_flow(
        self,
        factory: Any,
        /,
        *,
        wait: bool = False,
        wait_timeout: float | None = None,
        **kwargs: Any,
    ) -> str:
        """Run a developer's flow, built by ``factory(**kwargs)``; its id.

        ``factory`` is a module-level function (or its dotted path) that
        returns a TaskFlow flow, typically of :mod:`swflows.flows.compose`
        pieces; ``kwargs`` must be JSON.  Both are checked before anything
        is stored, and a factory another process could not import by its
        dotted path is refused (ValidationError).  The flow parks while it
        awaits a signal, survives a runner restart, and can be cancelled
        (:meth:`cancel_flow`); :meth:`flow_result` reads its outcome.
        ``wait=True`` blocks until it ended (raising its error, if any).
        """
        flow_id, _ = self.runner.launch_custom(factory, dict(kwargs), self._plans())
        if wait:
            self.runner.wait(flow_id, wait_timeout)
        return flow_id

    def _plans(self) -> dict[str, dict[str, Any]]:
        """The plan of every signal transport offered here, and the default's,
        resolved now from the configuration (a custom flow keeps them)."""
        plans: dict[str, dict[str, Any]] = {}
        for name in names.CONCRETE_SIGNAL_TRANSPORTS:
            try:
                plans[name] = self._plan("", name, None).to_kwargs()
            except exceptions.SwflowsError:
                continue  # not offered here
        from swflows.flows import compose

        default = self._signal_transport(None)
        plans[compose.DEFAULT_TRANSPORT] = self._plan("", default, None).to_kwargs()
        return plans

    def wait_flow(self, flow_id: str, timeout: float | None = None) -> dict[str, Any]:
        """Block until flow ``flow_id`` ended; a custom flow's outcome
        (:meth:`flow_result`).  Raises the flow's error, if it failed (a
        :class:`~swflows.exceptions.FlowError` saying it, when the flow
        ended in another process)."""
        from swflows.engine import runner as engine_runner

        self.runner.wait(flow_id, timeout)
        outcome = self.flow_result(flow_id)
        error = engine_runner.stored_error(flow_id, outcome)
        if error is not None:
            raise error
        return outcome

    def flow_result(self, flow_id: str) -> dict[str, Any]:
        """A custom flow's outcome: ``state`` (SUCCESS or REVERTED once it
        ended; RUNNING, PARKED or BROKEN before), ``result`` (the values
        its steps provided under names without a dot), ``error`` and
        ``factory``.  Raises FlowNotFound for an unknown flow."""
        ended = self.runner.result_of(flow_id)
        if ended is not None:
            return ended
        row = self.runner.registry.get(flow_id)
        if row is None:
            raise exceptions.FlowNotFound(flow_id)
        return {
            "id": flow_id,
            "factory": None,
            "state": row.state,
            "result": {},
            "error": row.note if row.state == flow_rows.BROKEN else None,
        }

    def forget_flow(self, flow_id: str) -> bool:
        """Drop an ended custom flow's stored outcome; False if it had none."""
        return self.runner.forget_result(flow_id)

    def cancel_flow(self, flow_id: str, reason: str | None = None) -> None:
        """Cancel an unfinished flow.

        A custom flow is stopped at its next step boundary, or woken from
        its wait (that deployment ends FAILED, kind ``cancelled``), and
        reverted: every step it ran is undone in reverse order.  A built-in
        flow's deployment is cancelled (:meth:`cancel`).  Raises
        FlowNotFound when no such flow is unfinished.
        """
        row = self.runner.registry.get(flow_id)
        if row is None or row.state == flow_rows.BROKEN:
            raise exceptions.FlowNotFound(flow_id)
        if row.kind != flow_rows.CUSTOM:
            self.cancel(row.deployment_id, reason)
            return
        if not self.runner.request_cancel(flow_id, reason):
            raise exceptions.FlowNotFound(flow_id)

    # -- flows ----------------------------------------------------------
    def list_flows(self, deployment_id: str | None = None) -> list[FlowRow]:
        """Unfinished flows: running, parked (waiting) or broken.

        A custom flow's row (kind ``custom``) names the deployment it
        awaits now, found by ``deployment_id`` here.
        """
        return self.runner.registry.find(deployment_id=deployment_id)

    def current_step(self, flow_id: str) -> str | None:
        """The step a flow is running now (``CreateSignalStore``, or
        ``PublishMetadata (reverting)``), read from its logbook; None when
        no step is at work (parked, or between steps)."""
        from swflows.persistence import logbook

        busy = logbook.busy_atoms(self.store.taskflow_backend(), flow_id)
        if not busy:
            return None
        name, state = busy[0]
        step = name.split(".", 2)[-1]
        return f"{step} (reverting)" if state == "REVERTING" else step

    def list_interrupted(self) -> list[FlowRow]:
        """Flows no live runner drives: their runner died (its lease ran
        out) or they were set aside as BROKEN, with a note saying why."""
        return self.runner.interrupted()

    def resume(self, flow_id: str | None = None) -> list[str]:
        """Take over and resume interrupted flows (all, or ``flow_id``).

        Runners do this themselves when they start and while they run
        (``[runner] resume_on_start``); this is for operators who turned
        that off, or who do not want to wait for a dead runner's lease.
        Returns the ids of the flows resumed.
        """
        return self.runner.resume_interrupted(flow_id)

    # -- signals and cancel --------------------------------------------
    def signal(
        self,
        deployment_id: str,
        payload: bytes | str | Mapping[str, Any],
        *,
        generation: int | None = None,
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
        if current.status != states.IN_PROGRESS or (
            generation is not None and current.generation != generation
        ):
            return False
        raw = payload if isinstance(payload, (bytes, str)) else dict(payload)
        outcome = signal_tasks.outcome_from_payload(self.services, current, raw)
        if outcome is None:
            return True  # a progress signal
        recorded = signal_tasks.record_outcome(
            self.services, deployment_id, current.generation, outcome
        )
        if recorded:  # its flow goes on now, not at the watcher's next look
            self.runner.resume_ended(deployment_id)
        return recorded

    def cancel(self, deployment_id: str, reason: str | None = None) -> model.Deployment:
        """End a running action FAILED, kind ``cancelled``.

        Its derived config is withdrawn from the server's metadata, which
        is published again before this returns: no agent starts it any
        more, and swflows' agent stops its hook if it is running.
        """
        current = self.store.get_deployment(deployment_id)
        if current.status != states.IN_PROGRESS:
            raise exceptions.InvalidTransition(
                deployment_id, current.status, states.FAILED
            )
        outcome = signals.cancelled_outcome(reason)
        if not signal_tasks.record_outcome(
            self.services, deployment_id, current.generation, outcome
        ):
            raise exceptions.InvalidTransition(
                deployment_id, self.show(deployment_id).status, states.FAILED
            )
        self.runner.wake()
        signal_tasks.withdraw(self.services, deployment_id)
        return self.show(deployment_id)

    def republish(self, server_id: str) -> int:
        """Publish a server's metadata again (after a transport outage)."""
        name = self._config_transport(server_id, None)
        return metadata.publish_server(
            self.services, server_id, name, self._config_options(name)
        )

    # -- servers (see docs/enrollment.md) --------------------------------
    def enroll_server(
        self,
        server_id: str,
        config_transport: str | None = None,
        agent: str | None = None,
    ) -> dict[str, Any]:
        """Give a server its metadata channel and publish its document.

        Idempotent; another ``config_transport`` moves the server: the new
        channel is published and the old one removed.  ``agent`` ("swflows"
        or "heat") records the agent the server runs, which decides the
        form of its document and the signal transports it can use (None:
        the one recorded, else swflows' agent).  Returns :meth:`show_server`.
        """
        return servers.enroll(self, server_id, config_transport, agent)

    def unenroll_server(self, server_id: str, *, force: bool = False) -> bool:
        """Remove everything enrolling made; False if the server was unknown.

        Refused (ServerInUse) while deployments are on the server, unless
        ``force``: then each is undeployed first (a waiting one cancelled).
        """
        if force:
            servers.undeploy_all(self, server_id)
        return enrollment.unenroll(self.services, server_id)

    def show_server(self, server_id: str, *, console_lines: int = 0) -> dict[str, Any]:
        """A server's enrollment, channel (no secret) and deployments; with
        ``console_lines``, also the end of its console log from Nova
        (``console``: where an agent that died at boot says why)."""
        return servers.describe(self, server_id, console_lines)

    def boot_data(self, server_id: str, agent: str | None = None) -> str:
        """cloud-init user_data starting ``agent`` ("swflows" or "heat";
        None: the one the server was enrolled for).  Another agent than the
        recorded one is recorded (see :meth:`enroll_server`)."""
        section = servers.collect_section(self, server_id)
        return bootdata.user_data(section, servers.use_agent(self, server_id, agent))

    def agent_config(self, server_id: str, agent: str | None = None) -> str:
        """The agent's configuration file, for a server that already runs
        (``agent`` as for :meth:`boot_data`)."""
        section = servers.collect_section(self, server_id)
        return bootdata.agent_config(section, servers.use_agent(self, server_id, agent))

    def create_server(
        self,
        name: str,
        image: str,
        flavor: str,
        *,
        config_transport: str | None = None,
        agent: str = bootdata.SWFLOWS_AGENT,
    ) -> dict[str, Any]:
        """Boot a server through Nova with boot data for ``agent``, and
        enroll it (recording ``agent``, see :meth:`enroll_server`)."""
        return servers.create(self, name, image, flavor, config_transport, agent)

    def delete_server(self, server_id: str) -> None:
        """Undeploy what is on the server, unenroll it, and delete it in Nova."""
        servers.delete(self, server_id)

    # -- groups (see docs/groups.md) --------------------------------------
    def create_group(
        self,
        name: str,
        config_id: str,
        servers: Mapping[str, str],
        *,
        input_values: Mapping[str, Any] | None = None,
        member_values: Mapping[str, Mapping[str, Any]] | None = None,
        policy: Mapping[str, Any] | None = None,
        signal_transport: str | None = None,
        timeout: int | None = None,
        actions: Sequence[str] | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
    ) -> dict[str, Any]:
        """Deploy ``config_id`` to every member of a new group.

        ``servers`` maps member name to server id; a member's input values
        are ``input_values`` overridden by its own in ``member_values``.
        ``policy`` is the rollout policy (:mod:`swflows.rollout`): members
        are released by ``max_concurrency``, in waves, within the
        ``max_errors`` budget.  Returns :meth:`show_group` (once the
        deployment ended, with ``wait``).  ``actions`` are the members'
        deployments' actions, as for :meth:`deploy`.
        """
        from swflows import groups
        from swflows.persistence.groups import GroupRecord, GroupStore

        if not isinstance(name, str) or not name.strip() or len(name) > 255:
            raise exceptions.ValidationError("name", "must be a non-empty string")
        members, own = groups.check_members(servers, member_values)
        parsed = rollout.Policy.from_dict(policy)
        source = self.store.get_config(config_id)
        if actions is not None:
            actions = list(actions)
            if not all(isinstance(a, str) and a for a in actions):
                raise exceptions.ValidationError("actions", "must be action names")
        derive.check_action(source, model.CREATE, actions)
        transport = self._signal_transport(signal_transport)
        self._plan("", transport, None)
        ids = {member: model.new_id() for member in members}
        operation = groups.new_operation(
            groups.DEPLOY,
            model.CREATE,
            {
                member: groups._member(server_id, "deploy", ids[member])
                for member, server_id in members.items()
            },
            parsed,
        )
        record = GroupRecord(
            id=model.new_id(),
            name=name,
            config_id=config_id,
            servers=members,
            input_values=dict(input_values or {}),
            member_values=own,
            signal_transport=transport,
            timeout=self._timeout(timeout) if timeout is not None else None,
            actions=actions,
            policy=parsed.to_dict(),
            deployments=ids,
            operation=operation,
            action=model.CREATE,
            status=states.IN_PROGRESS,
            status_reason=f"0 done, 0 running, 0 failed, {len(members)} left",
        )
        GroupStore(self.store).create(record)
        return self._group_started(record.id, wait, wait_timeout)

    def redeploy_group(
        self,
        group: str,
        *,
        servers: Mapping[str, str] | None = None,
        input_values: Mapping[str, Any] | None = None,
        member_values: Mapping[str, Mapping[str, Any]] | None = None,
        config_id: str | None = None,
        policy: Mapping[str, Any] | None = None,
        action: str = model.UPDATE,
        wait: bool = True,
        wait_timeout: float | None = None,
    ) -> dict[str, Any]:
        """A rolling redeploy: ``action`` (UPDATE) on every member, with the
        new inputs or config, released by the policy (``min_in_service``
        counts the members COMPLETE before it).  ``servers``, when given,
        is the new membership: members added are deployed, removed ones
        undeployed (last); when only the membership changes, the members
        that stay and whose inputs and config are unchanged and COMPLETE
        are left alone, as Heat leaves a group's unchanged members.
        ``input_values`` are merged into the shared ones; ``policy``
        replaces the group's.  Refused (GroupBusy) while
        an operation runs."""
        from swflows import groups

        record = self._idle_group(group)
        wanted = record.servers if servers is None else servers
        kept = {
            name: values
            for name, values in record.member_values.items()
            if isinstance(wanted, Mapping) and name in wanted
        }
        members, own = groups.check_members(
            wanted, {**kept, **dict(member_values or {})}
        )
        parsed = rollout.Policy.from_dict(
            policy if policy is not None else record.policy
        )
        source_id = config_id or record.config_id
        source = self.store.get_config(source_id)
        derive.check_action(source, action, record.actions)
        current = groups.members_of(self, record, list(record.deployments))
        deployments = dict(record.deployments)
        shared = {**record.input_values, **dict(input_values or {})}
        planned: dict[str, dict[str, Any]] = {}
        for name, server_id in members.items():
            found = current.get(name)
            if found is not None and found.server_id == server_id:
                changed = (
                    servers is None
                    or action != model.UPDATE
                    or source_id != found.source_config_id
                    or found.status != states.COMPLETE
                    or {**shared, **own.get(name, {})} != found.input_values
                )
                if not changed:
                    continue  # only the membership changed: left alone
                planned[name] = groups._member(
                    server_id,
                    "redeploy",
                    found.id,
                    generation=found.generation + 1,
                    serving=found.status == states.COMPLETE,
                )
            else:
                deployments[name] = model.new_id()
                planned[name] = groups._member(server_id, "deploy", deployments[name])
                if found is not None:  # moved to another server
                    planned[f"{name}.old"] = groups._member(
                        found.server_id,
                        "undeploy",
                        found.id,
                        generation=found.generation + 1,
                    )
                    deployments[f"{name}.old"] = found.id
        for name, found in current.items():
            if name not in members:
                planned[name] = groups._member(
                    found.server_id,
                    "undeploy",
                    found.id,
                    generation=found.generation + 1,
                )
        operation = groups.new_operation(groups.REDEPLOY, action, planned, parsed)
        return self._group_operation(
            record,
            operation,
            wait,
            wait_timeout,
            config_id=source_id,
            servers=members,
            member_values=own,
            input_values=shared,
            policy=parsed.to_dict(),
            deployments=deployments,
            action=action,
        )

    def trigger_group(
        self,
        group: str,
        action: str,
        *,
        input_values: Mapping[str, Any] | None = None,
        policy: Mapping[str, Any] | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
    ) -> dict[str, Any]:
        """Run ``action`` on every member with a deployment, each as a new
        deployment (as :meth:`trigger` does), released by the policy
        (``policy`` for this operation only).  The outcome of each is in
        :meth:`show_group`'s ``operation``; the members' own deployments
        are left as they were."""
        from swflows import groups

        record = self._idle_group(group)
        parsed = rollout.Policy.from_dict(
            policy if policy is not None else record.policy
        )
        current = groups.members_of(self, record, list(record.deployments))
        if not current:
            raise exceptions.ValidationError(
                "group", f"group {record.name} has no member deployed to trigger"
            )
        source = self.store.get_config(record.config_id)
        for found in current.values():
            derive.check_action(source, action, found.actions)
        planned = {
            name: groups._member(
                found.server_id, "trigger", model.new_id(), parent_id=found.id
            )
            for name, found in current.items()
        }
        operation = groups.new_operation(
            groups.TRIGGER, action, planned, parsed, input_values=input_values
        )
        return self._group_operation(record, operation, wait, wait_timeout)

    def delete_group(
        self,
        group: str,
        *,
        policy: Mapping[str, Any] | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
    ) -> dict[str, Any] | None:
        """Undeploy every member (DELETE runs where the config has it),
        released by the policy, then remove the group and the deployments
        of actions triggered on its members.  Returns None once
        it is gone (with ``wait``); if some member could not be undeployed
        the group stays, FAILED, and is returned."""
        from swflows import groups

        record = self._idle_group(group)
        parsed = rollout.Policy.from_dict(
            policy if policy is not None else record.policy
        )
        current = groups.members_of(self, record, list(record.deployments))
        planned = {
            name: groups._member(
                found.server_id,
                "undeploy",
                found.id,
                generation=found.generation + 1,
            )
            for name, found in current.items()
        }
        for name, found in current.items():  # actions triggered on it
            for child in self.store.list_deployments(parent_id=found.id):
                if child.status != states.IN_PROGRESS:
                    planned[f"{name}.{child.action}.{child.id[:8]}"] = groups._member(
                        child.server_id, "undeploy", child.id
                    )
        operation = groups.new_operation(groups.DELETE, model.DELETE, planned, parsed)
        try:
            return self._group_operation(record, operation, wait, wait_timeout)
        except exceptions.GroupNotFound:
            return None

    def cancel_group(self, group: str, reason: str | None = None) -> dict[str, Any]:
        """Stop a group's operation: no member starts any more, the running
        ones are cancelled (FAILED, kind ``cancelled``); the operation ends
        FAILED ``cancelled``.  Refused (InvalidTransition) unless it runs."""
        from swflows import groups
        from swflows.persistence.groups import GroupStore

        rows = GroupStore(self.store)
        for _ in range(10):
            record = rows.get(group)
            if record.status != states.IN_PROGRESS:
                raise exceptions.InvalidTransition(None, record.status, "cancelled")
            operation = dict(record.operation)
            operation["cancel"] = reason or ""
            try:
                record = rows.update(record, operation=operation)
                break
            except exceptions.ConcurrentUpdate:
                continue
        for member in record.operation["members"].values():
            if member["state"] != "RUNNING":
                continue
            try:
                self.cancel(str(member["deployment_id"]), reason)
            except (exceptions.DeploymentNotFound, exceptions.InvalidTransition):
                continue  # not waiting: it ends by itself
        self._wake_groups()
        return groups.describe(self, rows.get(record.id))

    def show_group(self, group: str) -> dict[str, Any]:
        """A group by id or name: status and reason, each member's
        deployment status and reason, outputs as maps keyed by member name
        (``outputs[name][member]``), and its last operation's progress."""
        from swflows import groups
        from swflows.persistence.groups import GroupStore

        return groups.describe(self, GroupStore(self.store).get(group))

    def list_groups(self) -> list[dict[str, Any]]:
        """Every group: id, name, config, members, action, status, reason."""
        from swflows.persistence.groups import GroupStore

        return [
            {
                "id": record.id,
                "name": record.name,
                "config_id": record.config_id,
                "members": len(record.servers),
                "action": record.action,
                "status": record.status,
                "status_reason": record.status_reason,
            }
            for record in GroupStore(self.store).find()
        ]

    def wait_group(self, group: str, timeout: float | None = None) -> dict[str, Any]:
        """Block until the group's operation ended; :meth:`show_group`."""
        from swflows import groups

        self.runner  # noqa: B018 -- the driver runs beside the runner
        return groups.describe(self, groups.wait(self, group, timeout))

    def _idle_group(self, group: str) -> Any:
        from swflows import groups
        from swflows.persistence.groups import GroupStore

        record = GroupStore(self.store).get(group)
        if record.status == states.IN_PROGRESS:
            raise groups.GroupBusy(record.name, record.action)
        return record

    def _group_operation(
        self,
        record: Any,
        operation: dict[str, Any],
        wait: bool,
        wait_timeout: float | None,
        **changes: Any,
    ) -> dict[str, Any]:
        from swflows.persistence.groups import GroupStore

        count = len(operation["members"])
        GroupStore(self.store).update(
            record,
            operation=operation,
            action=str(changes.pop("action", operation["action"])),
            status=states.IN_PROGRESS,
            status_reason=f"0 done, 0 running, 0 failed, {count} left",
            **changes,
        )
        return self._group_started(record.id, wait, wait_timeout)

    def _group_started(
        self, group_id: str, wait: bool, wait_timeout: float | None
    ) -> dict[str, Any]:
        self._wake_groups()
        if wait:
            return self.wait_group(group_id, wait_timeout)
        return self.show_group(group_id)

    def _wake_groups(self) -> None:
        self.runner  # noqa: B018 -- starts the runner and the driver
        if self._groups is not None:
            self._groups.wake()

    # -- internals ------------------------------------------------------
    def _timeout(self, timeout: int | None) -> int:
        value = int(timeout if timeout is not None else self.conf.deployment_timeout)
        if value <= 0:
            raise exceptions.ValidationError("timeout", "must be a positive number")
        return value

    def _runs_delete(self, current: model.Deployment) -> bool:
        """Whether undeploying ``current`` runs its config's DELETE action.

        A triggered action's record is removed without running DELETE:
        removing a BACKUP's record must not uninstall what was backed up.
        """
        if current.source_config_id is None or current.parent_id is not None:
            return False
        source = self.store.get_config(current.source_config_id)
        return bool(source.handles(model.DELETE, current.actions))

    @staticmethod
    def _refuse_running(current: model.Deployment) -> None:
        if current.status == states.IN_PROGRESS:
            raise exceptions.InvalidTransition(
                current.id, current.status, states.IN_PROGRESS
            )

    def _start(
        self,
        kind: str,
        plan: common.Plan | dict[str, Any],
        inputs: dict[str, Any],
    ) -> tuple[str, concurrent.futures.Future[str]]:
        kwargs = plan if isinstance(plan, dict) else plan.to_kwargs()
        return self.runner.launch(kind, kwargs, inputs)

    def _result(
        self,
        deployment_id: str,
        started: tuple[str, concurrent.futures.Future[str]],
        wait: bool,
        wait_timeout: float | None,
        generation: int = FIRST_GENERATION,
    ) -> model.Deployment:
        """The deployment once its flow ended (``wait``), else as soon as
        the flow started the action of ``generation`` (IN_PROGRESS, unless
        the flow already ended it) or ended."""
        flow_id, future = started
        if wait:
            self.runner.wait(flow_id, wait_timeout)
            return self.show(deployment_id)

        def look() -> model.Deployment | None:
            ended = future.done()
            if ended:
                future.result()  # raise the flow's error, if any
            try:
                found = self.show(deployment_id)
            except exceptions.DeploymentNotFound:
                if ended:
                    raise
                return None
            if found.generation < generation and not ended:
                return None  # the row as it was before this action
            return found

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_result(lambda found: found is None),
            wait=tenacity.wait_fixed(0.05),
            stop=tenacity.stop_after_delay(wait_timeout or 60),
            retry_error_callback=lambda _: self.show(deployment_id),
        )
        found = retrying(look)
        return found if found is not None else self.show(deployment_id)


def _input_values(values: Mapping[str, Any] | None) -> dict[str, Any]:
    """``input_values`` as a flow stores them: names as text, JSON values.

    Checked before a flow starts, whose stored inputs could not hold them.
    """
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise exceptions.ValidationError("input_values", "must be a mapping")
    for key, value in values.items():
        if not isinstance(key, str):
            raise exceptions.ValidationError(
                "input_values", f"names must be strings, not {type(key).__name__}"
            )
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            raise exceptions.ValidationError(
                f"input_values.{key}",
                "must have a JSON form (no NaN, infinity or non-JSON type; "
                "not nested too deeply)",
            ) from None
    return dict(values)
