"""``--os-cloud``: swflows' own Keystone login from a clouds.yaml entry.

The entry's auth type and auth options become overrides of ``[identity]``
(which ``[messaging]`` and ``[compute]`` may borrow through
``auth_section``), loaded by keystoneauth1 like options from the file.
"""

from __future__ import annotations

from typing import Any

from keystoneauth1 import exceptions as ksa_exc
from keystoneauth1 import loading
from oslo_config import cfg

from swflows.cli import parsing

GROUP = "identity"


def request_context(conf: cfg.ConfigOpts) -> Any:
    """The oslo.context of ``[identity]``'s login: its token's project,
    user and roles, and the token (a deployment's trust is made with it,
    see :mod:`swflows.trusts`)."""
    from oslo_context import context as oslo_context

    from swflows.clients import loading as client_loading

    auth = client_loading.load_auth(conf, GROUP)
    if auth is None:
        raise parsing.BadInput(
            "--scoped", "needs a Keystone login: [identity] or --os-cloud"
        )
    session = client_loading.load_session(conf, GROUP, auth)
    try:
        access = auth.get_access(session)
    except ksa_exc.ClientException as exc:
        raise parsing.BadInput(
            "--scoped", f"Keystone refused the login: {exc}"
        ) from None
    if not access.project_id:
        raise parsing.BadInput("--scoped", "the login is not scoped to a project")
    return oslo_context.RequestContext(
        project_id=access.project_id,
        user_id=access.user_id,
        project_name=access.project_name,
        user_name=access.username,
        roles=list(access.role_names or ()),
        auth_token=access.auth_token,
    )


def apply(conf: cfg.ConfigOpts, name: str) -> None:
    """Override ``[identity]``'s auth with clouds.yaml's cloud ``name``."""
    try:
        from openstack import config as os_config
        from openstack import exceptions as os_exc
    except ImportError:  # openstacksdk is optional
        raise parsing.BadInput(
            "--os-cloud", "reading clouds.yaml needs openstacksdk installed"
        ) from None
    try:
        region = os_config.OpenStackConfig().get_one(cloud=name)
    except os_exc.ConfigException as exc:
        raise parsing.BadInput("--os-cloud", str(exc)) from None
    auth_type = region.config.get("auth_type") or "password"
    auth: dict[str, Any] = dict(region.config.get("auth") or {})
    try:
        plugin: Any = loading.get_plugin_loader(auth_type)
    except ksa_exc.NoMatchingPlugin:
        raise parsing.BadInput(
            "--os-cloud", f"cloud {name}: no auth plugin {auth_type!r}"
        ) from None
    loading.register_auth_conf_options(conf, GROUP)
    conf.register_opts(loading.get_auth_plugin_conf_options(plugin), group=GROUP)
    conf.set_override("auth_type", auth_type, group=GROUP)
    conf.clear_override("auth_section", group=GROUP)
    known = {opt.dest for opt in loading.get_auth_plugin_conf_options(plugin)}
    for key, value in auth.items():
        dest = key.replace("-", "_")
        if dest in known:
            conf.set_override(dest, value, group=GROUP)
    cafile = region.config.get("cacert")
    if cafile:
        conf.set_override("cafile", cafile, group=GROUP)
    if region.config.get("verify") is False:
        conf.set_override("insecure", True, group=GROUP)
    if region.get_region_name():
        conf.set_override("region_name", region.get_region_name(), group=GROUP)
