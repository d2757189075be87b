"""A Heat resource plugin built on swflows' embedder contract (an example).

``OS::Swflows::Deployment`` deploys a swflows config to a server, with
Heat's lifecycle mapped onto swflows' flows by
:class:`swflows.embedding.Lifecycle`; swflows keeps the deployment, its
signal store and its stack user, and survives a restart of heat-engine.

To use it, copy this file into a directory of Heat's ``plugin_dirs``,
install swflows beside Heat, and add to ``heat.conf``::

    [swflows]
    database_url = postgresql+psycopg2://heat:...@db/swflows
    secret_key = <a Fernet key, the same on every heat-engine>

swflows acts with Heat's service identity (the ``[trustee]`` section) and
creates stack users as Heat's stack domain admin.  It keeps its tables in a
database of its own; every swflows table is prefixed (its version table
too), so Heat's own database could hold them beside Heat's.

Servers read their metadata from Heat (``POLL_SERVER_HEAT``): after each
step the plugin copies swflows' list for the server into the ``deployments``
key of the server resource's metadata, when that server is in the same
stack.  Signals Heat receives for this resource (``openstack stack resource
signal``, or a POST to its CloudFormation-compatible API) are passed to
swflows as they are.  Heat's own agents find this resource's signal URL
only from ``deploy_stack_id`` and ``deploy_resource_name``, which swflows'
``deploy()`` does not set, so the default signal transport here is
``TEMP_URL_SIGNAL``, which swflows polls.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

from heat.common import exception
from heat.common.i18n import _
from heat.engine import attributes, constraints, properties, resource, support
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3
from oslo_config import cfg

from swflows import Swflows, embedding

swflows_opts = [
    cfg.StrOpt(
        "database_url",
        secret=True,
        help="SQLAlchemy URL of swflows' own database.",
    ),
    cfg.StrOpt(
        "secret_key",
        secret=True,
        help="Fernet key encrypting swflows' secrets at rest.",
    ),
    cfg.StrOpt(
        "signal_transport",
        default="TEMP_URL_SIGNAL",
        help="Signal transport of deployments that name none.",
    ),
]
cfg.CONF.register_opts(swflows_opts, group="swflows")

_lock = threading.Lock()
_instance: list[Swflows] = []


def swflows_instance() -> Swflows:
    """One swflows per heat-engine process, on Heat's service identity."""
    with _lock:
        if not _instance:
            conf = cfg.CONF
            auth = ks_loading.load_auth_from_conf_options(conf, "trustee")
            session = ks_session.Session(auth=auth)
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
            _instance.append(
                embedding.from_session(
                    session,
                    conf.swflows.database_url,
                    secret_key=conf.swflows.secret_key,
                    stack_domain_session=domain_admin,
                    stack_user_domain_id=domain,
                    stack_user_role=conf.heat_stack_user_role,
                )
            )
        return _instance[0]


