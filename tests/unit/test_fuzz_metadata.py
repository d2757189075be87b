"""Fuzzing metadata documents: what swflows publishes to a server is what its
agent parses back, and whatever else the agent is given (any bytes, any
JSON, a broken item, a Zaqar answer) is read or refused with a
ValidationError, never a crash."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from swflows import derive, exceptions, model
from swflows.agent import collectors, items
from swflows.agent import config as agent_config
from tests.unit import fuzzing
from tests.unit.fuzzing import case, fuzz, json_scalars, json_text, json_values

CREATED = datetime.datetime(2026, 11, 21, 13, 33, 18)
PUT_URL = "https://swift.example/v1/AUTH_p/c/o?temp_url_sig=abc&temp_url_expires=9"


# -- what swflows publishes -------------------------------------------------------
declared_inputs = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.one_of(st.sampled_from(["a", "b", "port", "conf"]), json_text),
            "type": st.sampled_from(model.INPUT_TYPES),
        },
        optional={"default": json_scalars, "description": json_text},
    ),
    max_size=4,
    unique_by=lambda d: d["name"],
)
component_body = st.builds(
    lambda entries: {"configs": entries},
    st.lists(
        st.fixed_dictionaries(
            {
                "actions": st.lists(
                    st.sampled_from(["CREATE", "UPDATE", "BACKUP", "DELETE"]),
                    min_size=1,
                    max_size=2,
                    unique=True,
                ),
                "tool": st.sampled_from(["script", "ansible", "puppet"]),
                "config": st.one_of(json_text, json_values),
            }
        ),
        min_size=1,
        max_size=3,
    ),
)


@st.composite
def derived_configs(draw: st.DrawFn) -> model.Config:
    """A derived config as swflows publishes it, from fuzzed sources."""
    component = draw(st.booleans())
    try:
        source = model.Config.create(
            draw(st.one_of(st.just("app"), json_text)),
            draw(component_body) if component else draw(json_text),
            group="component"
            if component
            else draw(st.sampled_from(["script", "puppet"])),
            inputs=draw(declared_inputs),
            outputs=[{"name": "result"}, {"name": "err", "error_output": True}],
            options=draw(st.dictionaries(json_text, json_values, max_size=2)),
        )
        action = draw(
            st.sampled_from([a for e in source.component_entries() for a in e.actions])
            if component
            else st.sampled_from(["CREATE", "UPDATE", "BACKUP"])
        )
        values = {
            spec.name: draw(st.one_of(json_scalars, json_text))
            for spec in source.inputs
            if draw(st.booleans())
        }
        values.update(draw(st.dictionaries(json_text, json_values, max_size=2)))
        transport = draw(
            st.sampled_from(
                ["TEMP_URL_SIGNAL", "NO_SIGNAL", "ZAQAR_SIGNAL", "HEAT_SIGNAL"]
            )
        )
        pairs: list[tuple[str, Any]] = []
        if transport == "TEMP_URL_SIGNAL":
            pairs = derive.temp_url_signal_inputs(PUT_URL)
        elif transport == "HEAT_SIGNAL":
            pairs = derive.heat_signal_inputs("http://ks/v3", "u", "uid", "pw", "p")
        elif transport == "ZAQAR_SIGNAL":
            pairs = derive.zaqar_signal_inputs(
                "q-1",
                signed_url={
                    "signature": "s",
                    "expires": "2026-11-21T14:33:18",
                    "methods": ["POST"],
                    "paths": ["/v2/queues/q-1/messages"],
                    "project": "p",
                    "url": "http://zaqar:8888",
                },
            )
        if draw(st.booleans()):
            pairs += derive.started_signal_input()
        return derive.derive(
            source,
            deployment_id=draw(st.uuids()).hex,
            generation=draw(st.integers(0, 5)),
            server_id=draw(st.one_of(st.just("server-1"), json_text)),
            action=action,
            input_values=values,
            signal_transport=transport,
            transport_inputs=pairs,
            creation_time=CREATED,
        )
    except exceptions.ValidationError:
        # (the config fuzz tests check what is refused; here only what is
        # accepted matters) a simple config instead
        return derive.derive(
            None,
            deployment_id="d",
            generation=1,
            server_id="s",
            action="CREATE",
            input_values={},
            signal_transport="NO_SIGNAL",
            creation_time=CREATED,
        )


def for_agent(configs: list[model.Config]) -> list[dict[str, Any]]:
    """The items of a server's document, as swflows publishes them."""
    items = [c.to_dict() for c in configs]
    publish = getattr(derive, "for_agent", None)
    return items if publish is None else publish(items)


