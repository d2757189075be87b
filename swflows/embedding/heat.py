"""``OS::Swflows::Deployment``: swflows inside OpenStack Heat (27 and later).

A Heat resource type that deploys a swflows config to a server, shaped as
Heat's own ``OS::Heat::SoftwareDeployment`` (properties ``config``,
``server``, ``input_values``, ``actions``, ``signal_transport``, ``name``;
attributes ``deploy_stdout``, ``deploy_stderr``, ``deploy_status_code`` and
every output of the config by its name, plus the ``outputs`` map), with
Heat's lifecycle mapped onto swflows' flows by
:class:`swflows.embedding.Lifecycle`.

Heat loads resource plugins only from the directories of its
``plugin_dirs`` option; :data:`swflows.embedding.heat_plugins.PATH` is
such a directory, holding one module that imports this one.  See the
README's "Embedding in Heat".

One swflows per heat-engine process keeps the deployments, their signal
stores and stack users in its own database (``[swflows] database_url``),
and acts with Heat's service identity: the ``[trustee]`` options, scoped
to the project ``[swflows] project_name`` (``service``) when they name
none, since a deployment's flows outlive the request that started them and
continue on another engine after a restart.  Stack users are made as
Heat's stack domain admin, in Heat's stack user domain.
"""

from __future__ import annotations

import os
import threading
import uuid
from typing import Any

import requests
from heat.common import exception
from heat.common.i18n import _
from heat.engine import attributes, constraints, properties, resource, support
from keystoneauth1 import exceptions as ks_exceptions
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3
from oslo_config import cfg
from oslo_log import log as logging
from oslo_serialization import jsonutils

from swflows import Swflows, bootdata, embedding, exceptions, metadata, states
from swflows import conf as swconf
from swflows import transport_names as names
from swflows.embedding.completion import action_flows

LOG = logging.getLogger(__name__)

GROUP = "swflows"

#: resource type name
TYPE = "OS::Swflows::Deployment"

#: the signal transports the resources accept (HEAT_SIGNAL to refuse it
#: with its reason, see :func:`refuse_heat_signal`)
SIGNAL_TRANSPORTS = [
    names.TEMP_URL_SIGNAL,
    names.ZAQAR_SIGNAL,
    names.HEAT_SIGNAL,
    names.NO_SIGNAL,
    names.AUTO,
]

#: resource data: the name of the server's resource, when it is of this stack
SERVER_RESOURCE = "swflows_server_resource"

#: a Heat-booted server's software_config_transport whose metadata Heat
#: serves: swflows' items go into it (the object of POLL_TEMP_URL rewritten)
HEAT_SERVED = (names.POLL_SERVER_HEAT, names.POLL_TEMP_URL)
#: seconds a PUT of a server's metadata object may take
PUT_TIMEOUT = 30

#: seconds a check of a deployment waiting for its agent waits for its end
#: (Heat checks about once a second): Heat hears of the outcome within
#: :data:`COMPLETIONS_LOOK` of its flow's end, and five times fewer checks
#: run meanwhile.  A stack's cancel or timeout is seen that much later at
#: most
CHECK_WAIT = 5.0
#: seconds between two looks of the checks that wait (one query for all)
COMPLETIONS_LOOK = 0.2
#: seconds a create or update waits for its flow to put the deployment in
#: the server's metadata before pushing it to a Heat-booted server (the
#: checks push it after, if it is slower)
SETTLE_TIMEOUT = 10.0

#: resource data: the ids of the Heat software configs this resource copied
IMPORTED_CONFIG = "swflows_imported_config"

#: why HEAT_SIGNAL is refused
HEAT_SIGNAL_REFUSED = (
    "signal_transport HEAT_SIGNAL: no agent can sign in to heat-api for an "
    f"{TYPE} (the deployment's stack user is swflows', not a user of this "
    "stack); use TEMP_URL_SIGNAL or ZAQAR_SIGNAL. A signal sent with "
    "'openstack stack resource signal' reaches the deployment whatever its "
    "transport."
)

#: what scopes a password login's token
SCOPES = (
    "project_id",
    "project_name",
    "domain_id",
    "domain_name",
    "trust_id",
    "system_scope",
)
CATALOG_TYPES = {
    "object_store": "object-store",
    "messaging": "messaging",
    "compute": "compute",
}

