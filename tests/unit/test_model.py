"""Value types: validation, coercion and Heat's dict shapes."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swflows import exceptions, model, states

T0 = dt.datetime(2026, 11, 21, 13, 33, 18)


def component(*entries: dict[str, Any]) -> model.Config:
    return model.Config.create(
        "comp", {"configs": list(entries)}, group=model.COMPONENT, creation_time=T0
    )


class TestInputSpec:
    def test_defaults(self) -> None:
        spec = model.InputSpec.from_dict({"name": "a"})
        assert spec == model.InputSpec("a", model.STRING, None, None, False, None)
        assert spec.to_dict() == {"name": "a", "type": "String"}

    def test_full_round_trip(self) -> None:
        raw = {
            "name": "n",
            "type": "Number",
            "description": "d",
            "default": 3,
            "replace_on_change": True,
            "value": 4.5,
        }
        assert model.InputSpec.from_dict(raw).to_dict() == raw

    def test_replace_on_change_only_serialised_when_true(self) -> None:
        spec = model.InputSpec.from_dict({"name": "a", "replace_on_change": False})
        assert "replace_on_change" not in spec.to_dict()

    def test_deploy_inputs_always_carry_a_value(self) -> None:
        spec = model.InputSpec.from_dict({"name": "deploy_x"})
        assert spec.to_dict() == {"name": "deploy_x", "type": "String", "value": None}

    @pytest.mark.parametrize(
        ("raw", "field"),
        [
            ({}, "inputs.name"),
            ({"name": ""}, "inputs.name"),
            ({"name": "   "}, "inputs.name"),
            ({"name": 3}, "inputs.name"),
            ({"name": "x" * 256}, "inputs.name"),
            ({"name": "a", "type": "Integer"}, "inputs[a].type"),
            ({"name": "a", "bogus": 1}, "inputs"),
            ({"name": "a", "description": 5}, "inputs[a].description"),
            ({"name": "a", "replace_on_change": "yes"}, "inputs[a].replace_on_change"),
            ({"name": "a", "type": "Number", "default": "x"}, "inputs[a].default"),
            ({"name": "a", "type": "Boolean", "value": "maybe"}, "inputs[a].value"),
        ],
    )
    def test_invalid(self, raw: dict[str, Any], field: str) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            model.InputSpec.from_dict(raw)
        assert exc.value.field == field

    def test_not_a_mapping(self) -> None:
        with pytest.raises(exceptions.ValidationError, match="must be a mapping"):
            model.InputSpec.from_dict(["name", "a"])

    def test_unknown_key_is_named(self) -> None:
        with pytest.raises(exceptions.ValidationError, match="bogus"):
            model.InputSpec.from_dict({"name": "a", "bogus": 1})

    def test_default_is_coerced(self) -> None:
        spec = model.InputSpec.from_dict(
            {"name": "a", "type": "Number", "default": "7"}
        )
        assert spec.default == 7


class TestOutputSpec:
    def test_shape(self) -> None:
        spec = model.OutputSpec.from_dict({"name": "r"})
        assert spec.to_dict() == {"name": "r", "type": "String", "error_output": False}

    def test_round_trip(self) -> None:
        raw = {"name": "r", "type": "Json", "description": "d", "error_output": True}
        assert model.OutputSpec.from_dict(raw).to_dict() == raw

    @pytest.mark.parametrize("name", model.RESERVED_OUTPUTS)
    def test_reserved_names_refused(self, name: str) -> None:
        with pytest.raises(exceptions.ValidationError, match="reserved"):
            model.OutputSpec.from_dict({"name": name})

    @pytest.mark.parametrize(
        ("raw", "field"),
        [
            ({}, "outputs.name"),
            ({"name": "r", "type": "Str"}, "outputs[r].type"),
            ({"name": "r", "error_output": 1}, "outputs[r].error_output"),
            ({"name": "r", "description": []}, "outputs[r].description"),
            ({"name": "r", "value": 1}, "outputs"),
        ],
    )
    def test_invalid(self, raw: dict[str, Any], field: str) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            model.OutputSpec.from_dict(raw)
        assert exc.value.field == field


class TestCoerceValue:
    @pytest.mark.parametrize(
        ("type_", "value", "expected"),
        [
            ("String", "x", "x"),
            ("String", 5, "5"),
            ("String", 1.5, "1.5"),
            ("String", True, "true"),
            ("String", False, "false"),
            ("Number", 5, 5),
            ("Number", 2.5, 2.5),
            ("Number", "12", 12),
            ("Number", "-1.5", -1.5),
            ("Number", "1e3", 1000.0),
            ("Boolean", True, True),
            ("Boolean", "yes", True),
            ("Boolean", " Off ", False),
            ("Boolean", "t", True),
            ("Boolean", 0, False),
            ("Boolean", 1, True),
            ("CommaDelimitedList", "a, b,c", ["a", "b", "c"]),
            ("CommaDelimitedList", "", []),
            ("CommaDelimitedList", ["a", "b"], ["a", "b"]),
            ("CommaDelimitedList", ("a",), ["a"]),
            ("Json", '{"a": 1}', {"a": 1}),
            ("Json", "[1, 2]", [1, 2]),
            ("Json", {"a": [1]}, {"a": [1]}),
            ("Json", [1], [1]),
        ],
    )
    def test_valid(self, type_: str, value: Any, expected: Any) -> None:
        result = model.coerce_value("f", type_, value)
        assert result == expected
        assert type(result) is type(expected)

    @pytest.mark.parametrize("type_", model.INPUT_TYPES)
    def test_none_stays_none(self, type_: str) -> None:
        assert model.coerce_value("f", type_, None) is None

    @pytest.mark.parametrize(
        ("type_", "value"),
        [
            ("String", {"a": 1}),
            ("String", [1]),
            ("Number", True),
            ("Number", "abc"),
            ("Number", "nan"),
            ("Number", "inf"),
            ("Number", float("nan")),
            ("Number", float("-inf")),
            ("Number", [1]),
            ("Boolean", "maybe"),
            ("Boolean", 2),
            ("Boolean", 1.0),
            ("CommaDelimitedList", [1, 2]),
            ("CommaDelimitedList", 5),
            ("Json", "{not json"),
            ("Json", '"a string"'),
            ("Json", "5"),
            ("Json", 5),
            ("Json", True),
            ("Integer", 1),
        ],
    )
    def test_invalid(self, type_: str, value: Any) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            model.coerce_value("input_values.x", type_, value)
        assert exc.value.field == "input_values.x"

    def test_big_integers_are_numbers(self) -> None:
        assert model.coerce_value("f", "Number", 10**400) == 10**400

    @settings(max_examples=150, deadline=None)
    @given(
        st.sampled_from(model.INPUT_TYPES),
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers()
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(max_size=10),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=4), inner, max_size=3)
            ),
            max_leaves=6,
        ),
    )
    def test_coercing_twice_changes_nothing(self, type_: str, value: Any) -> None:
        try:
            once = model.coerce_value("f", type_, value)
        except exceptions.ValidationError:
            return
        assert model.coerce_value("f", type_, once) == once
        json.dumps(once, allow_nan=False)  # always has a JSON form


class TestConfig:
    def test_create_defaults(self) -> None:
        cfg = model.Config.create("c", creation_time=T0)
        assert cfg.group == model.UNGROUPED
        assert cfg.config == ""
        assert cfg.inputs == ()
        assert cfg.outputs == ()
        assert cfg.options == {}
        assert len(cfg.id) == 36

    def test_config_none_is_empty(self) -> None:
        assert model.Config.create("c", None).config == ""

    @pytest.mark.parametrize(
        ("kwargs", "field"),
        [
            ({"name": ""}, "name"),
            ({"name": None}, "name"),
            ({"name": "c", "config": 5}, "config"),
            ({"name": "c", "group": "g" * 256}, "group"),
            ({"name": "c", "options": [1]}, "options"),
            ({"name": "c", "inputs": "a"}, "inputs"),
            ({"name": "c", "inputs": [{"name": "a"}, {"name": "a"}]}, "inputs"),
            ({"name": "c", "outputs": [{"name": "o"}, {"name": "o"}]}, "outputs"),
            ({"name": "c", "outputs": [{"name": "deploy_stdout"}]}, None),
        ],
    )
    def test_invalid(self, kwargs: dict[str, Any], field: str | None) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            model.Config.create(**kwargs)
        if field is not None:
            assert exc.value.field == field

    def test_duplicates_are_named(self) -> None:
        with pytest.raises(exceptions.ValidationError, match=r"duplicate name.*a"):
            model.Config.create("c", inputs=[{"name": "a"}, {"name": "a"}])

    def test_round_trip(self) -> None:
        cfg = model.Config.create(
            "c",
            "#!/bin/sh\necho hi",
            group="script",
            inputs=[
                {"name": "a", "type": "Number", "default": 1},
                {"name": "b", "replace_on_change": True},
            ],
            outputs=[{"name": "r", "error_output": True}],
            options={"k": [1, 2]},
            creation_time=T0,
        )
        data = json.loads(json.dumps(cfg.to_dict()))
        assert data["creation_time"] == "2026-11-21T13:33:18Z"
        assert model.Config.from_dict(data) == cfg

    def test_to_dict_is_heat_shape(self) -> None:
        cfg = model.Config.create("c", creation_time=T0, id="x")
        assert cfg.to_dict() == {
            "id": "x",
            "name": "c",
            "group": "Heat::Ungrouped",
            "creation_time": "2026-11-21T13:33:18Z",
            "config": "",
            "inputs": [],
            "outputs": [],
            "options": {},
        }

    def test_from_dict_unknown_key(self) -> None:
        with pytest.raises(exceptions.ValidationError, match="bogus"):
            model.Config.from_dict({"name": "c", "bogus": 1})

    def test_from_dict_not_a_mapping(self) -> None:
        with pytest.raises(exceptions.ValidationError):
            model.Config.from_dict([])  # type: ignore[arg-type]

    def test_input_lookup(self) -> None:
        cfg = model.Config.create("c", inputs=[{"name": "a"}])
        assert cfg.input("a") == model.InputSpec("a")
        assert cfg.input("b") is None


class TestComponent:
    def test_entries(self) -> None:
        cfg = component(
            {"actions": ["CREATE"], "config": "c1", "tool": "script"},
            {"actions": ["BACKUP", "FOO"], "config": "c2", "tool": "ansible"},
        )
        assert cfg.is_component
        entries = cfg.component_entries()
        assert [e.actions for e in entries] == [("CREATE",), ("BACKUP", "FOO")]
        assert cfg.entry_for("FOO") == entries[1]
        assert cfg.entry_for("DELETE") is None

    def test_default_actions(self) -> None:
        cfg = component({"config": "c", "tool": "script"})
        assert cfg.component_entries()[0].actions == ("CREATE", "UPDATE")

    def test_entry_to_dict(self) -> None:
        cfg = component({"actions": ["X"], "config": "c", "tool": "t"})
        assert cfg.component_entries()[0].to_dict() == {
            "actions": ["X"],
            "config": "c",
            "tool": "t",
        }

    def test_action_in_two_entries(self) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            component(
                {"actions": ["CREATE", "UPDATE"], "config": "a", "tool": "t"},
                {"actions": ["UPDATE"], "config": "b", "tool": "t"},
            )
        assert exc.value.field == "config.configs[1].actions"
        assert "UPDATE" in exc.value.reason
        assert "configs[0]" in exc.value.reason

    @pytest.mark.parametrize("body", [{"configs": []}, {}, "script", {"configs": "x"}])
    def test_no_configs(self, body: Any) -> None:
        with pytest.raises(exceptions.ValidationError):
            model.Config.create("comp", body, group=model.COMPONENT)

    @pytest.mark.parametrize(
        ("entry", "field"),
        [
            ({"actions": ["A"], "config": "c"}, "config.configs[0].tool"),
            ({"actions": [], "config": "c", "tool": "t"}, "config.configs[0].actions"),
            ({"actions": "A", "config": "c", "tool": "t"}, "config.configs[0].actions"),
            ({"actions": [""], "tool": "t"}, "config.configs[0].actions"),
            ({"tool": "t", "extra": 1}, "config.configs[0]"),
            ("entry", "config.configs[0]"),
        ],
    )
    def test_invalid_entry(self, entry: Any, field: str) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            component(entry)
        assert exc.value.field == field

    def test_handles(self) -> None:
        cfg = component({"actions": ["BACKUP"], "config": "c", "tool": "t"})
        assert cfg.handles("BACKUP")
        assert not cfg.handles("CREATE")
        assert not cfg.handles("CREATE", ["CREATE"])  # the entries decide

    def test_plain_config_handles_the_deployment_actions(self) -> None:
        cfg = model.Config.create("c")
        assert cfg.handles("CREATE")
        assert cfg.handles("UPDATE")
        assert not cfg.handles("DELETE")
        assert cfg.handles("DELETE", ["DELETE"])
        assert not cfg.handles("CREATE", [])
        assert cfg.component_entries() == ()


class TestDeployment:
    def make(self, **kwargs: Any) -> model.Deployment:
        fields: dict[str, Any] = {
            "id": "d",
            "server_id": "s",
            "config_id": "c",
            "source_config_id": "src",
            "action": "CREATE",
            "status": states.IN_PROGRESS,
        }
        fields.update(kwargs)
        return model.Deployment(**fields)

    @pytest.mark.parametrize(
        ("kwargs", "field"),
        [
            ({"server_id": ""}, "server_id"),
            ({"action": ""}, "action"),
            ({"status": "DONE"}, "status"),
            ({"input_values": [1]}, "input_values"),
        ],
    )
    def test_invalid(self, kwargs: dict[str, Any], field: str) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            self.make(**kwargs)
        assert exc.value.field == field

    def test_to_dict(self) -> None:
        d = self.make(creation_time=T0)
        data = d.to_dict()
        assert data["status"] == "IN_PROGRESS"
        assert data["creation_time"] == "2026-11-21T13:33:18Z"
        assert "updated_time" not in data
        assert json.loads(json.dumps(data)) == data
        d.updated_time = T0
        assert d.to_dict()["updated_time"] == "2026-11-21T13:33:18Z"

    def test_is_terminal(self) -> None:
        assert not self.make().is_terminal
        assert self.make(status=states.FAILED).is_terminal


def test_isotime() -> None:
    assert model.isotime(None) is None
    assert model.isotime(T0) == "2026-11-21T13:33:18Z"


def test_new_ids_are_unique() -> None:
    assert model.new_id() != model.new_id()


# found by tests/unit/test_fuzz_config.py
@pytest.mark.parametrize("bad", ["a\x00b", "\x00", "name\ud800", "\udfff"])
def test_names_no_database_stores_are_refused(bad: str) -> None:
    with pytest.raises(exceptions.ValidationError, match=r"NUL|lone surrogate") as exc:
        model.Config.create(bad)
    assert exc.value.field == "name"
    with pytest.raises(exceptions.ValidationError) as exc:
        model.Config.create("ok", group=bad)
    assert exc.value.field == "group"
    with pytest.raises(exceptions.ValidationError) as exc:
        model.InputSpec.from_dict({"name": bad})
    assert exc.value.field == "inputs.name"
    with pytest.raises(exceptions.ValidationError) as exc:
        model.Deployment("d", bad, None, None, "CREATE", states.IN_PROGRESS)
    assert exc.value.field == "server_id"


@pytest.mark.parametrize(
    "value",
    ["[NaN]", '{"a": Infinity}', "[-Infinity]", [float("nan")], {"a": [float("inf")]}],
)
def test_json_values_without_a_json_form_are_refused(value: Any) -> None:
    with pytest.raises(exceptions.ValidationError) as exc:
        model.coerce_value("f", model.JSON, value)
    assert exc.value.field == "f"


def test_json_nested_too_deeply_is_refused() -> None:
    deep: list[Any] = []
    for _ in range(5000):
        deep = [deep]
    for value in ("[" * 5000 + "]" * 5000, deep):
        with pytest.raises(exceptions.ValidationError, match=r"f: .*(deep|JSON form)"):
            model.coerce_value("f", model.JSON, value)


def test_numbers_too_long_for_text_are_refused() -> None:
    huge = 10**5000
    for type_ in (model.STRING, model.NUMBER):
        with pytest.raises(exceptions.ValidationError) as exc:
            model.coerce_value("f", type_, huge)
        assert exc.value.field == "f"
    with pytest.raises(exceptions.ValidationError, match="default"):
        model.InputSpec.from_dict({"name": "n", "type": "Number", "default": huge})


@pytest.mark.parametrize("created", ["yesterday", "2026-13-01T00:00:00Z", "", 5, []])
def test_config_creation_time_that_is_no_time_is_refused(created: Any) -> None:
    with pytest.raises(exceptions.ValidationError) as exc:
        model.Config.from_dict({"name": "c", "creation_time": created})
    assert exc.value.field == "creation_time"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"config": {"a": float("nan")}}, "config"),
        ({"config": [{1, 2}]}, "config"),
        ({"options": {"x": float("inf")}}, "options"),
        ({"options": {"x": object()}}, "options"),
    ],
)
def test_config_bodies_and_options_without_a_json_form_are_refused(
    kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(exceptions.ValidationError) as exc:
        model.Config.create("c", **kwargs)
    assert exc.value.field == field


@pytest.mark.parametrize("bad", ["a\x00", "\ud800"])
def test_a_deployment_name_no_database_stores_is_refused(bad: str) -> None:
    with pytest.raises(exceptions.ValidationError) as exc:
        model.Deployment("d", "s", None, None, "CREATE", states.IN_PROGRESS, name=bad)
    assert exc.value.field == "name"