def published(configs: list[model.Config], form: str) -> Any:
    """The document as the agent's collector hands it over."""
    document = {
        "deployments": for_agent(configs),
        "os-collect-config": {"request": {"metadata_url": "https://x/m"}},
    }
    if form == "heat":  # Heat's GET .../metadata/<server> answer
        document = {"metadata": document["deployments"]}
    elif form == "list":  # the heat-config file
        return fuzzing.json_bytes(document["deployments"])
    if form == "zaqar":  # a Zaqar message body: decoded JSON
        return json.loads(json.dumps(document))
    if form == "text":
        return json.dumps(document, ensure_ascii=False)
    return fuzzing.json_bytes(document)


@fuzz(700)
@given(
    configs=st.lists(derived_configs(), max_size=3),
    form=st.sampled_from(["bytes", "heat", "list", "zaqar", "text"]),
)
def test_the_agent_reads_what_is_published(
    configs: list[model.Config], form: str
) -> None:
    case("metadata")
    raw = items.parse_document(published(configs, form))
    assert len(raw) == len(configs)
    for config, item_raw in zip(configs, raw, strict=True):
        item = items.parse_item(item_raw)
        assert item.id == config.id == items.item_id(item_raw)
        assert item.name == config.name
        assert item.group == config.group
        assert item.config == config.config
        assert item.output_names == [o.name for o in config.outputs]
        # every input's value, as derived, is what the agent sees
        assert item.values == expected_values(config)
        assert item.action == config.input(derive.DEPLOY_ACTION).value  # type: ignore[union-attr]
        deploy = {k: v for k, v in item.values.items() if k.startswith("deploy_")}
        assert items.signal_inputs(item_raw) == deploy
        resolved = items.resolve(item)
        if config.is_component:
            entry = config.entry_for(item.action or "")
            assert entry is not None
            assert (resolved.group, resolved.config) == (entry.tool, entry.config)
        else:
            assert resolved == item


def expected_values(config: model.Config) -> dict[str, Any]:
    """What the agent runs with: each input's derived value, its default when
    the value is None (Item.values; Heat's agents do the same with what
    swflows publishes to them)."""
    return {
        spec.name: spec.default if spec.value is None else spec.value
        for spec in config.inputs
    }


# -- whatever else arrives --------------------------------------------------------
input_lists = st.one_of(
    json_values,
    st.lists(
        st.one_of(
            json_values,
            st.fixed_dictionaries(
                {"name": st.one_of(json_text, json_scalars, st.just("deploy_action"))},
                optional={"value": json_values, "default": json_values},
            ),
        ),
        max_size=3,
    ),
)
raw_items = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "id": st.one_of(st.just("id-1"), json_scalars),
            "name": st.one_of(json_text, json_scalars),
            "group": st.one_of(
                st.sampled_from(["script", "component", ""]), json_scalars
            ),
            "config": st.one_of(json_values, component_body),
            "inputs": input_lists,
            "outputs": input_lists,
            "options": json_values,
        },
    ),
)
documents = st.one_of(
    st.binary(max_size=100),
    json_values,
    st.lists(raw_items, max_size=3),
    st.fixed_dictionaries(
        {},
        optional={
            "deployments": st.one_of(json_values, st.lists(raw_items, max_size=3)),
            "metadata": st.one_of(json_values, st.lists(raw_items, max_size=3)),
            "os-collect-config": json_values,
        },
    ),
)


def as_given(document: Any, form: str) -> Any:
    if form == "decoded" or isinstance(document, bytes):
        return document
    text = json.dumps(document)
    return text if form == "text" else text.encode()


@fuzz(1000)
@given(
    document=documents,
    form=st.sampled_from(["decoded", "text", "bytes"]),
    cut=st.one_of(st.none(), st.integers(0, 200)),
)
def test_any_document_is_read_or_refused(
    document: Any, form: str, cut: int | None
) -> None:
    case("metadata")
    raw = as_given(document, form)
    if cut is not None and isinstance(raw, bytes | str):
        raw = raw[:cut]  # a document read half-written
    try:
        found = items.parse_document(raw)
    except exceptions.ValidationError as exc:
        assert exc.field.startswith("metadata")
        return
    assert isinstance(found, list)
    for item_raw in found:
        items.item_id(item_raw)
        items.signal_inputs(item_raw)
        try:
            item = items.resolve(items.parse_item(item_raw))
        except exceptions.ValidationError as exc:
            assert exc.field.startswith("item")
            continue
        assert isinstance(item.id, str) and item.id.strip()
        assert isinstance(item.values, dict)
        assert item.action is None or isinstance(item.action, str)
        assert all(isinstance(n, str) for n in item.output_names)