opts = [
    cfg.StrOpt(
        "database_url",
        secret=True,
        help="SQLAlchemy URL of swflows' own database.",
    ),
    cfg.IntOpt(
        "database_max_pool_size",
        min=1,
        help="Connections to database_url each heat-engine worker keeps open "
        "(unset: swflows' [database] max_pool_size, 5).  Each worker has "
        "its own: with database_max_overflow, workers times both is the "
        "most swflows asks of the database server, beside Heat's own "
        "[database] pool.",
    ),
    cfg.IntOpt(
        "database_max_overflow",
        min=0,
        help="Connections each worker may open past database_max_pool_size "
        "while all of those are in use (unset: swflows' [database] "
        "max_overflow, 10).",
    ),
    cfg.StrOpt(
        "secret_key",
        secret=True,
        help="Fernet key encrypting swflows' secrets at rest; the same on "
        "every heat-engine.",
    ),
    cfg.StrOpt(
        "signal_transport",
        default=names.AUTO,
        help="Signal transport of deployments that name none (AUTO: "
        "TEMP_URL_SIGNAL when the catalog has Swift, else one the server's "
        "agent can send).",
    ),
    cfg.StrOpt(
        "config_transport",
        help="Config transport of servers swflows has not enrolled (default: "
        "POLL_TEMP_URL when the catalog has Swift, else ZAQAR_MESSAGE, else "
        "POLL_SERVER_HEAT). Every one of them is read by both swflows' "
        "agent and Heat's.",
    ),
    cfg.StrOpt(
        "coordination_url",
        secret=True,
        help="tooz URL of the Redis or ZooKeeper on which the swflows runners "
        "of every heat-engine worker (and engine) elect one signal watcher, "
        "the others standing by: redis://host:port?db=N or "
        "zookeeper://host:port. Unset: every worker's watcher looks at "
        "every waiting deployment, each listing Swift on its own.",
    ),
    cfg.StrOpt(
        "project_name",
        default="service",
        help="Project the [trustee] identity is scoped to when its options name none.",
    ),
    cfg.StrOpt(
        "project_domain_id",
        default="default",
        help="Domain of project_name.",
    ),
]
cfg.CONF.register_opts(opts, group=GROUP)

_lock = threading.Lock()
_instance: list[Swflows] = []
_completions: list[embedding.Completions] = []
_started_with_workers = False


def service_auth(conf: cfg.ConfigOpts) -> Any:
    """Heat's service identity (``[trustee]``), scoped to a project.

    ``[trustee]`` usually names no project (Heat adds a trust to it); a
    token without a scope has an empty catalog, so then the identity is
    scoped to ``[swflows] project_name``.
    """
    auth = ks_loading.load_auth_from_conf_options(conf, "trustee")
    if auth is None:
        raise exceptions.ValidationError("trustee", "[trustee] names no auth_type")
    elements: dict[str, Any] = getattr(auth, "get_cache_id_elements", dict)()
    if not elements or any(elements.get(name) for name in SCOPES):
        return auth  # scoped already, or a plugin that is not a login
    return ks_loading.load_auth_from_conf_options(
        conf,
        "trustee",
        project_name=conf[GROUP].project_name,
        project_domain_id=conf[GROUP].project_domain_id,
    )


def catalog_services(session: ks_session.Session, region: str | None) -> list[str]:
    """The services swflows may use: those the catalog lists."""
    found = []
    for service, kind in CATALOG_TYPES.items():
        try:
            session.get_endpoint(
                service_type=kind, interface="public", region_name=region
            )
        except ks_exceptions.EndpointNotFound:
            continue
        found.append(service)
    return found


def build(conf: cfg.ConfigOpts, *, start: bool = True) -> Swflows:
    """A swflows on Heat's service identity and options (``start``: see
    :func:`swflows.embedding.from_session`)."""
    auth = service_auth(conf)
    session = ks_session.Session(auth=auth)
    region = conf.region_name_for_services
    services = catalog_services(session, region)
    domain = conf.stack_user_domain_id
    domain_admin = ks_session.Session(
        auth=v3.Password(
            auth_url=auth.auth_url,
            username=conf.stack_domain_admin,
            password=conf.stack_domain_admin_password,
            user_domain_id=domain,
            domain_id=domain,
        )
    )
    return embedding.from_session(
        session,
        conf[GROUP].database_url,
        conf=swflows_conf(conf),
        secret_key=conf[GROUP].secret_key,
        services=services,
        region_name=region,
        stack_domain_session=domain_admin,
        stack_user_domain_id=domain,
        stack_user_role=conf.heat_stack_user_role,
        start=start,
    )


