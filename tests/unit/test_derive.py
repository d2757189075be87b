"""Derived configs: Heat's input order and names, ids, transport inputs."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swflows import derive, exceptions, model
from swflows import transport_names as names

T0 = dt.datetime(2026, 11, 21, 13, 33, 18)
PUT_URL = (
    "https://swift.example/v1/AUTH_p/swflows-signals/d1/1"
    "?temp_url_sig=abc123&temp_url_expires=1900000000"
)
SIGNED = {
    "signature": "f00d",
    "expires": "2026-11-21T14:33:18",
    "methods": ["POST"],
    "paths": ["/v2/queues/q1/messages"],
    "project": "p1",
    "url": "https://zaqar.example:8888",
}


def source(**kwargs: Any) -> model.Config:
    fields: dict[str, Any] = {
        "config": "#!/bin/sh\necho $foo",
        "group": "script",
        "inputs": [
            {"name": "foo", "default": "dflt"},
            {"name": "port", "type": "Number"},
            {"name": "flag", "type": "Boolean", "default": False},
        ],
        "outputs": [{"name": "result"}, {"name": "err", "error_output": True}],
        "options": {"opt": {"nested": [1]}},
        "creation_time": T0,
    }
    fields.update(kwargs)
    return model.Config.create("src", **fields)


def make(src: model.Config | None = None, **kwargs: Any) -> model.Config:
    fields: dict[str, Any] = {
        "deployment_id": "d1",
        "generation": 1,
        "server_id": "srv1",
        "action": "CREATE",
        "input_values": {},
        "signal_transport": "NO_SIGNAL",
    }
    fields.update(kwargs)
    return derive.derive(src, **fields)


def names_of(cfg: model.Config) -> list[str]:
    return [i.name for i in cfg.inputs]


def values_of(cfg: model.Config) -> dict[str, Any]:
    return {i.name: i.value for i in cfg.inputs}


def round_trip(cfg: model.Config) -> model.Config:
    return model.Config.from_dict(json.loads(json.dumps(cfg.to_dict())))


class TestDerivedConfigId:
    def test_deterministic_uuid(self) -> None:
        first = derive.derived_config_id("d1", 3)
        assert first == derive.derived_config_id("d1", 3)
        assert uuid.UUID(first).version == 5

    def test_changes_with_generation_and_deployment(self) -> None:
        ids = {derive.derived_config_id(d, g) for d in ("d1", "d2") for g in range(5)}
        assert len(ids) == 10

    def test_no_separator_ambiguity(self) -> None:
        assert derive.derived_config_id("d1", 11) != derive.derived_config_id("d11", 1)

    @pytest.mark.parametrize(
        ("deployment_id", "generation", "field"),
        [
            ("", 1, "deployment_id"),
            (None, 1, "deployment_id"),
            ("d", -1, "generation"),
            ("d", True, "generation"),
            ("d", "1", "generation"),
        ],
    )
    def test_invalid(self, deployment_id: Any, generation: Any, field: str) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            derive.derived_config_id(deployment_id, generation)
        assert exc.value.field == field

    def test_derive_uses_it(self) -> None:
        assert make(generation=4).id == derive.derived_config_id("d1", 4)
        assert make(generation=4) == make(generation=4)
        assert make(generation=4).id != make(generation=5).id


class TestDerive:
    def test_heat_order_with_temp_url(self) -> None:
        cfg = make(
            source(),
            input_values={"port": "8080", "extra": "e"},
            signal_transport="TEMP_URL_SIGNAL",
            transport_inputs=derive.temp_url_signal_inputs(PUT_URL),
        )
        assert names_of(cfg) == [
            "foo",
            "port",
            "flag",
            "extra",
            "deploy_server_id",
            "deploy_action",
            "deploy_signal_transport",
            "deploy_signal_id",
            "deploy_signal_verb",
        ]
        assert values_of(cfg) == {
            "foo": "dflt",
            "port": 8080,
            "flag": False,
            "extra": "e",
            "deploy_server_id": "srv1",
            "deploy_action": "CREATE",
            "deploy_signal_transport": "TEMP_URL_SIGNAL",
            "deploy_signal_id": PUT_URL,
            "deploy_signal_verb": "PUT",
        }
        assert cfg.input("extra") == model.InputSpec("extra", "String", value="e")
        assert cfg.input("port").type == "Number"  # type: ignore[union-attr]

    def test_stack_context_only_when_given(self) -> None:
        cfg = make(stack_id="st/123", resource_name="deploy")
        assert names_of(cfg) == [
            "deploy_server_id",
            "deploy_action",
            "deploy_stack_id",
            "deploy_resource_name",
            "deploy_signal_transport",
        ]
        assert values_of(cfg)["deploy_stack_id"] == "st/123"
        assert names_of(make(resource_name="r"))[2] == "deploy_resource_name"

    def test_fields_from_source(self) -> None:
        src = source()
        cfg = make(src)
        assert cfg.group == "script"
        assert cfg.config == src.config
        assert cfg.outputs == src.outputs
        assert cfg.options == {"opt": {"nested": [1]}}
        assert cfg.options is not src.options
        assert cfg.options["opt"] is not src.options["opt"]

    def test_component_config_is_copied(self) -> None:
        src = model.Config.create(
            "comp",
            {"configs": [{"actions": ["BACKUP"], "config": "c", "tool": "t"}]},
            group=model.COMPONENT,
        )
        cfg = make(src, action="BACKUP")
        assert cfg.config == src.config
        assert cfg.config is not src.config
        assert cfg.group == "component"

    def test_no_source(self) -> None:
        cfg = make(None, input_values={"a": 1})
        assert cfg.group == "Heat::Ungrouped"
        assert cfg.config == ""
        assert cfg.outputs == ()
        assert cfg.options == {}
        assert cfg.name == "swflows-d1"
        assert names_of(cfg)[0] == "a"

    def test_group_default_when_source_ungrouped(self) -> None:
        assert make(model.Config.create("s")).group == "Heat::Ungrouped"

    def test_name_precedence(self) -> None:
        assert make(source(), name="given").name == "given"
        assert make(source()).name == "src"
        assert make(None).name == "swflows-d1"
        assert len(make(None, deployment_id="x" * 300).name) == 255

    def test_bad_name(self) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            make(name="  ")
        assert exc.value.field == "name"

    def test_input_value_beats_default_even_when_none(self) -> None:
        cfg = make(source(), input_values={"foo": None})
        assert values_of(cfg)["foo"] is None

    @pytest.mark.parametrize(
        ("values", "field"),
        [
            ({"port": "eighty"}, "input_values.port"),
            ({"flag": "maybe"}, "input_values.flag"),
            ({"foo": {"a": 1}}, "input_values.foo"),
        ],
    )
    def test_bad_declared_value(self, values: dict[str, Any], field: str) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            make(source(), input_values=values)
        assert exc.value.field == field

    def test_json_input_without_json_form_refused(self) -> None:
        src = model.Config.create("s", inputs=[{"name": "j", "type": "Json"}])
        with pytest.raises(exceptions.ValidationError) as exc:
            make(src, input_values={"j": {"x": float("nan")}})
        assert exc.value.field == "input_values.j"

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            ("text", "text"),
            (5, "5"),
            (1.5, "1.5"),
            (True, "true"),
            (None, None),
            ({"a": [1, 2]}, '{"a": [1, 2]}'),
            ([1, "x"], '[1, "x"]'),
        ],
    )
    def test_undeclared_values_become_text(self, value: Any, expected: Any) -> None:
        cfg = make(None, input_values={"x": value})
        spec = cfg.input("x")
        assert spec == model.InputSpec("x", "String", value=expected)
        assert round_trip(make(None, input_values={"x": value}, creation_time=T0)) == (
            make(None, input_values={"x": value}, creation_time=T0)
        )

    @pytest.mark.parametrize("value", [object(), b"bytes", {"a": object()}, {1j}])
    def test_undeclared_value_without_json_form_refused(self, value: Any) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            make(None, input_values={"x": value})
        assert exc.value.field == "input_values.x"

    @pytest.mark.parametrize("key", ["deploy_server_id", "deploy_anything"])
    def test_reserved_input_values_refused(self, key: str) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            make(source(), input_values={key: "x"})
        assert exc.value.field == f"input_values.{key}"
        assert "reserved" in exc.value.reason

    def test_input_value_names_must_be_strings(self) -> None:
        with pytest.raises(exceptions.ValidationError):
            make(None, input_values={1: "x"})
        with pytest.raises(exceptions.ValidationError):
            make(None, input_values={"": "x"})

    def test_input_values_must_be_a_mapping(self) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            make(None, input_values=[("a", 1)])
        assert exc.value.field == "input_values"

    def test_source_declaring_a_deploy_input_swflows_sets(self) -> None:
        src = model.Config.create("s", inputs=[{"name": "deploy_server_id"}])
        with pytest.raises(exceptions.ValidationError, match="deploy_server_id"):
            make(src)

    def test_source_may_declare_other_deploy_inputs(self) -> None:
        src = model.Config.create(
            "s", inputs=[{"name": "deploy_custom", "default": "d"}]
        )
        assert values_of(make(src))["deploy_custom"] == "d"

    @pytest.mark.parametrize(
        ("given", "expected"),
        [
            ("temp_url_signal", "TEMP_URL_SIGNAL"),
            ("TEMP_URL_POLL", "TEMP_URL_SIGNAL"),
            ("zaqar_message", "ZAQAR_SIGNAL"),
            ("No_Signal", "NO_SIGNAL"),
        ],
    )
    def test_transport_normalised(self, given: str, expected: str) -> None:
        assert values_of(make(signal_transport=given))["deploy_signal_transport"] == (
            expected
        )

    @pytest.mark.parametrize("transport", ["AUTO", "BOGUS", None])
    def test_transport_refused(self, transport: Any) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            make(signal_transport=transport)
        assert exc.value.field == "signal_transport"

    @pytest.mark.parametrize(
        ("kwargs", "field"),
        [
            ({"server_id": ""}, "server_id"),
            ({"action": ""}, "action"),
            ({"action": None}, "action"),
            ({"stack_id": ""}, "stack_id"),
            ({"generation": -1}, "generation"),
            ({"creation_time": "2026-01-01"}, "creation_time"),
        ],
    )
    def test_invalid_arguments(self, kwargs: dict[str, Any], field: str) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            make(**kwargs)
        assert exc.value.field == field

    def test_source_must_be_a_config(self) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            make({"name": "x"})  # type: ignore[arg-type]
        assert exc.value.field == "source"

    def test_transport_inputs_as_mapping(self) -> None:
        cfg = make(transport_inputs={"deploy_signal_id": "u", "deploy_x": 1})
        assert names_of(cfg)[-2:] == ["deploy_signal_id", "deploy_x"]
        assert values_of(cfg)["deploy_x"] == "1"

    @pytest.mark.parametrize(
        "pairs",
        [
            [("signal_id", "u")],
            [("deploy_action", "DELETE")],
            [("deploy_server_id", "other")],
            [("deploy_a", 1, 2)],
            ["deploy_a"],
            [(1, "x")],
        ],
    )
    def test_bad_transport_inputs(self, pairs: Any) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            make(transport_inputs=pairs)
        assert exc.value.field == "transport_inputs"

    def test_repeated_transport_input(self) -> None:
        with pytest.raises(exceptions.ValidationError, match="deploy_signal_id"):
            make(
                transport_inputs=[("deploy_signal_id", "a"), ("deploy_signal_id", "b")]
            )

    def test_deploy_inputs_are_described_strings(self) -> None:
        cfg = make(
            signal_transport="HEAT_SIGNAL",
            transport_inputs=derive.heat_signal_inputs("a", "u", "uid", "pw", "p"),
        )
        for spec in cfg.inputs:
            assert spec.type == "String"
            assert spec.description
            assert isinstance(spec.value, str)

    def test_signed_url_input_is_json(self) -> None:
        cfg = make(
            signal_transport="ZAQAR_SIGNAL",
            transport_inputs=derive.zaqar_signal_inputs("q1", signed_url=SIGNED),
        )
        spec = cfg.input("deploy_queue_signed_url")
        assert spec is not None
        assert spec.type == "Json"
        assert spec.value == SIGNED

    def test_creation_time(self) -> None:
        assert make().creation_time is None
        aware = dt.datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)
        assert make(creation_time=aware).creation_time == dt.datetime(2026, 1, 1, 12)
        cet = dt.timezone(dt.timedelta(hours=1))
        local = dt.datetime(2026, 1, 1, 13, 0, 0, tzinfo=cet)
        assert make(creation_time=local).creation_time == dt.datetime(2026, 1, 1, 12)

    @pytest.mark.parametrize(
        ("transport", "pairs"),
        [
            ("TEMP_URL_SIGNAL", derive.temp_url_signal_inputs(PUT_URL)),
            ("CFN_SIGNAL", derive.cfn_signal_inputs("https://cfn/signal?x=1")),
            (
                "HEAT_SIGNAL",
                derive.heat_signal_inputs("a", "u", "uid", "pw", "p", "RegionOne"),
            ),
            (
                "ZAQAR_SIGNAL",
                derive.zaqar_signal_inputs(
                    "q1", auth=derive.heat_signal_inputs("a", "u", "i", "pw", "p")
                ),
            ),
            ("ZAQAR_SIGNAL", derive.zaqar_signal_inputs("q1", signed_url=SIGNED)),
            ("NO_SIGNAL", []),
        ],
    )
    def test_round_trips_through_json(self, transport: str, pairs: Any) -> None:
        cfg = make(
            source(),
            input_values={"port": 1, "x": {"y": 1}},
            signal_transport=transport,
            transport_inputs=[*pairs, *derive.started_signal_input()],
            creation_time=T0,
        )
        assert round_trip(cfg) == cfg
        assert names_of(cfg)[-1] == "deploy_signal_started"


class TestTransportInputs:
    def test_temp_url(self) -> None:
        assert derive.temp_url_signal_inputs(PUT_URL) == [
            ("deploy_signal_id", PUT_URL),
            ("deploy_signal_verb", "PUT"),
        ]

    def test_cfn(self) -> None:
        assert derive.cfn_signal_inputs("https://c") == [
            ("deploy_signal_id", "https://c"),
            ("deploy_signal_verb", "POST"),
        ]

    def test_heat(self) -> None:
        assert derive.heat_signal_inputs("a", "u", "uid", "pw", "p") == [
            ("deploy_auth_url", "a"),
            ("deploy_username", "u"),
            ("deploy_user_id", "uid"),
            ("deploy_password", "pw"),
            ("deploy_project_id", "p"),
        ]
        with_region = derive.heat_signal_inputs(
            auth_url="a",
            username="u",
            user_id="uid",
            password="pw",
            project_id="p",
            region_name="R1",
        )
        assert with_region[-1] == ("deploy_region_name", "R1")
        assert len(with_region) == 6

    @pytest.mark.parametrize(
        "field", ["auth_url", "username", "user_id", "password", "project_id"]
    )
    def test_heat_credentials_must_be_set(self, field: str) -> None:
        creds = {
            "auth_url": "a",
            "username": "u",
            "user_id": "i",
            "password": "pw",
            "project_id": "p",
        }
        creds[field] = ""
        with pytest.raises(exceptions.ValidationError) as exc:
            derive.heat_signal_inputs(**creds)
        assert exc.value.field == field

    @pytest.mark.parametrize("url", ["", None, 5])
    def test_urls_must_be_set(self, url: Any) -> None:
        with pytest.raises(exceptions.ValidationError):
            derive.temp_url_signal_inputs(url)
        with pytest.raises(exceptions.ValidationError):
            derive.cfn_signal_inputs(url)

    def test_zaqar_heat_form(self) -> None:
        auth = derive.heat_signal_inputs("a", "u", "uid", "pw", "p", "R")
        assert derive.zaqar_signal_inputs("q1", auth=auth) == [
            *auth,
            ("deploy_queue_id", "q1"),
        ]

    def test_zaqar_signed_url_form(self) -> None:
        pairs = derive.zaqar_signal_inputs("q1", signed_url=SIGNED)
        assert pairs == [("deploy_queue_id", "q1"), ("deploy_queue_signed_url", SIGNED)]
        assert list(pairs[1][1]) == list(derive.SIGNED_URL_KEYS)

    def test_zaqar_signed_url_normalised(self) -> None:
        signed = {**SIGNED, "expires": 1900000000, "methods": ("POST", "GET")}
        value = derive.zaqar_signal_inputs("q1", signed_url=signed)[1][1]
        assert value["expires"] == "1900000000"
        assert value["methods"] == ["POST", "GET"]

    def test_zaqar_queue_only(self) -> None:
        assert derive.zaqar_signal_inputs("q1") == [("deploy_queue_id", "q1")]

    def test_zaqar_both_forms_refused(self) -> None:
        auth = derive.heat_signal_inputs("a", "u", "uid", "pw", "p")
        with pytest.raises(exceptions.ValidationError):
            derive.zaqar_signal_inputs("q1", auth=auth, signed_url=SIGNED)

    @pytest.mark.parametrize("queue", ["", "q" * 65, "a/b", "a b", None])
    def test_zaqar_queue_names(self, queue: Any) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            derive.zaqar_signal_inputs(queue)
        assert exc.value.field == "queue_id"
        assert derive.zaqar_signal_inputs("q" * 64)

    @pytest.mark.parametrize(
        ("change", "field"),
        [
            ({"signature": ""}, "signed_url.signature"),
            ({"url": None}, "signed_url.url"),
            ({"methods": []}, "signed_url.methods"),
            ({"methods": "POST"}, "signed_url.methods"),
            ({"paths": [1]}, "signed_url.paths"),
            ({"expires": None}, "signed_url.expires"),
            ({"expires": True}, "signed_url.expires"),
        ],
    )
    def test_zaqar_bad_signed_url(self, change: dict[str, Any], field: str) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            derive.zaqar_signal_inputs("q1", signed_url={**SIGNED, **change})
        assert exc.value.field == field

    def test_zaqar_signed_url_missing_key(self) -> None:
        partial = {k: v for k, v in SIGNED.items() if k != "url"}
        with pytest.raises(exceptions.ValidationError, match="url"):
            derive.zaqar_signal_inputs("q1", signed_url=partial)

    def test_zaqar_auth_must_be_credentials(self) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            derive.zaqar_signal_inputs("q1", auth=[("deploy_signal_id", "x")])
        assert exc.value.field == "auth"
        assert "deploy_password" in exc.value.reason

    def test_started(self) -> None:
        assert derive.started_signal_input() == [("deploy_signal_started", "true")]


class TestRedact:
    def test_config_dict(self) -> None:
        cfg = make(
            signal_transport="ZAQAR_SIGNAL",
            transport_inputs=[
                *derive.heat_signal_inputs("a", "u", "uid", "s3cret", "p"),
                ("deploy_signal_id", PUT_URL),
                *derive.zaqar_signal_inputs("q1", signed_url=SIGNED),
            ],
        ).to_dict()
        shown = derive.redact(cfg)
        text = json.dumps(shown)
        assert "s3cret" not in text
        assert "f00d" not in text
        assert "abc123" not in text
        values = {i["name"]: i["value"] for i in shown["inputs"]}
        assert values["deploy_password"] == "***"
        assert values["deploy_queue_signed_url"]["signature"] == "***"
        assert values["deploy_queue_signed_url"]["paths"] == SIGNED["paths"]
        assert values["deploy_signal_id"].endswith(
            "?temp_url_sig=***&temp_url_expires=1900000000"
        )
        assert values["deploy_username"] == "u"
        # the original is untouched
        assert "s3cret" in json.dumps(cfg)

    def test_flat_mapping(self) -> None:
        shown = derive.redact(
            {
                "deploy_password": "pw",
                "deploy_signal_id": "https://cfn/signal?a=1&Signature=xyz&b=2",
                "deploy_queue_signed_url": "opaque",
                "other": "pw",
            }
        )
        assert shown == {
            "deploy_password": "***",
            "deploy_signal_id": "https://cfn/signal?a=1&Signature=***&b=2",
            "deploy_queue_signed_url": "***",
            "other": "pw",
        }

    def test_none_stays_none(self) -> None:
        assert derive.redact({"deploy_password": None}) == {"deploy_password": None}

    def test_secret_inputs(self) -> None:
        assert {"deploy_password", "deploy_queue_signed_url"} == derive.SECRET_INPUTS


class TestCheckAction:
    comp = model.Config.create(
        "comp",
        {
            "configs": [
                {"actions": ["CREATE"], "config": "a", "tool": "t"},
                {"actions": ["BACKUP", "RESTORE"], "config": "b", "tool": "t"},
            ]
        },
        group=model.COMPONENT,
    )

    def test_component_handles(self) -> None:
        derive.check_action(self.comp, "BACKUP")
        derive.check_action(self.comp, "CREATE", ["UPDATE"])  # entries decide

    def test_component_refuses(self) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            derive.check_action(self.comp, "DELETE")
        assert exc.value.field == "action"
        assert "CREATE, BACKUP, RESTORE" in exc.value.reason
        assert "DELETE" in exc.value.reason

    def test_plain_config(self) -> None:
        plain = model.Config.create("p")
        derive.check_action(plain, "BACKUP")  # a trigger: anything goes
        derive.check_action(None, "BACKUP")
        derive.check_action(plain, "CREATE", ["CREATE", "UPDATE"])
        with pytest.raises(exceptions.ValidationError) as exc:
            derive.check_action(plain, "DELETE", ["CREATE", "UPDATE"])
        assert exc.value.field == "action"
        assert "CREATE, UPDATE" in exc.value.reason

    def test_action_must_be_set(self) -> None:
        with pytest.raises(exceptions.ValidationError):
            derive.check_action(None, "")


class TestReplaceOnChange:
    src = model.Config.create(
        "s",
        inputs=[
            {"name": "a", "replace_on_change": True},
            {"name": "n", "type": "Number", "replace_on_change": True, "default": 1},
            {"name": "plain"},
        ],
    )

    def test_changed(self) -> None:
        assert derive.replace_on_change_changed(
            self.src, {"a": "x", "plain": 1}, {"a": "y", "plain": 2}
        ) == ["a"]

    def test_defaults_and_coercion(self) -> None:
        assert derive.replace_on_change_changed(self.src, {}, {"n": "1"}) == []
        assert derive.replace_on_change_changed(self.src, {"n": 1}, {}) == []
        assert derive.replace_on_change_changed(self.src, {}, {"n": 2, "a": "z"}) == [
            "a",
            "n",
        ]

    def test_invalid_values_compare_raw(self) -> None:
        assert derive.replace_on_change_changed(self.src, {"n": "x"}, {"n": "y"}) == [
            "n"
        ]

    def test_no_source(self) -> None:
        assert derive.replace_on_change_changed(None, {"a": 1}, {"a": 2}) == []


# -- properties --------------------------------------------------------------

_finite = st.floats(allow_nan=False, allow_infinity=False)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _finite | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_VALUES = {
    "String": st.text(max_size=20) | st.integers() | st.booleans(),
    "Number": st.integers() | _finite,
    "Boolean": st.booleans() | st.sampled_from(["yes", "no", "true", "0"]),
    "CommaDelimitedList": st.lists(st.text(max_size=5), max_size=4),
    "Json": st.dictionaries(st.text(max_size=5), _json, max_size=3)
    | st.lists(_json, max_size=3),
}
_names = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True).filter(
    lambda n: not n.startswith("deploy_")
)


@st.composite
def declared(draw: st.DrawFn) -> tuple[model.Config, dict[str, Any]]:
    names = draw(st.lists(_names, unique=True, max_size=6))
    specs: list[dict[str, Any]] = []
    values: dict[str, Any] = {}
    for name in names:
        type_ = draw(st.sampled_from(model.INPUT_TYPES))
        spec: dict[str, Any] = {"name": name, "type": type_}
        if draw(st.booleans()):
            spec["default"] = draw(_VALUES[type_])
        if draw(st.booleans()):
            spec["replace_on_change"] = True
        if draw(st.booleans()):
            values[name] = draw(_VALUES[type_])
        specs.append(spec)
    extras = draw(
        st.dictionaries(_names.filter(lambda n: n not in names), _json, max_size=3)
    )
    values.update(extras)
    return model.Config.create("src", "x", inputs=specs, creation_time=T0), values


_transports = st.sampled_from(
    [
        ("TEMP_URL_SIGNAL", derive.temp_url_signal_inputs(PUT_URL)),
        ("HEAT_SIGNAL", derive.heat_signal_inputs("a", "u", "i", "pw", "p")),
        ("ZAQAR_SIGNAL", derive.zaqar_signal_inputs("q", signed_url=SIGNED)),
        ("NO_SIGNAL", []),
    ]
)


@settings(max_examples=60, deadline=None)
@given(declared(), _transports, st.integers(0, 10**6), st.booleans())
def test_property_derive(
    case: tuple[model.Config, dict[str, Any]],
    transport: tuple[str, list[tuple[str, Any]]],
    generation: int,
    started: bool,
) -> None:
    src, values = case
    name, pairs = transport
    if started:
        pairs = [*pairs, *derive.started_signal_input()]
    kwargs: dict[str, Any] = {
        "deployment_id": "dep",
        "generation": generation,
        "server_id": "srv",
        "action": "UPDATE",
        "input_values": values,
        "signal_transport": name,
        "transport_inputs": pairs,
        "creation_time": T0,
    }
    cfg = derive.derive(src, **kwargs)
    got = names_of(cfg)
    declared_names = [i.name for i in src.inputs]
    extras = [k for k in values if k not in declared_names]
    # no declared input is lost, and the order is Heat's
    assert got[: len(declared_names)] == declared_names
    assert got[len(declared_names) : len(declared_names) + len(extras)] == extras
    assert got[len(declared_names) + len(extras) :] == [
        "deploy_server_id",
        "deploy_action",
        "deploy_signal_transport",
        *(n for n, _ in pairs),
    ]
    # each declared input carries its given value, else its default
    for spec in src.inputs:
        expected = values[spec.name] if spec.name in values else spec.default
        assert cfg.input(spec.name).value == model.coerce_value(  # type: ignore[union-attr]
            "f", spec.type, expected
        )
    # it reads back from JSON unchanged, and deriving again gives the same
    assert round_trip(cfg) == cfg
    assert derive.derive(src, **kwargs) == cfg
    assert cfg.id == derive.derived_config_id("dep", generation)
    assert derive.replace_on_change_changed(src, values, values) == []


class TestTransportNames:
    @pytest.mark.parametrize(
        ("given", "expected"),
        [
            ("TEMP_URL_SIGNAL", "TEMP_URL_SIGNAL"),
            ("temp_url_poll", "TEMP_URL_SIGNAL"),
            ("TEMP_URL_POLL", "TEMP_URL_SIGNAL"),
            ("ZAQAR_MESSAGE", "ZAQAR_SIGNAL"),
            (" zaqar_signal ", "ZAQAR_SIGNAL"),
            ("heat_signal", "HEAT_SIGNAL"),
            ("Cfn_Signal", "CFN_SIGNAL"),
            ("no_signal", "NO_SIGNAL"),
            ("auto", "AUTO"),
        ],
    )
    def test_signal(self, given: str, expected: str) -> None:
        assert names.normalize_signal_transport(given) == expected

    @pytest.mark.parametrize(
        ("given", "expected"),
        [
            ("poll_temp_url", "POLL_TEMP_URL"),
            ("ZAQAR_MESSAGE", "ZAQAR_MESSAGE"),
            ("poll_server_heat", "POLL_SERVER_HEAT"),
        ],
    )
    def test_config(self, given: str, expected: str) -> None:
        assert names.normalize_config_transport(given) == expected

    @pytest.mark.parametrize("given", ["X", "", "POLL_TEMP_URL", 3, None])
    def test_unknown_signal(self, given: Any) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            names.normalize_signal_transport(given)
        assert exc.value.field == "signal_transport"
        if isinstance(given, str):
            assert f"unknown transport {given!r}; expected one of" in str(exc.value)
            assert "TEMP_URL_SIGNAL" in str(exc.value)

    @pytest.mark.parametrize("given", ["TEMP_URL_SIGNAL", "TEMP_URL_POLL", "X"])
    def test_unknown_config(self, given: str) -> None:
        with pytest.raises(exceptions.ValidationError) as exc:
            names.normalize_config_transport(given)
        assert exc.value.field == "software_config_transport"

    def test_tuples(self) -> None:
        assert names.SIGNAL_TRANSPORTS == (
            "TEMP_URL_SIGNAL",
            "ZAQAR_SIGNAL",
            "HEAT_SIGNAL",
            "CFN_SIGNAL",
            "NO_SIGNAL",
            "AUTO",
        )
        assert "AUTO" not in names.CONCRETE_SIGNAL_TRANSPORTS
        assert names.CONFIG_TRANSPORTS == (
            "POLL_TEMP_URL",
            "ZAQAR_MESSAGE",
            "POLL_SERVER_HEAT",
        )

    @pytest.mark.parametrize(
        ("transport", "auth", "expected"),
        [
            ("HEAT_SIGNAL", "signed_url", True),
            ("CFN_SIGNAL", "signed_url", True),
            ("ZAQAR_SIGNAL", "signed_url", False),
            ("ZAQAR_SIGNAL", "credentials", True),
            ("zaqar_message", "credentials", True),
            ("TEMP_URL_SIGNAL", "credentials", False),
            ("NO_SIGNAL", "signed_url", False),
        ],
    )
    def test_needs_stack_user(self, transport: str, auth: str, expected: bool) -> None:
        assert names.needs_stack_user(transport, auth) is expected

    def test_needs_stack_user_default_and_bad_mode(self) -> None:
        assert names.needs_stack_user("ZAQAR_SIGNAL") is False
        with pytest.raises(exceptions.ValidationError) as exc:
            names.needs_stack_user("ZAQAR_SIGNAL", "token")
        assert exc.value.field == "zaqar_signal_auth"


class TestForAgent:
    """The derived configs as a server's agent gets them."""

    def published(self, heat_agents: bool) -> dict[str, Any]:
        src = source(
            inputs=[
                {"name": "foo", "default": "dflt"},
                {"name": "port", "type": "Number"},
                {"name": "ratio", "type": "Number", "default": 2.5},
                {"name": "flag", "type": "Boolean", "default": False},
                {"name": "on", "type": "Boolean"},
                {"name": "name"},
                {"name": "data", "type": "Json", "default": {"k": [1]}},
                {"name": "hosts", "type": "CommaDelimitedList", "default": "a,b"},
                {"name": "nothing", "type": "Json"},
            ]
        )
        derived = make(
            src,
            input_values={"port": 8080, "on": True},
            signal_transport="TEMP_URL_SIGNAL",
            transport_inputs=derive.temp_url_signal_inputs(PUT_URL),
        )
        [item] = derive.for_agent([derived.to_dict()], heat_agents=heat_agents)
        return item

    def test_every_input_carries_a_value_as_heat_publishes_them(self) -> None:
        """55-heat-config reads ``value`` directly: without it, KeyError and
        the config is skipped with no signal."""
        for heat_agents in (False, True):
            item = self.published(heat_agents)
            assert all("value" in i for i in item["inputs"])
        item = self.published(heat_agents=False)
        values = {i["name"]: i["value"] for i in item["inputs"]}
        assert values["name"] is None and values["nothing"] is None
        assert (values["port"], values["ratio"], values["on"]) == (8080, 2.5, True)

    def test_heat_agents_get_numbers_and_booleans_as_text(self) -> None:
        """55-heat-config makes text of String inputs only, and Heat's script
        hook puts each value in the environment: a number crashes it."""
        item = self.published(heat_agents=True)
        by_name = {i["name"]: i for i in item["inputs"]}
        assert {n: by_name[n]["value"] for n in by_name if n[:7] != "deploy_"} == {
            "foo": "dflt",
            "port": "8080",
            "ratio": "2.5",
            "flag": "false",
            "on": "true",
            "name": None,  # a String: 55-heat-config makes it "None", as Heat's
            "data": {"k": [1]},
            "hosts": ["a", "b"],
            "nothing": "",
        }
        assert by_name["port"]["type"] == "Number"  # the declared type is kept
        assert all(
            isinstance(i["value"], str | dict | list)
            for i in item["inputs"]
            if i["type"] != "String"
        )
        assert by_name["deploy_signal_id"]["value"] == PUT_URL

    def test_the_rest_of_the_config_is_unchanged(self) -> None:
        derived = make(source()).to_dict()
        for heat_agents in (False, True):
            [item] = derive.for_agent([derived], heat_agents=heat_agents)
            assert {k: v for k, v in item.items() if k != "inputs"} == {
                k: v for k, v in derived.items() if k != "inputs"
            }
            assert [i["name"] for i in item["inputs"]] == [
                i["name"] for i in derived["inputs"]
            ]
        assert "value" not in derived["inputs"][1]  # the input is not changed

    def test_an_input_given_none_gets_its_default(self) -> None:
        derived = make(source(), input_values={"foo": None, "flag": None})
        for heat_agents, flag in ((False, False), (True, "false")):
            [item] = derive.for_agent([derived.to_dict()], heat_agents=heat_agents)
            values = {i["name"]: i["value"] for i in item["inputs"]}
            assert (values["foo"], values["flag"]) == ("dflt", flag)

    def test_heat_script_hook_environment_matches_swflows_agent(self) -> None:
        """What Heat's script hook puts in the environment from the published
        values is what swflows' agent puts there from the typed ones."""
        from swflows.agent import hooks

        typed = self.published(heat_agents=False)["inputs"]
        heat = self.published(heat_agents=True)["inputs"]
        for mine, theirs in zip(typed, heat, strict=True):
            value = theirs["value"]
            if theirs["type"] == "String" and not isinstance(value, str):
                continue  # 55-heat-config's str(): Heat's own behaviour
            env = json.dumps(value) if isinstance(value, dict | list) else value
            assert env == hooks._env_value(mine["value"]), mine["name"]


# found by tests/unit/test_fuzz_config.py
@pytest.mark.parametrize("pairs", [None, 5, "deploy_signal_id=x", b"x"])
def test_transport_inputs_that_are_no_pairs_are_refused(pairs: Any) -> None:
    with pytest.raises(exceptions.ValidationError) as exc:
        make(transport_inputs=pairs)
    assert exc.value.field == "transport_inputs"


def test_values_nested_too_deeply_are_refused() -> None:
    deep: list[Any] = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(exceptions.ValidationError, match="nests too deeply") as exc:
        make(input_values={"new": deep})
    assert exc.value.field == "input_values.new"
    with pytest.raises(exceptions.ValidationError, match="nests too deeply"):
        make(transport_inputs=[("deploy_extra", deep)])


@pytest.mark.parametrize("bad", ["a\x00", "\ud800x"])
@pytest.mark.parametrize("field", ["name", "server_id", "action", "deployment_id"])
def test_text_no_database_stores_is_refused(bad: str, field: str) -> None:
    fields: dict[str, Any] = {field: bad}
    with pytest.raises(exceptions.ValidationError, match=r"NUL|lone surrogate") as exc:
        make(**fields)
    assert exc.value.field == field
