"""swflows.embedding.heat loaded by Heat's own package, as Heat loads it.

These tests need no running Heat: they load the plugin directory with
Heat's plugin loader and check the resource type against Heat's classes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from heat.common import plugin_loader
from heat.engine import attributes, properties
from heat.engine import resource as heat_resource

from swflows.embedding import heat as plugin
from swflows.embedding import heat_group, heat_plugins


def test_heat_loads_the_plugin_directory() -> None:
    """Heat's loader imports every module of a ``plugin_dirs`` directory;
    the one there maps swflows' resource type."""
    package = plugin_loader.create_subpackage([heat_plugins.PATH], "swflows_test")
    modules = list(plugin_loader.load_modules(package))
    assert [m.__name__ for m in modules] == ["swflows_test.plugins.swflows_deployment"]
    mapping = modules[0].resource_mapping()
    assert mapping == {
        "OS::Swflows::Deployment": plugin.SwflowsDeployment,
        "OS::Swflows::DeploymentGroup": heat_group.SwflowsDeploymentGroup,
    }
    assert Path(heat_plugins.PATH).is_dir()


def test_no_constant_hides_one_of_heats_resource() -> None:
    """Heat's Resource uses its own upper-case names (ACTIONS, CREATE, ...)
    at run time: a property or attribute constant must not reuse one (an
    ``ACTIONS = "actions"`` made every create fail "Invalid action CREATE")."""
    cls = plugin.SwflowsDeployment
    own = {
        name
        for name in vars(cls)
        if name.isupper() and name not in ("PROPERTIES", "ATTRIBUTES")
    }
    clashes = {
        name
        for name in own
        if hasattr(heat_resource.Resource, name)
        and getattr(cls, name) != getattr(heat_resource.Resource, name)
    }
    assert clashes == set()
    assert cls.ACTIONS == heat_resource.Resource.ACTIONS


def test_properties_and_attributes_are_shaped_as_software_deployments() -> None:
    from heat.engine.resources.openstack.heat import software_deployment

    theirs = software_deployment.SoftwareDeployment
    cls = plugin.SwflowsDeployment
    shared = {"config", "server", "input_values", "actions", "name", "signal_transport"}
    assert shared <= set(cls.properties_schema) & set(theirs.properties_schema)
    for name in shared:
        assert cls.properties_schema[name].type == theirs.properties_schema[name].type
    for name in ("deploy_stdout", "deploy_stderr", "deploy_status_code"):
        assert name in cls.attributes_schema
    assert cls.attributes_schema["deploy_status_code"].type == attributes.Schema.INTEGER


def test_heat_validates_its_properties() -> None:
    cls = plugin.SwflowsDeployment
    template = cls.resource_to_template("OS::Swflows::Deployment", "hot")
    assert set(template["parameters"]) == set(cls.PROPERTIES)
    good = properties.Properties(
        cls.properties_schema,
        {"config": "c", "server": "s", "signal_transport": "TEMP_URL_SIGNAL"},
    )
    good.validate()
    assert good["actions"] == ["CREATE", "UPDATE"]
    bad = properties.Properties(
        cls.properties_schema, {"config": "c", "server": "s", "timeout": 0}
    )
    with pytest.raises(Exception, match="timeout"):
        bad.validate()
    wrong = properties.Properties(
        cls.properties_schema,
        {"config": "c", "server": "s", "config_transport": "POLL_SERVER_CFN"},
    )
    with pytest.raises(Exception, match="config_transport"):
        wrong.validate()


def test_its_options_are_registered() -> None:
    from oslo_config import cfg

    assert {o.dest for o in plugin.opts} == {
        "database_url",
        "database_max_pool_size",
        "database_max_overflow",
        "secret_key",
        "signal_transport",
        "config_transport",
        "coordination_url",
        "project_name",
        "project_domain_id",
    }
    assert cfg.CONF.swflows.signal_transport == "AUTO"
    assert cfg.CONF.swflows.project_name == "service"