def swflows_conf(conf: cfg.ConfigOpts) -> cfg.ConfigOpts:
    """swflows' own options, from what ``[swflows]`` of heat.conf sets
    (``coordination_url``, the database pool's limits); every other one
    at its default."""
    options = swconf.get_conf()
    ours = conf[GROUP]
    if ours.coordination_url:
        options.set_override("backend_url", ours.coordination_url, group="coordination")
    for name in ("max_pool_size", "max_overflow"):
        value = ours[f"database_{name}"]
        if value is not None:
            options.set_override(name, value, group="database")
    return options


def instance() -> Swflows:
    """One swflows per heat-engine process."""
    with _lock:
        if not _instance:
            _instance.append(build(cfg.CONF))
        return _instance[0]


def start_with_workers() -> None:
    """Have every heat-engine worker forked from now on make its swflows as
    it starts (:func:`start_in_worker`), not when a resource first needs it.

    Called once, by the plugin module Heat loads (its parent process loads
    plugins, then forks its workers).  A worker's runner then resumes the
    flows a stopped heat-engine left, and its watcher (or its standby, with
    ``coordination_url``) looks for signals, from the worker's start: after
    a restart, deployments waiting on their agents go on though no stack
    touches them; and the first stack does not pay each worker's start.
    """
    global _started_with_workers
    with _lock:
        if _started_with_workers:
            return
        _started_with_workers = True
    os.register_at_fork(after_in_child=start_in_worker)


def start_in_worker() -> None:
    """In a worker just forked: make its swflows (:func:`instance`) in a
    thread of its own, if ``[swflows] database_url`` is set; a failure (the
    database or Keystone down) is logged, and the first resource that
    needs swflows tries again."""
    if not cfg.CONF[GROUP].database_url:
        return

    def start() -> None:
        try:
            instance()
        except Exception as exc:
            LOG.warning(
                "swflows did not start with this heat-engine worker (%s: %s); "
                "the first resource that needs it starts it",
                type(exc).__name__,
                exc,
            )

    threading.Thread(target=start, name="swflows-start", daemon=True).start()


def completions() -> embedding.Completions:
    """One Completions per heat-engine process, for the checks that wait
    (:data:`CHECK_WAIT`): one look at the flows of every deployment they
    wait for, each :data:`COMPLETIONS_LOOK` seconds, whichever heat-engine
    worker's runner resumes them."""
    sw = instance()
    with _lock:
        if not _completions:
            _completions.append(embedding.Completions(sw, interval=COMPLETIONS_LOOK))
        return _completions[0]


def default_config_transport(sw: Swflows, agent: str = bootdata.SWFLOWS_AGENT) -> str:
    """The config transport of a server swflows has not enrolled, running
    ``agent``: ``[swflows] config_transport`` if set; else POLL_TEMP_URL
    when the catalog has Swift (both agents read it); else ZAQAR_MESSAGE
    for swflows' agent; else POLL_SERVER_HEAT (Heat's agents, the server
    a resource of the same stack)."""
    chosen: str | None = cfg.CONF[GROUP].config_transport
    if chosen:
        return chosen
    if sw.services.clients.offers("object_store"):
        return names.POLL_TEMP_URL
    if agent == bootdata.SWFLOWS_AGENT and sw.services.clients.offers("messaging"):
        return names.ZAQAR_MESSAGE
    return names.POLL_SERVER_HEAT


class _Pending:
    """An update waiting for the action in flight to end first."""

    def __init__(self, waiting: str, prop_diff: dict[str, Any]) -> None:
        self.waiting = waiting
        self.prop_diff = prop_diff
        self.update_started: str | None = None


