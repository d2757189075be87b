"""Pieces shared by the flow factories.

Factories are module-level functions taking JSON-only keyword arguments:
every configuration-dependent choice (transports and their options, whether
a stack user is needed, whether to wait) is resolved before the flow starts
and passed in, so a resumed flow is rebuilt as the same graph.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from taskflow import flow as tf_flow

from swflows.tasks import config, deployment, identity, metadata, signal


@dataclasses.dataclass(frozen=True)
class Plan:
    """The resolved choices a factory builds from (its JSON arguments)."""

    signal_transport: str
    config_transport: str
    signal_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    config_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    needs_stack_user: bool = False
    waits: bool = True

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> Plan:
        return cls(**kwargs)

    def to_kwargs(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def add_signal_setup(flow: tf_flow.Flow, name: str, plan: Plan) -> None:
    """Stack user (when needed), signal store and derived config."""
    user_inject = None
    if plan.needs_stack_user:
        flow.add(identity.EnsureStackUser(name))
    else:
        user_inject = {"stack_user": None}
    flow.add(
        signal.CreateSignalStore(
            name, plan.signal_transport, plan.signal_options, inject=user_inject
        ),
        config.DeriveConfig(
            name, plan.signal_transport, plan.signal_options, inject=user_inject
        ),
    )


def publishing_options(plan: Plan) -> dict[str, Any]:
    return {
        "waits": plan.waits,
        "config_transport": plan.config_transport,
        "config_options": plan.config_options,
    }


def add_publish_and_wait(flow: tf_flow.Flow, name: str, plan: Plan) -> None:
    """Publish the metadata, then wait for the signal and drop its store."""
    flow.add(metadata.PublishMetadata(name, plan.config_transport, plan.config_options))
    if plan.waits:
        flow.add(
            signal.AwaitSignal(
                name,
                plan.signal_transport,
                plan.signal_options,
                config_transport=plan.config_transport,
                config_options=plan.config_options,
            )
        )
    flow.add(signal.DeleteSignalStore(name, plan.signal_transport, plan.signal_options))


__all__ = [
    "Plan",
    "add_publish_and_wait",
    "add_signal_setup",
    "config",
    "deployment",
    "publishing_options",
]
