"""The catalogue for composing flows of one's own: tasks and a ready sub-flow.

A developer's flow is built by a module-level *factory* taking JSON
keyword arguments, run by :meth:`swflows.api.Swflows.run_flow`, parked
while it awaits a signal and resumed after a restart exactly as swflows'
own flows are.  ``docs/composing.md`` is the guide; in short:

* :func:`trigger_subflow` gives a linear sub-flow "run ACTION of an
  existing deployment's config on its server, with these inputs, and give
  back the outcome under a chosen name".  Its inner values are kept under
  ``<name>.<value>``, so any number of them live in one flow; its inputs
  may be bound to what earlier steps provided (``inputs_from``); it can be
  dropped into a linear, unordered or graph flow.
* :data:`CATALOGUE` lists every task with what it requires and provides,
  for those who wire tasks themselves.
* :func:`link_if_complete` links two steps of a graph flow so that the
  second (and all after it) runs only if a trigger ended COMPLETE; the
  others are left untouched (TaskFlow marks them IGNORE).

Every trigger makes a *new* deployment (as :meth:`~swflows.api.Swflows.
trigger` does) whose id is derived from the flow's id and the sub-flow's
name, so a step run again after a crash finds what the first run made.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import re
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from taskflow import task as tf_task
from taskflow.patterns import graph_flow, linear_flow

from swflows import derive, exceptions, states
from swflows.flows import common
from swflows.services import Services
from swflows.tasks import base, config, deployment, identity, metadata, signal

#: the store key under which a custom flow finds its own id (the runner
#: stores it when the flow starts)
FLOW_ID_KEY = "flow_id"
#: the key of :func:`planning`'s mapping for the configured default transport
DEFAULT_TRANSPORT = "DEFAULT"
#: names a sub-flow and the keys it provides may take
NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
#: namespace of the deployment ids triggers derive from (flow id, name)
TRIGGER_NAMESPACE = uuid.UUID("0b6f3e43-5d0c-4c53-9a4e-7d1f0c1c9a51")
#: the values :class:`PrepareTrigger` provides to the rest of its sub-flow
TRIGGER_VALUES = (
    "deployment_id",
    "server_id",
    "source_config_id",
    "action",
    "input_values",
    "name",
    "timeout",
    "generation",
    "signal_transport",
    "parent_id",
    "actions",
)

_PLANS: contextvars.ContextVar[Mapping[str, Mapping[str, Any]] | None] = (
    contextvars.ContextVar("swflows_plans", default=None)
)


@contextlib.contextmanager
def planning(plans: Mapping[str, Mapping[str, Any]]) -> Iterator[None]:
    """Let factories called in this block resolve transports from ``plans``.

    The runner resolves the plans (signal transport -> :class:`~swflows.
    flows.common.Plan` arguments) from the configuration once, when a
    flow starts, stores them with the flow and builds it inside this
    block, again from the stored plans when it resumes: a resumed flow is
    the same graph even if the configuration changed meanwhile.
    """
    token = _PLANS.set(plans)
    try:
        yield
    finally:
        _PLANS.reset(token)


def plan_for(signal_transport: str | None = None) -> common.Plan:
    """The plan of ``signal_transport`` (None: the configured default)."""
    plans = _PLANS.get()
    if plans is None:
        raise exceptions.FlowError(
            None,
            "a trigger sub-flow resolves its transports when Swflows.run_flow "
            "builds it; outside of it, pass plan= explicitly",
        )
    key = signal_transport.upper() if signal_transport else DEFAULT_TRANSPORT
    if key not in plans:
        raise exceptions.ValidationError(
            "signal_transport",
            f"{signal_transport} is not offered here; offered: "
            + ", ".join(sorted(k for k in plans if k != DEFAULT_TRANSPORT)),
        )
    return common.Plan.from_kwargs(dict(plans[key]))


def inner(name: str, key: str) -> str:
    """The store key of sub-flow ``name``'s own value ``key``."""
    return f"{name}.{key}"


def check_name(field: str, value: str) -> str:
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise exceptions.ValidationError(
            field,
            f"{value!r} must start with a letter and hold only letters, digits, "
            "'_' or '-' (at most 64)",
        )
    return value


def trigger_deployment_id(flow_id: str, name: str) -> str:
    """The id of the deployment sub-flow ``name`` of flow ``flow_id`` makes."""
    return str(uuid.uuid5(TRIGGER_NAMESPACE, f"{flow_id}/{name}"))


def _resolve(values: Mapping[str, Any], path: str) -> Any:
    key, *fields = path.split(".")
    value = values[key]
    for field in fields:
        if not isinstance(value, Mapping) or field not in value:
            raise exceptions.ValidationError(
                "inputs_from", f"{path}: {key} has no {field!r} there"
            )
        value = value[field]
    return value


# ----------------------------------------------------------------- tasks