class SwflowsDeployment(resource.Resource):
    """Deploys a swflows config to a server and waits for its signal."""

    support_status = support.SupportStatus(version="2026.1")

    PROPERTIES = (
        CONFIG,
        SERVER,
        INPUT_VALUES,
        ACTIONS,
        SIGNAL_TRANSPORT,
        TIMEOUT,
    ) = (
        "config",
        "server",
        "input_values",
        "actions",
        "signal_transport",
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
        ACTIONS: properties.Schema(
            properties.Schema.LIST,
            _("Actions that run the config (a component config lists its own)."),
            default=["CREATE", "UPDATE"],
        ),
        SIGNAL_TRANSPORT: properties.Schema(
            properties.Schema.STRING,
            _("How the server signals back."),
            constraints=[
                constraints.AllowedValues(
                    [
                        "TEMP_URL_SIGNAL",
                        "ZAQAR_SIGNAL",
                        "HEAT_SIGNAL",
                        "NO_SIGNAL",
                        "AUTO",
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
            _("What the config wrote on standard output."),
            type=attributes.Schema.STRING,
        ),
        STDERR: attributes.Schema(
            _("What the config wrote on standard error."),
            type=attributes.Schema.STRING,
        ),
        STATUS_CODE: attributes.Schema(
            _("The config's exit status."),
            type=attributes.Schema.STRING,
        ),
        OUTPUTS: attributes.Schema(
            _("Every output the server sent."),
            type=attributes.Schema.MAP,
        ),
    }

    signal_needs_metadata_updates = False

    # -- helpers ------------------------------------------------------------
    @property
    def lifecycle(self) -> embedding.Lifecycle:
        return embedding.Lifecycle(swflows_instance())

    def _checked(self, check: Any, deployment_id: str | None) -> bool:
        try:
            done = bool(check(deployment_id))
        except embedding.DeploymentFailed as exc:
            self._push_metadata()
            raise exception.Error(str(exc)) from None
        if done:
            self._push_metadata()
        return done

    def _push_metadata(self) -> None:
        """Serve POLL_SERVER_HEAT: the server resource's ``deployments``."""
        server = self.stack.resource_by_refid(self.properties[self.SERVER])
        if server is None:
            return  # not in this stack: the operator serves its metadata
        items = swflows_instance().server_metadata(self.properties[self.SERVER])

        def merge(
            new: dict[str, Any], current: dict[str, Any] | None
        ) -> dict[str, Any]:
            return {**(current or {}), **new}

        server.metadata_set({"deployments": items}, merge_metadata=merge)

    # -- lifecycle ------------------------------------------------------------
    def handle_create(self) -> str | None:
        # the id is known before the flow starts, so a signal finds this
        # resource however soon it comes, and a retried create is idempotent
        deployment_id = self.resource_id or str(uuid.uuid4())
        self.resource_id_set(deployment_id)
        started = self.lifecycle.handle_create(
            self.properties[self.SERVER],
            self.properties[self.CONFIG],
            input_values=self.properties[self.INPUT_VALUES],
            actions=self.properties[self.ACTIONS],
            signal_transport=self.properties[self.SIGNAL_TRANSPORT]
            or cfg.CONF.swflows.signal_transport,
            config_transport="POLL_SERVER_HEAT",
            timeout=self.properties[self.TIMEOUT],
            name=self.physical_resource_name(),
            deployment_id=deployment_id,
        )
        self._push_metadata()
        return started

    def check_create_complete(self, deployment_id: str | None) -> bool:
        return self._checked(self.lifecycle.check_create_complete, deployment_id)

    def handle_update(
        self, json_snippet: Any, tmpl_diff: Any, prop_diff: dict[str, Any]
    ) -> str | None:
        if not prop_diff:
            return None
        started = self.lifecycle.handle_update(
            self.resource_id,
            input_values=prop_diff.get(self.INPUT_VALUES),
            config_id=prop_diff.get(self.CONFIG),
        )
        if started is not None and started != self.resource_id:
            self.resource_id_set(started)  # a replace_on_change input changed
        self._push_metadata()
        return started

    def check_update_complete(self, deployment_id: str | None) -> bool:
        return self._checked(self.lifecycle.check_update_complete, deployment_id)

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
        done = self.lifecycle.check_delete_complete(deployment_id)
        if done and deployment_id is not None:
            try:
                self._push_metadata()
            except exception.ResourceNotAvailable:
                pass  # the server goes in this stack delete too
        return done

    # -- signals and attributes ---------------------------------------------
    def handle_signal(self, details: Any = None) -> None:
        """A signal Heat received for this resource, passed on as it is."""
        if self.resource_id is None:
            return
        swflows_instance().signal(self.resource_id, details or {})

    def _resolve_attribute(self, name: str) -> Any:
        if self.resource_id is None:
            return None
        outputs = swflows_instance().outputs(self.resource_id)
        if name == self.OUTPUTS:
            return outputs
        return outputs.get(name)


def resource_mapping() -> dict[str, type[resource.Resource]]:
    return {"OS::Swflows::Deployment": SwflowsDeployment}
