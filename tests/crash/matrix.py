"""The kill points of the crash matrix, derived from the flow factories.

Every factory of :data:`swflows.flows.FACTORIES` is built with each signal
transport's :class:`~swflows.flows.common.Plan` (and each value of its own
boolean arguments, such as undeploy's ``run_delete_action``); every atom of
the graph it returns gives three kill points (and the atoms only an extra
plan's graph has, the stack user's of ZAQAR_SIGNAL in credentials mode,
give theirs with that plan):

``before``
    at the start of ``execute``, before anything is done;
``after``
    at the end of ``execute``, after its side effect but before TaskFlow
    saved its result;
``revert``
    at the end of ``revert``, after its side effect, while the flow
    reverts from a failure injected after the flow's last atom.

A task added to a flow is therefore covered without touching the tests.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from swflows import flows
from swflows.flows import common

#: the signal transports of the matrix, each with the plan the API gives it
#: for a server published through POLL_TEMP_URL
PLANS: dict[str, common.Plan] = {
    "TEMP_URL_SIGNAL": common.Plan("TEMP_URL_SIGNAL", "POLL_TEMP_URL"),
    "ZAQAR_SIGNAL": common.Plan("ZAQAR_SIGNAL", "POLL_TEMP_URL"),
}
#: plans whose graphs have atoms the plans above do not: those atoms only
#: are killed with them
EXTRA_PLANS: dict[str, common.Plan] = {
    "ZAQAR_SIGNAL-credentials": common.Plan(
        "ZAQAR_SIGNAL",
        "POLL_TEMP_URL",
        signal_options={"auth": "credentials"},
        needs_stack_user=True,
    ),
}
ALL_PLANS = {**PLANS, **EXTRA_PLANS}
#: the options a plan needs in the configuration file ([DEFAULT])
PLAN_OPTIONS: dict[str, dict[str, str]] = {
    "ZAQAR_SIGNAL-credentials": {"zaqar_signal_auth": "credentials"},
}
PHASES = ("before", "after", "revert")


@dataclasses.dataclass(frozen=True)
class Variant:
    """One graph a factory builds: its kind and its own arguments."""

    kind: str
    args: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        own = ",".join(f"{key}={value}" for key, value in self.args)
        return f"{self.kind}[{own}]" if own else self.kind

    def build(self, plan: common.Plan) -> Any:
        return flows.FACTORIES[self.kind](**plan.to_kwargs(), **dict(self.args))

    def atoms(self, plan: common.Plan) -> list[str]:
        """Names of the flow's atoms, in the order a linear flow runs them."""
        return [atom.name for atom in self.build(plan)]


@dataclasses.dataclass(frozen=True)
class KillPoint:
    variant: Variant
    #: a key of :data:`ALL_PLANS`
    plan: str
    atom: str
    phase: str
    #: the flow's atoms, in order (the last one fails for ``revert``)
    atoms: tuple[str, ...]

    @property
    def id(self) -> str:
        short = self.atom.rsplit(".", 1)[-1]
        return f"{self.variant.label}-{self.plan}-{short}-{self.phase}"

    @property
    def signal_transport(self) -> str:
        return ALL_PLANS[self.plan].signal_transport

    @property
    def stack_users(self) -> bool:
        """Whether each deployment has a stack user while it exists."""
        return ALL_PLANS[self.plan].needs_stack_user

    @property
    def fail_atom(self) -> str | None:
        """The atom made to fail after its work so the flow reverts."""
        return self.atoms[-1] if self.phase == "revert" else None


class UnknownFactoryArgument(LookupError):
    """A factory takes an argument the matrix cannot enumerate."""


def variants(kind: str) -> list[Variant]:
    """Every graph factory ``kind`` builds: one per combination of its own
    boolean arguments (those besides the plan's)."""
    factory = flows.FACTORIES[kind]
    plan_fields = {field.name for field in dataclasses.fields(common.Plan)}
    combos: list[tuple[tuple[str, Any], ...]] = [()]
    for param in inspect.signature(factory).parameters.values():
        if param.kind is param.VAR_KEYWORD or param.name in plan_fields:
            continue
        if not isinstance(param.default, bool):
            raise UnknownFactoryArgument(
                f"{kind} factory argument {param.name!r} is not a boolean with "
                "a default: teach tests/crash/matrix.py its values"
            )
        combos = [
            (*combo, (param.name, value)) for combo in combos for value in (False, True)
        ]
    return [Variant(kind, combo) for combo in combos]


def all_variants() -> list[Variant]:
    return [variant for kind in flows.FACTORIES for variant in variants(kind)]


def kill_points() -> list[KillPoint]:
    """Every kill point of every flow, per transport and phase."""
    points = []
    for variant in all_variants():
        covered: set[str] = set()
        for label, plan in ALL_PLANS.items():
            atoms = tuple(variant.atoms(plan))
            for atom in atoms:
                if label in EXTRA_PLANS and atom in covered:
                    continue
                for phase in PHASES:
                    points.append(KillPoint(variant, label, atom, phase, atoms))
            if label in PLANS:
                covered.update(atoms)
    return points