class SwflowsDeployment(resource.Resource):  # type: ignore[misc]  # Heat is untyped
    """Deploys a swflows config to a server and waits for its signal."""

    support_status = support.SupportStatus(version="27.0.0")

    # Heat's Resource has ACTIONS (its action names): property constants
    # must not reuse any name of Resource's
    PROPERTIES = (
        CONFIG,
        SERVER,
        INPUT_VALUES,
        DEPLOY_ACTIONS,
        NAME,
        SIGNAL_TRANSPORT,
        CONFIG_TRANSPORT,
        TIMEOUT,
    ) = (
        "config",
        "server",
        "input_values",
        "actions",
        "name",
        "signal_transport",
        "config_transport",
        "timeout",
    )

    properties_schema = {
        CONFIG: properties.Schema(
            properties.Schema.STRING,
            _("Id of the swflows config to deploy."),
            required=True,
            update_allowed=True,
        ),
        SERVER: properties.Schema(
            properties.Schema.STRING,
            _("Id of the server to deploy to."),
            required=True,
        ),
        INPUT_VALUES: properties.Schema(
            properties.Schema.MAP,
            _("Values of the config's inputs."),
            default={},
            update_allowed=True,
        ),
        DEPLOY_ACTIONS: properties.Schema(
            properties.Schema.LIST,
            _(
                "Which lifecycle actions of the deployment resource will "
                "result in this deployment being triggered (a component "
                "config lists its own)."
            ),
            default=["CREATE", "UPDATE"],
        ),
        NAME: properties.Schema(
            properties.Schema.STRING,
            _("Name of the deployment (default: the resource's physical name)."),
        ),
        SIGNAL_TRANSPORT: properties.Schema(
            properties.Schema.STRING,
            _("How the server signals back (default: [swflows] signal_transport)."),
            constraints=[constraints.AllowedValues(SIGNAL_TRANSPORTS)],
        ),
        CONFIG_TRANSPORT: properties.Schema(
            properties.Schema.STRING,
            _(
                "How the server receives its metadata, if swflows has not "
                "enrolled it yet (default: [swflows] config_transport)."
            ),
            constraints=[
                constraints.AllowedValues(
                    [
                        names.POLL_TEMP_URL,
                        names.ZAQAR_MESSAGE,
                        names.POLL_SERVER_HEAT,
                    ]
                )
            ],
        ),
        TIMEOUT: properties.Schema(
            properties.Schema.INTEGER,
            _("Seconds the server has to signal back."),
            constraints=[constraints.Range(min=1)],
        ),
    }

    ATTRIBUTES = (STDOUT, STDERR, STATUS_CODE, OUTPUTS) = (
        "deploy_stdout",
        "deploy_stderr",
        "deploy_status_code",
        "outputs",
    )

    attributes_schema = {
        STDOUT: attributes.Schema(
            _("Captured stdout from the configuration execution."),
            type=attributes.Schema.STRING,
        ),
        STDERR: attributes.Schema(
            _("Captured stderr from the configuration execution."),
            type=attributes.Schema.STRING,
        ),
        STATUS_CODE: attributes.Schema(
            _("Returned status code from the configuration execution."),
            type=attributes.Schema.INTEGER,
        ),
        OUTPUTS: attributes.Schema(
            _("Every output the server sent, by name."),
            type=attributes.Schema.MAP,
        ),
    }

    signal_needs_metadata_updates = False

    # -- helpers ------------------------------------------------------------
    @property
    def sw(self) -> Swflows:
        return instance()

    @property
    def lifecycle(self) -> embedding.Lifecycle:
        return embedding.Lifecycle(self.sw, completions())

    def _checked(self, check: Any, deployment_id: str | None) -> bool:
        try:
            done = bool(check(deployment_id, wait=CHECK_WAIT))
        except embedding.DeploymentFailed as exc:
            self._push_metadata()
            raise exception.Error(str(exc)) from None
        if done or self._heat_booted_transport():
            # Heat's agents poll the server resource's metadata: it follows
            # the enrollment (made by the flow) while the deployment waits
            self._push_metadata()
        return done

    def _push_metadata(self) -> None:
        push_server_metadata(self.sw, self.stack, self.properties[self.SERVER])

    def _heat_booted_transport(self) -> str | None:
        return heat_booted_transport(self.stack, self.properties[self.SERVER])

    def _config(self, config_id: str) -> str:
        return copied_config(self.sw, self, config_id)

    def _exists(self) -> bool:
        if self.resource_id is None:
            return False
        try:
            self.sw.show(self.resource_id)
        except exceptions.DeploymentNotFound:
            return False
        return True

    # -- lifecycle ------------------------------------------------------------
    def validate(self) -> None:
        """Heat's checks, then what no agent could do: signal heat-api."""
        super().validate()
        refuse_heat_signal(self.properties[self.SIGNAL_TRANSPORT])

    def handle_create(self) -> str | None:
        # the id is stored before the flow starts: a signal finds this
        # resource however soon it comes, and a create started again (its
        # engine died) finds the deployment instead of making another
        deployment_id = self.resource_id or str(uuid.uuid4())
        self.resource_id_set(deployment_id)
        sw = self.sw
        server_id = self.properties[self.SERVER]
        server = self.stack.resource_by_refid(server_id)
        if server is not None:
            # its enrollment goes with it (see _release_server)
            self.data_set(SERVER_RESOURCE, server.name)
        heat_booted = self._heat_booted_transport()
        started = self.lifecycle.handle_create(
            server_id,
            self._config(self.properties[self.CONFIG]),
            input_values=self.properties[self.INPUT_VALUES],
            actions=self.properties[self.DEPLOY_ACTIONS],
            signal_transport=self.properties[self.SIGNAL_TRANSPORT]
            or cfg.CONF[GROUP].signal_transport,
            config_transport=self.properties[self.CONFIG_TRANSPORT]
            or heat_booted
            or default_config_transport(
                sw, metadata.server_agent(sw.services, server_id)
            ),
            timeout=self.properties[self.TIMEOUT],
            name=self.properties[self.NAME] or self.physical_resource_name(),
            deployment_id=deployment_id,
        )
        if heat_booted:
            # Heat's agents read what is pushed: the deployment, once its
            # flow has put it in the server's metadata (not a check later)
            self.lifecycle.settle(started, SETTLE_TIMEOUT)
        self._push_metadata()
        return started

    def check_create_complete(self, deployment_id: str | None) -> bool:
        return self._checked(self.lifecycle.check_create_complete, deployment_id)

    def needs_replace_failed(self) -> bool:
        """A deployment swflows still holds, running or COMPLETE, is
        adopted, never replaced: its flows went on (or are taken over)
        whatever happened to the engine that started them, and replacing it
        would run the config a second time.  A FAILED one is replaced, as
        Heat replaces its own."""
        if self.resource_id is None:
            return True
        try:
            current = self.sw.show(self.resource_id)
        except exceptions.DeploymentNotFound:
            return True
        return current.status == states.FAILED and not action_flows(
            self.sw, self.resource_id
        )

    def handle_update(
        self, json_snippet: Any, tmpl_diff: Any, prop_diff: dict[str, Any]
    ) -> Any:
        """Redeploy with the changed properties, once the action in flight
        (an adopted create whose engine died) has ended."""
        if self.resource_id is not None and action_flows(self.sw, self.resource_id):
            return _Pending(str(self.resource_id), dict(prop_diff))
        return self._start_update(prop_diff)

    def _start_update(self, prop_diff: dict[str, Any]) -> str | None:
        if not prop_diff:
            return None
        started = self.lifecycle.handle_update(
            self.resource_id,
            input_values=prop_diff.get(self.INPUT_VALUES),
            config_id=self._config(prop_diff[self.CONFIG])
            if prop_diff.get(self.CONFIG)
            else None,
        )
        if started is not None and started != self.resource_id:
            self.resource_id_set(started)  # a replace_on_change input changed
        if self._heat_booted_transport():
            self.lifecycle.settle(started, SETTLE_TIMEOUT)
        self._push_metadata()
        return started

    def check_update_complete(self, cookie: Any) -> bool:
        if isinstance(cookie, _Pending):
            if cookie.update_started is None:
                if not self._checked(self.lifecycle.check_complete, cookie.waiting):
                    return False
                cookie.update_started = self._start_update(cookie.prop_diff) or ""
            if not cookie.update_started:
                return True
            return self._checked(
                self.lifecycle.check_update_complete, cookie.update_started
            )
        return self._checked(self.lifecycle.check_update_complete, cookie)

    def handle_suspend(self) -> str | None:
        return self.lifecycle.handle_suspend(self.resource_id)

    def check_suspend_complete(self, deployment_id: str | None) -> bool:
        return self._checked(self.lifecycle.check_suspend_complete, deployment_id)

    def handle_resume(self) -> str | None:
        return self.lifecycle.handle_resume(self.resource_id)

    def check_resume_complete(self, deployment_id: str | None) -> bool:
        return self._checked(self.lifecycle.check_resume_complete, deployment_id)

    def handle_delete(self) -> str | None:
        if self.resource_id is None:
            return None
        self.lifecycle.handle_delete(self.resource_id)
        return str(self.resource_id)

    def check_delete_complete(self, deployment_id: str | None) -> bool:
        done = self.lifecycle.check_delete_complete(deployment_id, wait=CHECK_WAIT)
        if done and deployment_id is not None:
            try:
                self._push_metadata()
            except exception.ResourceNotAvailable:
                pass  # the server goes in this stack delete too
            except exception.Error as exc:
                # the deployment is gone; the server's next publish or its
                # own delete settles its metadata
                LOG.warning("%s: %s", self.name, exc)
            self._release_server()
            release_copied_configs(self.sw, self)
        return done

    def _release_server(self) -> None:
        """A server of this stack goes with the stack: once its last
        deployment is gone, its enrollment goes too (its row, and the
        metadata object or queue it polled), as Heat removes its own."""
        server_id = self.properties[self.SERVER]
        name = self.data().get(SERVER_RESOURCE)
        if not name:
            return  # a server outside the stack stays enrolled
        kept = self.stack.t.resource_definitions(self.stack)
        if self.stack.action != self.stack.DELETE and name in kept:
            return  # the stack keeps its server
        release_server(self.sw, server_id)

    # -- signals and attributes ---------------------------------------------
    def handle_signal(self, details: Any = None) -> None:
        """A signal Heat received for this resource, passed on as it is."""
        if self.resource_id is None:
            return
        self.sw.signal(self.resource_id, details or {})

    def _outputs(self) -> dict[str, Any]:
        if self.resource_id is None:
            return {}
        try:
            return self.sw.outputs(self.resource_id)
        except exceptions.DeploymentNotFound:
            return {}

    def _resolve_attribute(self, name: str) -> Any:
        outputs = self._outputs()
        if name == self.OUTPUTS:
            return outputs
        value = outputs.get(name)
        if name == self.STATUS_CODE and value is not None:
            return int(value)
        return value

    def get_attribute(self, key: str, *path: Any) -> Any:
        """Every output of the config by its name, as SoftwareDeployment
        reads them (``[deploy, result]``); ``[deploy, outputs, result]`` too."""
        if key in self.ATTRIBUTES:
            return super().get_attribute(key, *path)
        outputs = self._outputs()
        if key in outputs:
            return attributes.select_from_attribute(outputs[key], path)
        config = self.sw.get_config(self.properties[self.CONFIG])
        if key not in {o.name for o in config.outputs}:
            raise exception.InvalidTemplateAttribute(resource=self.name, key=key)
        return None