# -- the collectors' pure parts ---------------------------------------------------
signed_url_parts = st.fixed_dictionaries(
    {},
    optional={
        "signature": st.one_of(st.just("sig"), json_scalars),
        "expires": st.one_of(st.just("2026-11-21T14:33:18"), json_scalars),
        "methods": st.one_of(st.just(["POST", "GET"]), json_values),
        "paths": st.one_of(
            st.just(["/v2/queues/q-1/messages"]),
            st.lists(
                st.one_of(json_text, st.just("/v2/queues/q/messages")), max_size=2
            ),
            json_values,
        ),
        "project": st.one_of(st.just("p"), json_scalars),
        "url": st.one_of(st.just("http://zaqar:8888"), json_scalars),
    },
)


@fuzz(700)
@given(
    value=st.one_of(
        signed_url_parts,
        st.builds(json.dumps, signed_url_parts),
        json_values,
        st.sampled_from(["[" * 3000 + "]" * 3000, "{", "NaN", "", "null"]),
    )
)
def test_signed_urls(value: Any) -> None:
    case("metadata")
    try:
        signed = collectors.signed_url_value(value)
    except exceptions.ValidationError as exc:
        assert exc.field.startswith("signed_url")
        return
    headers = collectors.signed_headers(signed)
    assert all(isinstance(v, str) for v in headers.values())
    try:
        path = collectors.messages_path(signed)
    except exceptions.ValidationError as exc:
        assert exc.field == "signed_url.paths"
        return
    assert path.startswith("/") and path.endswith("/messages")


@fuzz(500)
@given(
    page=st.one_of(
        json_values,
        st.fixed_dictionaries(
            {},
            optional={
                "links": st.one_of(
                    json_values,
                    st.lists(
                        st.fixed_dictionaries(
                            {},
                            optional={
                                "rel": st.sampled_from(["next", "self", 1]),
                                "href": st.one_of(
                                    st.just("/v2/queues/q/messages?marker=1"),
                                    json_scalars,
                                ),
                            },
                        ),
                        max_size=2,
                    ),
                ),
                "messages": json_values,
            },
        ),
    ),
    endpoint=st.one_of(
        json_text, st.sampled_from(["http://z:8888/v2", "http://z/v1.1/", "http://z"])
    ),
)
def test_zaqar_pages_and_endpoints(page: Any, endpoint: str) -> None:
    case("metadata")
    link = collectors._next_link(page)
    assert link is None or link.startswith("/")
    root = collectors.api_root(endpoint)
    assert endpoint.rstrip("/").startswith(root)


# -- the agent's configuration (boot data, os-collect-config) -----------------------
agent_keys = st.sampled_from(
    [
        "interval",
        "min_interval",
        "jitter",
        "splay",
        "notify_attempts",
        "zaqar_signal_bytes",
        "hook_dirs",
        "state_dir",
        "collectors",
        "log_level",
        "heat_signal_url",
        "polling_interval",
        "unknown",
    ]
)
agent_values = st.one_of(
    json_values,
    st.sampled_from(["1" + "0" * 400, "-1", "1e999", "nan", "0", "request zaqar"]),
    st.integers(-(10**400), 10**400),
)
agent_sections = st.fixed_dictionaries(
    {},
    optional={
        "agent": st.one_of(
            st.dictionaries(agent_keys, agent_values, max_size=3), json_values
        ),
        "request": st.one_of(
            st.fixed_dictionaries(
                {"metadata_url": st.one_of(st.just("https://x/m"), json_scalars)}
            ),
            json_values,
        ),
        "zaqar": st.one_of(
            st.fixed_dictionaries({"signed_url": st.one_of(json_text, json_values)}),
            json_values,
        ),
        "os-collect-config": json_values,
        "collectors": json_values,
        "polling_interval": agent_values,
    },
)


@fuzz(400)
@given(
    sections=agent_sections,
    form=st.sampled_from(["json", "ini", "bytes"]),
    raw=st.binary(max_size=60),
)
def test_agent_configuration_files(
    tmp_path_factory: pytest.TempPathFactory, sections: Any, form: str, raw: bytes
) -> None:
    case("metadata")
    path = tmp_path_factory.getbasetemp() / "agent.conf"
    if form == "json":
        path.write_text(json.dumps(sections))
    elif form == "ini":
        lines = []
        for name, section in sections.items():
            lines.append(f"[{name}]")
            if isinstance(section, dict):
                lines += [f"{k} = {v}" for k, v in section.items()]
        path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
    else:
        path.write_bytes(raw)
    try:
        loaded = agent_config.load([path])
    except exceptions.ValidationError as exc:
        assert exc.field
        return
    assert loaded.collector()[0] in collectors.COLLECTORS