class PrepareTrigger(base.Task):
    """Resolve what a trigger runs: the new deployment's id and inputs.

    Reads the existing deployment (its server, its config) and checks the
    config has the action.  Input values are the deployment's, overridden
    by the fixed ``input_values``, overridden by those bound from earlier
    steps (``inputs_from``: input name -> ``key`` or ``key.field.field``).
    Provides every value of :data:`TRIGGER_VALUES` under ``<name>.``.
    """

    def __init__(
        self,
        name: str,
        *,
        deployment_id: str,
        action: str,
        input_values: Mapping[str, Any] | None = None,
        inputs_from: Mapping[str, str] | None = None,
        timeout: int | None = None,
        signal_transport: str,
        stack_user: bool = False,
    ) -> None:
        self.sources = dict(inputs_from or {})
        keys = sorted({path.split(".", 1)[0] for path in self.sources.values()})
        provided = {inner(name, key) for key in TRIGGER_VALUES}
        if not stack_user:
            provided.add(inner(name, "stack_user"))
        tf_task.Task.__init__(
            self,
            name=base.atom_name(name, type(self).__name__),
            provides=provided,
            requires=keys,
        )
        self.flow_name = name
        self.deployment_id = deployment_id
        self.action = action
        self.input_values = dict(input_values or {})
        self.timeout = timeout
        self.signal_transport = signal_transport
        self.stack_user = stack_user

    def execute(
        self, services: Services, flow_id: str, **sources: Any
    ) -> dict[str, Any]:
        original = services.store.get_deployment(self.deployment_id)
        if original.source_config_id is None:
            raise exceptions.ValidationError(
                "deployment_id", f"deployment {self.deployment_id} has no config"
            )
        source = services.store.get_config(original.source_config_id)
        derive.check_action(
            source, self.action, None if source.is_component else [self.action]
        )
        bound = {
            input_name: _resolve(sources, path)
            for input_name, path in self.sources.items()
        }
        timeout = int(
            self.timeout or original.timeout or services.conf.deployment_timeout
        )
        values: dict[str, Any] = {
            "deployment_id": trigger_deployment_id(flow_id, self.flow_name),
            "server_id": original.server_id,
            "source_config_id": source.id,
            "action": self.action,
            "input_values": {**original.input_values, **self.input_values, **bound},
            "name": f"{original.name or source.name}-{self.action}",
            "timeout": timeout,
            "generation": 1,
            "signal_transport": self.signal_transport,
            "parent_id": original.id,
            "actions": None,
        }
        if not self.stack_user:
            values["stack_user"] = None
        return {inner(self.flow_name, key): value for key, value in values.items()}


class Succeeded(base.Task):
    """Whether a trigger's result (:class:`ReadOutputs`) says COMPLETE."""

    def execute(self, result: Mapping[str, Any]) -> bool:
        return isinstance(result, Mapping) and result.get("status") == states.COMPLETE


class ReadOutputs(base.Task):
    """The deployment's outcome, as a step's result: its status, reason and
    outputs (``{"deployment_id", "server_id", "action", "status",
    "status_reason", "reason", "outputs"}``).  Only reads."""

    def execute(self, services: Services, deployment_id: str) -> dict[str, Any]:
        found = services.store.get_deployment(deployment_id)
        return {
            "deployment_id": found.id,
            "server_id": found.server_id,
            "action": found.action,
            "status": found.status,
            "status_reason": found.status_reason,
            "reason": dict(found.reason or {}),
            "outputs": dict(found.output_values),
        }


# -------------------------------------------------------------- catalogue


@dataclasses.dataclass(frozen=True)
class Entry:
    """One task of the catalogue: what it needs and what it gives."""

    task: type[base.Task]
    requires: tuple[str, ...]
    provides: tuple[str, ...]
    summary: str


def _entry(cls: type[base.Task], summary: str) -> Entry:
    import inspect

    params = inspect.signature(cls.execute).parameters
    requires = tuple(
        p
        for p in params
        if p not in ("self", "services") and params[p].kind is not params[p].VAR_KEYWORD
    )
    given = cls.default_provides
    provides: tuple[str, ...] = (
        () if given is None else (given,) if isinstance(given, str) else tuple(given)
    )
    return Entry(cls, requires, provides, summary)


#: every public task, by class name (see ``docs/composing.md``)
CATALOGUE: dict[str, Entry] = {
    entry.task.__name__: entry
    for entry in (
        _entry(PrepareTrigger, "resolve a trigger's new deployment and inputs"),
        _entry(identity.EnsureStackUser, "the deployment's Keystone stack user"),
        _entry(signal.CreateSignalStore, "the place the server signals to"),
        _entry(config.DeriveConfig, "the derived config of this action"),
        _entry(deployment.CreateDeployment, "the deployment row"),
        _entry(metadata.PublishMetadata, "publish the server's metadata"),
        _entry(signal.AwaitSignal, "the action's outcome (the flow parks here)"),
        _entry(signal.DeleteSignalStore, "remove the signal store"),
        _entry(ReadOutputs, "the deployment's status and outputs"),
        _entry(Succeeded, "whether a trigger's result is COMPLETE"),
        _entry(deployment.StartAction, "run a new action on a deployment"),
        _entry(config.DeleteDerivedConfig, "remove a derived config"),
        _entry(deployment.DeleteDeployment, "remove a deployment row"),
        _entry(identity.DeleteStackUser, "remove a deployment's stack user"),
    )
}