def refuse_heat_signal(transport: str | None) -> None:
    """A resource's ``signal_transport`` (None: ``[swflows]
    signal_transport``) is refused if it is HEAT_SIGNAL, with its reason."""
    if (transport or cfg.CONF[GROUP].signal_transport) == names.HEAT_SIGNAL:
        raise exception.StackValidationFailed(message=HEAT_SIGNAL_REFUSED)


def release_server(sw: Swflows, server_id: str) -> None:
    """Unenroll a server of a stack that deletes it, unless a deployment of
    the stack is still on it (the last one to go unenrolls it)."""
    try:
        if sw.unenroll_server(server_id):
            LOG.info("Unenrolled server %s, deleted with its stack", server_id)
    except exceptions.ServerInUse:
        pass


def heat_booted_transport(stack: Any, server_id: str) -> str | None:
    """POLL_SERVER_HEAT when the server is an ``OS::Nova::Server`` of
    ``stack`` that Heat boots for its own agents (``user_data_format:
    SOFTWARE_CONFIG``) reading the server resource's metadata, through
    heat-api (``software_config_transport: POLL_SERVER_HEAT``) or the
    TempURL Heat made for it (``POLL_TEMP_URL``): the metadata is Heat's to
    serve, swflows' items are put into it; else None."""
    server = stack.resource_by_refid(server_id)
    booted = getattr(server, "user_data_software_config", None)
    if server is None or not callable(booted) or not booted():
        return None
    transport = server.properties.get("software_config_transport")
    if transport in HEAT_SERVED:
        return names.POLL_SERVER_HEAT
    return None


