"""examples/heat_plugin.py against Heat's own package (``tox -e heat``).

Heat is not one of swflows' dependencies: these tests run in their own
environment, where openstack-heat is installed (``SWFLOWS_REQUIRE_HEAT=1``
makes a missing Heat a failure, not a skip), and check that the example
plugin loads as Heat loads plugins and that Heat accepts its schemas.
"""

from __future__ import annotations

import importlib.util
import os
import types
from pathlib import Path

import pytest

if os.environ.get("SWFLOWS_REQUIRE_HEAT") != "1":
    # outside ``tox -e heat`` Heat is usually not installed
    pytest.importorskip("heat.engine.resource")
from heat.engine import properties
from heat.engine import resource as heat_resource_module

PLUGIN = Path(__file__).resolve().parents[2] / "examples" / "heat_plugin.py"


@pytest.fixture(scope="module")
def plugin() -> types.ModuleType:
    """The example, imported from its file as Heat's plugin loader does."""
    spec = importlib.util.spec_from_file_location("heat_plugin_example", PLUGIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_it_maps_one_resource_type(plugin: types.ModuleType) -> None:
    mapping = plugin.resource_mapping()
    assert list(mapping) == ["OS::Swflows::Deployment"]
    cls = mapping["OS::Swflows::Deployment"]
    assert issubclass(cls, heat_resource_module.Resource)
    for action in ("create", "update", "suspend", "resume", "delete"):
        assert callable(getattr(cls, f"handle_{action}"))
        assert callable(getattr(cls, f"check_{action}_complete"))
    assert callable(cls.handle_signal)


def test_heat_accepts_its_schemas(plugin: types.ModuleType) -> None:
    cls = plugin.SwflowsDeployment
    template = cls.resource_to_template("OS::Swflows::Deployment", "hot")
    assert set(template["parameters"]) == set(cls.PROPERTIES)
    assert set(template["outputs"]) >= set(cls.ATTRIBUTES)
    good = properties.Properties(
        cls.properties_schema,
        {"config": "c", "server": "s", "signal_transport": "HEAT_SIGNAL"},
    )
    good.validate()
    assert good["actions"] == ["CREATE", "UPDATE"]
    bad = properties.Properties(
        cls.properties_schema, {"config": "c", "server": "s", "timeout": 0}
    )
    with pytest.raises(Exception, match="timeout"):
        bad.validate()


def test_its_options_are_registered(plugin: types.ModuleType) -> None:
    from oslo_config import cfg

    assert cfg.CONF.swflows.signal_transport == "TEMP_URL_SIGNAL"
    assert {o.dest for o in plugin.swflows_opts} == {
        "database_url",
        "secret_key",
        "signal_transport",
    }