def trustee_conf(**trustee: str) -> Any:
    """Options as heat.conf gives them: [trustee] with a password login."""
    from keystoneauth1 import loading as ks_loading
    from oslo_config import cfg

    conf = cfg.ConfigOpts()
    conf.register_opts(plugin.opts, group=plugin.GROUP)
    ks_loading.register_auth_conf_options(conf, "trustee")
    password = ks_loading.get_auth_plugin_conf_options("password")
    conf.register_opts(password, group="trustee")
    conf.set_override("auth_type", "password", "trustee")
    for name, value in trustee.items():
        conf.set_override(name, value, "trustee")
    conf([], project="swflows-heat-test")
    return conf


def test_an_unscoped_trustee_is_scoped_to_the_service_project() -> None:
    """Heat's usual [trustee] names no project; a token without one has an
    empty catalog, so swflows scopes it to [swflows] project_name."""
    base = {
        "auth_url": "http://keystone.example/v3",
        "username": "heat",
        "password": "secret",
        "user_domain_id": "default",
    }
    scoped = plugin.service_auth(trustee_conf(**base)).get_cache_id_elements()
    assert (scoped["project_name"], scoped["project_domain_id"]) == (
        "service",
        "default",
    )
    assert scoped["auth_url"] == base["auth_url"]
    named = plugin.service_auth(trustee_conf(**base, project_id="p1"))
    kept = named.get_cache_id_elements()
    assert (kept["project_id"], kept["project_name"]) == ("p1", None)


def test_a_coordination_url_elects_one_watcher_among_the_engines() -> None:
    """[swflows] coordination_url becomes swflows' [coordination]
    backend_url: the runners of every heat-engine worker elect one signal
    watcher (without it each worker's watcher lists Swift on its own)."""
    url = "redis://127.0.0.1:6379?db=5"
    login = {"auth_url": "http://keystone.example/v3", "username": "heat"}
    assert plugin.swflows_conf(trustee_conf(**login)).coordination.backend_url is None
    conf = trustee_conf(**login)
    conf.set_override("coordination_url", url, plugin.GROUP)
    assert plugin.swflows_conf(conf).coordination.backend_url == url


def test_the_pool_of_each_worker_is_bounded_as_heat_conf_says() -> None:
    """[swflows] database_max_pool_size and database_max_overflow become
    swflows' [database] options, which bound the engine it opens on
    database_url; unset, swflows' defaults hold."""
    from swflows.persistence import database

    login = {"auth_url": "http://keystone.example/v3", "username": "heat"}
    default = database.PoolLimits.from_conf(plugin.swflows_conf(trustee_conf(**login)))
    assert (default.size, default.overflow) == (5, 10)
    conf = trustee_conf(**login)
    conf.set_override("database_max_pool_size", 2, plugin.GROUP)
    conf.set_override("database_max_overflow", 1, plugin.GROUP)
    limits = database.PoolLimits.from_conf(plugin.swflows_conf(conf))
    assert (limits.size, limits.overflow) == (2, 1)
    engine = database.create_engine("postgresql://u@127.0.0.1:1/db", limits)
    try:
        assert (engine.pool.size(), engine.pool._max_overflow) == (2, 1)  # type: ignore[attr-defined]
    finally:
        engine.dispose()


def test_each_forked_worker_starts_its_swflows_without_waiting_for_a_stack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Heat loads plugins, then forks its engine workers: the plugin module
    has every worker forked after it make its swflows at once, in a thread
    of its own (its runner resumes flows, its watcher looks for signals),
    when [swflows] database_url is set; a failure is logged, not raised."""
    import os
    import threading

    from oslo_config import cfg

    started: list[int] = []
    done = threading.Event()

    def made() -> Any:
        started.append(os.getpid())
        done.set()
        raise RuntimeError("the database is down")

    monkeypatch.setattr(plugin, "instance", made)
    cfg.CONF.set_override("database_url", None, plugin.GROUP)
    try:
        plugin.start_in_worker()
        assert not done.wait(0.3) and started == []  # not configured
        cfg.CONF.set_override("database_url", "sqlite://", plugin.GROUP)
        # registered once, whoever calls it (loading the plugin did)
        plugin.start_with_workers()
        plugin.start_with_workers()
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # a worker: its hook has run; report what it did
            ok = done.wait(10) and started == [os.getpid()]
            os.write(write, b"1" if ok else b"0")
            os._exit(0)
        os.close(write)
        assert os.read(read, 1) == b"1"
        os.waitpid(child, 0)
        assert started == []  # not in the process that forked
    finally:
        cfg.CONF.clear_override("database_url", plugin.GROUP)
