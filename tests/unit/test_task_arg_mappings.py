"""A task's argument mapping is derived from its methods' signatures once
per class and arguments given, and is the one TaskFlow would derive."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from taskflow import task as tf_task

from swflows import flows
from swflows import transport_names as names
from swflows.tasks import base

MAPPED = (
    "rebind",
    "requires",
    "optional",
    "revert_rebind",
    "revert_optional",
    "provides",
)


def plans() -> list[dict[str, Any]]:
    found = []
    for signal, config, user, waits in itertools.product(
        (names.TEMP_URL_SIGNAL, names.ZAQAR_SIGNAL, names.HEAT_SIGNAL, names.NO_SIGNAL),
        (names.POLL_TEMP_URL, names.ZAQAR_MESSAGE, names.POLL_SERVER_HEAT),
        (False, True),
        (False, True),
    ):
        found.append(
            {
                "signal_transport": signal,
                "config_transport": config,
                "signal_options": {"container": "signals"},
                "config_options": {},
                "needs_stack_user": user,
                "waits": waits,
            }
        )
    return found


def mappings(kind: str, plan: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    flow = flows.FACTORIES[kind](**plan)
    return [
        (atom.name, {attr: _plain(getattr(atom, attr)) for attr in MAPPED})
        for atom in flow
    ]


def _plain(value: Any) -> Any:
    return dict(value) if isinstance(value, dict) else list(value)


@pytest.mark.parametrize("kind", sorted(flows.FACTORIES))
def test_every_flow_maps_its_tasks_arguments_as_taskflow_does(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = [mappings(kind, plan) for plan in plans()]
    again = [mappings(kind, plan) for plan in plans()]  # from what was kept
    monkeypatch.setattr(
        base.Task, "_build_arg_mapping", tf_task.Task._build_arg_mapping
    )
    derived = [mappings(kind, plan) for plan in plans()]
    assert built == derived
    assert again == derived


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each mapping TaskFlow derives, as ``Class.method``, none kept yet."""
    made: list[str] = []
    derive = tf_task.Task._build_arg_mapping

    def counted(self: Any, executor: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(f"{type(self).__name__}.{executor.__name__}")
        return derive(self, executor, *args, **kwargs)

    monkeypatch.setattr(base, "_MAPPINGS", {})
    monkeypatch.setattr(tf_task.Task, "_build_arg_mapping", counted)
    return made


def test_a_mapping_is_derived_once_per_class_and_arguments(calls: list[str]) -> None:
    plan = plans()[0]
    first = flows.FACTORIES["deploy"](**plan)
    once = len(calls)
    assert once == 2 * len(list(first))  # execute and revert of each
    second = flows.FACTORIES["deploy"](**plan)
    assert len(calls) == once
    # each task has a mapping of its own: changing one leaves the others
    one, other = next(iter(first)), next(iter(second))
    assert one.rebind == other.rebind
    one.rebind["extra"] = "extra"
    assert "extra" not in other.rebind


def test_a_task_given_other_arguments_gets_its_own_mapping() -> None:
    class Echo(base.Task):
        def execute(self, services: Any, deployment_id: str, note: str = "") -> str:
            return note

    plain = Echo("test")
    rebound = Echo("test", rebind={"deployment_id": "other_id"})
    injected = Echo("test", inject={"note": "given"})
    assert plain.rebind["deployment_id"] == "deployment_id"
    assert rebound.rebind["deployment_id"] == "other_id"
    assert "other_id" in rebound.requires and "other_id" not in plain.requires
    assert "note" in plain.optional
    assert "note" not in injected.optional
    again = Echo("test")
    assert again.rebind == plain.rebind
    assert set(again.requires) == set(plain.requires)


def test_a_task_with_arguments_that_are_not_names_is_mapped_every_time() -> None:
    key = base._mapping_key(
        base.Task, base.Task.execute, [["not", "hashable"]], None, True, None, None
    )
    assert key is None


class _Plain(tf_task.Task):  # type: ignore[misc]
    def execute(self, server_id: str, note: str = "") -> str:
        return note

    def revert(self, server_id: str, **kwargs: Any) -> None:
        return None


class _Once(base.ArgumentsOnce, _Plain):
    """A custom flow's task with its arguments mapped once per class."""


def test_a_custom_task_mixing_it_in_is_mapped_once_as_taskflow_maps_it(
    calls: list[str],
) -> None:
    built = [
        _Once("a", rebind={"server_id": "host"}),
        _Once("b", rebind={"server_id": "host"}),
        _Once("c"),
        _Once("d"),
    ]
    # execute and revert, once for each set of arguments given
    assert sorted(calls) == ["_Once.execute"] * 2 + ["_Once.revert"] * 2
    plain = [
        _Plain("a", rebind={"server_id": "host"}),
        _Plain("b", rebind={"server_id": "host"}),
        _Plain("c"),
        _Plain("d"),
    ]
    for ours, theirs in zip(built, plain, strict=True):
        assert {a: _plain(getattr(ours, a)) for a in MAPPED} == {
            a: _plain(getattr(theirs, a)) for a in MAPPED
        }
