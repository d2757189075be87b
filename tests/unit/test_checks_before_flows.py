"""Checks made before any flow starts: a timeout within its maximum,
input values that coerce to their declared types, names without control
characters; refused at once, nothing written to the store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from swflows import conf as sw_conf
from swflows import exceptions, model
from swflows.cli import parsing
from swflows.fixture import LocalSwflows


@pytest.fixture
def local() -> Iterator[LocalSwflows]:
    with LocalSwflows() as made:
        yield made


def test_a_timeout_beyond_its_maximum_is_refused() -> None:
    assert model.MAX_TIMEOUT == 7 * 24 * 3600
    assert parsing.minutes_to_seconds(parsing.MAX_TIMEOUT_MINUTES) == model.MAX_TIMEOUT
    for minutes in (parsing.MAX_TIMEOUT_MINUTES + 1, 99999999999999999999):
        with pytest.raises(parsing.BadInput, match=r"must be 1 to 10080 minutes"):
            parsing.minutes_to_seconds(minutes)
    option = {o.name: o for o in sw_conf.list_opts()[0][1]}["deployment_timeout"]
    assert option.type.max == model.MAX_TIMEOUT  # type: ignore[attr-defined]


def test_the_api_refuses_a_timeout_beyond_its_maximum(local: LocalSwflows) -> None:
    sw = local.sw
    config = sw.create_config("app", "#!/bin/sh\n", group="script")
    with pytest.raises(exceptions.ValidationError, match="must be 1 to 604800"):
        sw.deploy(local.new_server(), config.id, timeout=10**20, wait=False)
    assert sw.list_deployments() == [] and sw.list_flows() == []


def test_an_input_that_does_not_coerce_is_refused_before_a_flow(
    local: LocalSwflows,
) -> None:
    sw = local.sw
    config = sw.create_config(
        "app",
        "#!/bin/sh\n",
        group="script",
        inputs=[{"name": "count", "type": "Number"}, {"name": "on", "type": "Boolean"}],
    )
    server = local.new_server()
    with pytest.raises(exceptions.ValidationError, match="expected a Number"):
        sw.deploy(server, config.id, input_values={"count": "notanumber"}, wait=False)
    assert sw.list_deployments() == [] and sw.list_flows() == []
    done = sw.deploy(server, config.id, input_values={"count": "3", "on": "yes"})
    with pytest.raises(exceptions.ValidationError, match="expected a Boolean"):
        sw.redeploy(done.id, input_values={"on": "maybe"}, wait=False)
    with pytest.raises(exceptions.ValidationError, match="expected a Number"):
        sw.trigger(done.id, model.UPDATE, input_values={"count": "x"}, wait=False)
    assert [d.id for d in sw.list_deployments()] == [done.id]
    assert sw.show(done.id).generation == done.generation
    with pytest.raises(exceptions.ValidationError, match="expected a Number"):
        sw.create_group(
            "g",
            config.id,
            {"a": local.new_server()},
            member_values={"a": {"count": "many"}},
            wait=False,
        )


@pytest.mark.parametrize("name", ["red\x1b[31m", "bell\x07", "two\nlines", "c1\x9b"])
def test_names_with_control_characters_are_refused(
    local: LocalSwflows, name: str
) -> None:
    sw = local.sw
    with pytest.raises(exceptions.ValidationError, match="control characters"):
        sw.create_config(name, "#!/bin/sh\n", group="script")
    config = sw.create_config("ok", "#!/bin/sh\n", group="script")
    with pytest.raises(exceptions.ValidationError, match="control characters"):
        sw.deploy(local.new_server(), config.id, name=name, wait=False)
    with pytest.raises(exceptions.ValidationError, match="control characters"):
        sw.deploy(name, config.id, wait=False)
    with pytest.raises(exceptions.ValidationError, match="control characters"):
        sw.create_group(name, config.id, {"a": local.new_server()}, wait=False)
    assert [c.name for c in sw.list_configs()] == ["ok"]
    assert sw.list_deployments() == [] and sw.list_flows() == []
