"""The agent reads metadata documents and items defensively."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swflows import exceptions
from swflows.agent import items


def item(**overrides: Any) -> dict[str, Any]:
    base = {
        "id": "c1",
        "name": "app",
        "group": "script",
        "config": "#!/bin/sh\n",
        "inputs": [
            {"name": "foo", "type": "String", "value": "bar"},
            {"name": "deploy_action", "type": "String", "value": "CREATE"},
            {"name": "deploy_signal_transport", "value": "TEMP_URL_SIGNAL"},
            {"name": "deploy_signal_id", "value": "http://x/sig"},
        ],
        "outputs": [{"name": "result"}],
        "options": {},
    }
    base.update(overrides)
    return base


class TestParseDocument:
    def test_shapes(self) -> None:
        doc = {"deployments": [item()], "os-collect-config": {}}
        assert items.parse_document(json.dumps(doc).encode()) == [item()]
        assert items.parse_document(json.dumps(doc)) == [item()]
        assert items.parse_document(doc) == [item()]
        # Heat's API answer, and Heat's heat-config file (a bare list)
        assert items.parse_document({"metadata": [item()]}) == [item()]
        assert items.parse_document([item()]) == [item()]

    @pytest.mark.parametrize(
        "raw", [b"", b"  ", "{}", {"deployments": None}, {"os-collect-config": {}}]
    )
    def test_nothing_to_deploy(self, raw: Any) -> None:
        assert items.parse_document(raw) == []

    @pytest.mark.parametrize(
        ("raw", "says"),
        [
            (b"\xff\xfe{", "not UTF-8"),
            (b"{not json", "not JSON"),
            (b'{"deployments": NaN}', "not JSON"),
            (b'"a string"', "must be a JSON object"),
            (b"3", "must be a JSON object"),
            (b'{"deployments": {"id": 1}}', "must be a list"),
            (b"[" * 100000 + b"]" * 100000, "not JSON"),
        ],
    )
    def test_malformed(self, raw: bytes, says: str) -> None:
        with pytest.raises(exceptions.ValidationError, match=says):
            items.parse_document(raw)

    @settings(max_examples=200, deadline=None)
    @given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
    def test_never_anything_but_validation_error(self, raw: bytes) -> None:
        try:
            items.parse_document(raw)
        except exceptions.ValidationError:
            pass


class TestParseItem:
    def test_good_item(self) -> None:
        parsed = items.parse_item(item())
        assert parsed.id == "c1" and parsed.group == "script"
        assert parsed.values["foo"] == "bar"
        assert parsed.action == "CREATE"
        assert parsed.output_names == ["result"]

    def test_heat_defaults(self) -> None:
        parsed = items.parse_item({"id": "c2", "inputs": [{"name": "x"}]})
        assert parsed.name == "c2"
        assert parsed.group == "Heat::Ungrouped"
        assert parsed.outputs == () and parsed.options == {}
        assert parsed.values == {"x": None}
        declared = items.parse_item(
            {"id": "c3", "inputs": [{"name": "x", "default": 1}]}
        )
        assert declared.values == {"x": 1}

    @pytest.mark.parametrize(
        ("raw", "field"),
        [
            ("text", "item"),
            ({"name": "no id"}, "item.id"),
            ({"id": 3}, "item.id"),
            ({"id": "c", "group": 5}, "item.group"),
            ({"id": "c", "name": []}, "item.name"),
            ({"id": "c", "inputs": {"a": 1}}, "item.inputs"),
            ({"id": "c", "inputs": ["x"]}, "item.inputs[0]"),
            ({"id": "c", "inputs": [{"value": 1}]}, "item.inputs[0].name"),
            ({"id": "c", "outputs": [{"name": ""}]}, "item.outputs[0].name"),
            ({"id": "c", "options": "x"}, "item.options"),
        ],
    )
    def test_malformed(self, raw: Any, field: str) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            items.parse_item(raw)
        assert exc.value.field == field

    def test_signal_inputs_from_a_broken_item(self) -> None:
        raw = item(inputs=[*item()["inputs"], "junk", {"name": 3}], outputs="bad")
        with pytest.raises(exceptions.ValidationError):
            items.parse_item(raw)
        found = items.signal_inputs(raw)
        assert found["deploy_signal_id"] == "http://x/sig"
        assert "foo" not in found
        assert items.signal_inputs("junk") == {}
        assert items.signal_inputs({"inputs": "junk"}) == {}

    def test_item_id(self) -> None:
        assert items.item_id(item()) == "c1"
        raws: tuple[object, ...] = ({"id": ""}, {"id": None}, [], "c1")
        for raw in raws:
            assert items.item_id(raw) is None


class TestResolveComponent:
    def component(self, action: str, configs: Any) -> items.Item:
        return items.parse_item(
            item(
                group="component",
                config={"configs": configs},
                inputs=[{"name": "deploy_action", "value": action}],
            )
        )

    def test_entry_for_the_action(self) -> None:
        configs = [
            {
                "actions": ["CREATE", "UPDATE"],
                "config": "#!/bin/sh\necho c",
                "tool": "script",
            },
            {"actions": ["BACKUP"], "config": "backup", "tool": "ansible"},
        ]
        resolved = items.resolve(self.component("BACKUP", configs))
        assert (resolved.group, resolved.config) == ("ansible", "backup")
        assert resolved.source["group"] == "ansible"
        assert resolved.source["config"] == "backup"

    def test_default_actions(self) -> None:
        resolved = items.resolve(
            self.component("UPDATE", [{"config": "u", "tool": "script"}])
        )
        assert resolved.config == "u"

    def test_other_groups_unchanged(self) -> None:
        parsed = items.parse_item(item())
        assert items.resolve(parsed) is parsed

    @pytest.mark.parametrize(
        ("action", "configs", "says"),
        [
            (
                "DELETE",
                [{"actions": ["CREATE"], "config": "", "tool": "script"}],
                "no entry for action DELETE",
            ),
            ("CREATE", "junk", "'configs' list"),
            ("CREATE", ["junk"], "must be an object"),
            ("CREATE", [{"actions": "CREATE", "tool": "script"}], "must be a list"),
            ("CREATE", [{"actions": ["CREATE"]}], "tool"),
        ],
    )
    def test_unresolvable(self, action: str, configs: Any, says: str) -> None:
        with pytest.raises(exceptions.ValidationError, match=says):
            items.resolve(self.component(action, configs))

    def test_needs_an_action(self) -> None:
        parsed = items.parse_item(
            item(group="component", config={"configs": []}, inputs=[])
        )
        with pytest.raises(exceptions.ValidationError, match="deploy_action"):
            items.resolve(parsed)
