"""The catalogue and the trigger sub-flow, built without a cloud."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from taskflow import engines, task
from taskflow.patterns import graph_flow, linear_flow, unordered_flow

from swflows import exceptions
from swflows.engine import runner
from swflows.flows import common, compose

PLAN = common.Plan("TEMP_URL_SIGNAL", "POLL_TEMP_URL")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "composing.md"


def trigger(name: str, **kwargs: Any) -> Any:
    kwargs.setdefault("deployment_id", "d-" + name)
    kwargs.setdefault("action", "BACKUP")
    return compose.trigger_subflow(name, plan=PLAN, **kwargs)


def atoms(flow: Any) -> list[Any]:
    found = []
    for node, _ in flow.iter_nodes():
        found.extend(atoms(node) if hasattr(node, "iter_nodes") else [node])
    return found


@pytest.mark.parametrize(
    "pattern", [linear_flow.Flow, unordered_flow.Flow, graph_flow.Flow]
)
def test_two_triggers_coexist_in_any_pattern(pattern: Any) -> None:
    flow = pattern("two")
    flow.add(trigger("a"), trigger("b", provides="b_out"))
    names = [atom.name for atom in atoms(flow)]
    assert len(names) == len(set(names)) == 16  # 8 each
    assert {n.split(".")[1] for n in names} == {"a", "b"}
    provided = {key for atom in atoms(flow) for key in atom.provides}
    assert {"a", "b_out", "a.deployment_id", "b.signal_store"} <= provided
    # every requirement is provided inside the flow, but flow_id and services
    required = {key for atom in atoms(flow) for key in atom.requires}
    assert required - provided == {"flow_id", "services"}
    engines.load(flow, store={"flow_id": "f", "services": None}).compile()


def test_inputs_from_binds_an_earlier_output_and_orders_a_graph() -> None:
    flow = graph_flow.Flow("g")
    verify = trigger("verify", inputs_from={"archive": "backup.outputs.archive"})
    flow.add(verify, trigger("backup"))
    prepare = atoms(verify)[0]
    assert "backup" in prepare.requires
    engine = engines.load(flow, store={"flow_id": "f", "services": None})
    engine.compile()
    order = list(engine.compilation.execution_graph.topological_sort())
    names = [node.name for node in order if hasattr(node, "name")]
    assert names.index("swflows.backup.ReadOutputs") < names.index(
        "swflows.verify.PrepareTrigger"
    )


def test_the_wait_of_each_trigger_parks_its_flow() -> None:
    flow = linear_flow.Flow("two")
    flow.add(trigger("a"), trigger("b"))
    parks = runner.parks_after(flow)
    assert {before: after.name for before, after in parks.items()} == {
        "swflows.a.PublishMetadata": "swflows.a.AwaitSignal",
        "swflows.b.PublishMetadata": "swflows.b.AwaitSignal",
    }


def test_a_transport_that_does_not_wait_has_no_wait() -> None:
    plan = common.Plan("NO_SIGNAL", "POLL_TEMP_URL", waits=False)
    flow = compose.trigger_subflow("x", deployment_id="d", action="A", plan=plan)
    assert "swflows.x.AwaitSignal" not in [a.name for a in atoms(flow)]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": "has.dot"}, "name"),
        ({"name": "1st"}, "name"),
        ({"name": "ok", "provides": "a b"}, "provides"),
        ({"name": "ok", "inputs_from": {"x": "a..b"}}, "inputs_from"),
        ({"name": "ok", "inputs_from": {"x": ""}}, "inputs_from"),
    ],
)
def test_bad_names_are_refused(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(exceptions.ValidationError, match=field):
        compose.trigger_subflow(deployment_id="d", action="A", plan=PLAN, **kwargs)


def test_transports_come_from_the_plans_the_runner_stored() -> None:
    with pytest.raises(exceptions.FlowError, match="run_flow"):
        compose.trigger_subflow("x", deployment_id="d", action="A")
    plans = {"DEFAULT": PLAN.to_kwargs(), "TEMP_URL_SIGNAL": PLAN.to_kwargs()}
    with compose.planning(plans):
        flow = compose.trigger_subflow("x", deployment_id="d", action="A")
        with pytest.raises(exceptions.ValidationError, match="ZAQAR_SIGNAL"):
            compose.plan_for("ZAQAR_SIGNAL")
    assert atoms(flow)[1].transport_name == "TEMP_URL_SIGNAL"


def test_a_triggers_deployment_id_is_derived_from_flow_and_name() -> None:
    first = compose.trigger_deployment_id("f1", "backup")
    assert first == compose.trigger_deployment_id("f1", "backup")
    assert first != compose.trigger_deployment_id("f1", "verify")
    assert first != compose.trigger_deployment_id("f2", "backup")


class Result(task.Task):  # type: ignore[misc]
    def __init__(self, name: str, status: str) -> None:
        super().__init__(name=name, provides=name)
        self.status = status

    def execute(self) -> dict[str, Any]:
        return {"status": self.status}


def test_link_if_complete_leaves_the_rest_untouched() -> None:
    flow = graph_flow.Flow("g")
    steps = [Result("s0", "COMPLETE"), Result("s1", "FAILED"), Result("s2", "COMPLETE")]
    flow.add(*steps)
    compose.link_if_complete(flow, steps[0], steps[1], "s0")
    compose.link_if_complete(flow, steps[1], steps[2], "s1")
    engine = engines.load(flow)
    engine.run()
    assert engine.storage.get_flow_state() == "SUCCESS"
    assert engine.storage.get_atom_state("s1") == "SUCCESS"
    assert engine.storage.get_atom_state("s2") == "IGNORE"


def module_level() -> Any:
    return linear_flow.Flow("x")


def test_a_factory_is_recorded_by_a_path_that_imports_it() -> None:
    path = runner.factory_path(module_level)
    assert path == f"{__name__}.module_level"
    assert runner.load_factory(path) is module_level
    assert runner.factory_path(path) == path
    for refused in (lambda: None, "nodots", "a.<lambda>", "examples.nothing.f"):
        with pytest.raises(exceptions.ValidationError):
            runner.factory_path(refused)


@pytest.mark.parametrize(
    "value", [{"a": (1,)}, {1: "a"}, {"a": {1, 2}}, {"a": float("inf")}, b"x", object()]
)
def test_only_json_kwargs(value: Any) -> None:
    with pytest.raises(exceptions.ValidationError, match="kwargs"):
        runner.check_json("kwargs", value)


def test_json_kwargs() -> None:
    runner.check_json("kwargs", {"a": [1, 2.5, "x", None, True, {"b": []}]})


def test_the_docs_list_every_task_of_the_catalogue() -> None:
    text = DOCS.read_text()
    for name, entry in compose.CATALOGUE.items():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{name}`"))
        for required in entry.requires:
            assert f"`{required}`" in row, (name, required)
        for provided in entry.provides:
            assert f"`{provided}`" in row, (name, provided)