def _bound(
    name: str,
    cls: type[base.Task],
    *args: Any,
    provides: Any = None,
    **kwargs: Any,
) -> base.Task:
    """``cls`` reading and writing its values under ``<name>.``."""
    import inspect

    params = inspect.signature(cls.execute).parameters
    rebind = {
        p: inner(name, p)
        for p in params
        if p not in ("self", "services") and params[p].kind is not params[p].VAR_KEYWORD
    }
    given = cls.default_provides if provides is None else provides
    if isinstance(given, str):
        renamed: Any = inner(name, given)
    elif given is None:
        renamed = None
    else:
        renamed = tuple(inner(name, key) for key in given)
    made = cls(name, *args, rebind=rebind, provides=renamed, **kwargs)
    return made


def trigger_subflow(
    name: str,
    *,
    deployment_id: str,
    action: str,
    input_values: Mapping[str, Any] | None = None,
    inputs_from: Mapping[str, str] | None = None,
    provides: str | None = None,
    timeout: int | None = None,
    signal_transport: str | None = None,
    plan: common.Plan | Mapping[str, Any] | None = None,
) -> linear_flow.Flow:
    """Run ``action`` of deployment ``deployment_id``'s config on its server.

    A new deployment is made (``<original name>-<ACTION>``, its
    ``parent_id`` the original), its metadata published, its signal
    awaited (the flow parks), and its outcome provided under ``provides``
    (default: ``name``) as ``{"status", "status_reason", "reason",
    "outputs", "deployment_id", "server_id", "action"}``.  A FAILED signal
    is such a result, not an error.  ``inputs_from`` maps an input name to
    ``key`` or ``key.field...`` of a value an earlier step provided, e.g.
    ``{"archive": "backup.outputs.archive"}``.  ``signal_transport``
    defaults to the configured one; ``plan`` is only for building the flow
    outside :meth:`~swflows.api.Swflows.run_flow`.
    """
    check_name("name", name)
    result_key = check_name("provides", provides or name)
    for input_name, path in (inputs_from or {}).items():
        if not isinstance(path, str) or not all(path.split(".")):
            raise exceptions.ValidationError(
                "inputs_from", f"{input_name}: {path!r} is not a key or key.field"
            )
    if plan is None:
        resolved = plan_for(signal_transport)
    elif isinstance(plan, common.Plan):
        resolved = plan
    else:
        resolved = common.Plan.from_kwargs(dict(plan))
    flow = linear_flow.Flow(f"swflows.{name}")
    flow.add(
        PrepareTrigger(
            name,
            deployment_id=deployment_id,
            action=action,
            input_values=input_values,
            inputs_from=inputs_from,
            timeout=timeout,
            signal_transport=resolved.signal_transport,
            stack_user=resolved.needs_stack_user,
        )
    )
    if resolved.needs_stack_user:
        flow.add(_bound(name, identity.EnsureStackUser))
    transport = (resolved.signal_transport, resolved.signal_options)
    flow.add(
        _bound(name, signal.CreateSignalStore, *transport),
        _bound(name, config.DeriveConfig, *transport),
        _bound(
            name, deployment.CreateDeployment, **common.publishing_options(resolved)
        ),
        _bound(
            name,
            metadata.PublishMetadata,
            resolved.config_transport,
            resolved.config_options,
        ),
    )
    if resolved.waits:
        flow.add(
            _bound(
                name,
                signal.AwaitSignal,
                *transport,
                config_transport=resolved.config_transport,
                config_options=resolved.config_options,
            )
        )
    flow.add(
        _bound(name, signal.DeleteSignalStore, *transport),
        ReadOutputs(
            name,
            rebind={"deployment_id": inner(name, "deployment_id")},
            provides=result_key,
        ),
    )
    return flow


def link_if_complete(
    flow: graph_flow.Flow, previous: Any, following: Any, result: str
) -> None:
    """In graph ``flow``, run ``following`` after ``previous`` only if the
    trigger result ``result`` (a sub-flow's ``provides``) is COMPLETE.

    Otherwise ``following`` and everything after it are left untouched
    (TaskFlow marks them IGNORE) and the flow still ends successfully: a
    FAILED signal is a result.  A :class:`Succeeded` step named after
    ``result`` is added between the two.
    """
    gate = Succeeded(check_name("result", result), rebind={"result": result})
    flow.add(gate)
    flow.link(previous, gate)
    flow.link(gate, following, decider=_all_true)


def _all_true(history: Mapping[str, Any]) -> bool:
    return all(bool(value) for value in history.values())


__all__ = [
    "CATALOGUE",
    "DEFAULT_TRANSPORT",
    "FLOW_ID_KEY",
    "Entry",
    "PrepareTrigger",
    "ReadOutputs",
    "Succeeded",
    "inner",
    "link_if_complete",
    "plan_for",
    "planning",
    "trigger_deployment_id",
    "trigger_subflow",
]