def push_server_metadata(sw: Swflows, stack: Any, server_id: str) -> None:
    """Serve POLL_SERVER_HEAT: a server resource of ``stack`` gets swflows'
    list in the ``deployments`` key of its metadata, as Heat does for its
    own deployments (and in the object Heat made for it, on POLL_TEMP_URL),
    written only when the list is not the one Heat serves already."""
    server = stack.resource_by_refid(server_id)
    if server is None:
        return  # not in this stack: swflows serves its metadata itself
    if (
        heat_booted_transport(stack, server_id)
        and metadata.server_agent(sw.services, server_id) != bootdata.HEAT_AGENTS
    ):
        return  # not enrolled yet: never show Heat's agents another form
    items = sw.server_metadata(server_id)
    served = server.metadata_get(refresh=True) or {}
    if served.get("deployments") == jsonutils.loads(jsonutils.dumps(items)):
        # Heat serves these already: a deployment's every completion check
        # (about once a second while it waits) wrote the same list and PUT
        # the same object again
        return

    def merge(new: dict[str, Any], current: dict[str, Any] | None) -> dict[str, Any]:
        return {**(current or {}), **new}

    server.metadata_set({"deployments": items}, merge_metadata=merge)
    write_metadata_object(server, server_id)


def copied_config(sw: Swflows, rsrc: resource.Resource, config_id: str) -> str:
    """The swflows config ``config_id`` names: swflows' own, or a copy of
    Heat's software config of that id (``OS::Heat::SoftwareConfig``,
    ``StructuredConfig``, a component config), made under the same id.
    Both sides are immutable, so the copy never goes stale, and making it
    again (a create started anew) finds it; the resource records it."""
    try:
        sw.get_config(config_id)
        return config_id
    except exceptions.ConfigNotFound:
        pass
    heat_config = None
    with rsrc.rpc_client().ignore_error_by_name("NotFound"):
        heat_config = rsrc.rpc_client().show_software_config(rsrc.context, config_id)
    if heat_config is None:
        raise exception.Error(
            f"config {config_id} is neither a swflows config nor a Heat software config"
        )
    try:
        made = sw.create_config(
            heat_config.get("name") or config_id,
            heat_config.get("config"),
            group=heat_config.get("group"),
            inputs=heat_config.get("inputs") or [],
            outputs=heat_config.get("outputs") or [],
            options=heat_config.get("options") or {},
            config_id=config_id,
        )
    except exceptions.ValidationError as exc:
        raise exception.Error(f"Heat software config {config_id}: {exc}") from None
    copies = _copied_configs(rsrc)
    if made.id not in copies:
        rsrc.data_set(IMPORTED_CONFIG, " ".join([*copies, str(made.id)]))
    return str(made.id)


def _copied_configs(rsrc: resource.Resource) -> list[str]:
    return str(rsrc.data().get(IMPORTED_CONFIG) or "").split()


def release_copied_configs(sw: Swflows, rsrc: resource.Resource) -> None:
    """The copies of Heat software configs go once no deployment uses them
    (Heat's own configs stay: the stack owns them)."""
    for config_id in _copied_configs(rsrc):
        try:
            sw.delete_config(config_id)
        except (exceptions.ConfigInUse, exceptions.ConfigNotFound):
            pass  # another deployment still uses it, or it went already


def write_metadata_object(server: Any, server_id: str) -> None:
    """POLL_TEMP_URL: Heat's agents read the object Heat made for the
    server, written whole, as Heat writes it for its own deployments."""
    put_url = server.data().get("metadata_put_url")
    if not put_url:
        return
    body = jsonutils.dumps(server.metadata_get(refresh=True))
    try:
        answer = requests.put(put_url, data=body, timeout=PUT_TIMEOUT)
    except requests.RequestException as exc:
        raise exception.Error(
            f"server {server_id}: metadata not written: {type(exc).__name__}"
        ) from None
    if answer.status_code >= 300:
        raise exception.Error(
            f"server {server_id}: metadata not written: HTTP {answer.status_code}"
        )


def resource_mapping() -> dict[str, type[resource.Resource]]:
    return {TYPE: SwflowsDeployment}


__all__ = [
    "TYPE",
    "SwflowsDeployment",
    "build",
    "catalog_services",
    "default_config_transport",
    "instance",
    "opts",
    "resource_mapping",
    "service_auth",
]
