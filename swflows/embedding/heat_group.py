"""``OS::Swflows::DeploymentGroup``: one config to many servers, in Heat.

Shaped as Heat's ``OS::Heat::SoftwareDeploymentGroup`` (properties
``config``, ``servers``, ``input_values``, ``actions``, ``name``,
``signal_transport``; attributes ``deploy_stdouts``, ``deploy_stderrs``,
``deploy_status_codes`` and, by any member attribute's or output's name, a
map from member name to its value), on swflows' deployment groups
(:meth:`swflows.api.Swflows.create_group`): a create deploys every member,
an update redeploys the members whose inputs or config changed and adds or
removes members, a delete undeploys them all.  ``max_concurrency`` and
``max_errors`` are the group's rollout policy (see docs/groups.md).

Servers of the same stack that Heat boots for its own agents are enrolled
for them before the group deploys, and their resource's metadata carries
swflows' items, as with ``OS::Swflows::Deployment``.
"""

from __future__ import annotations

from typing import Any

from heat.common import exception
from heat.common.i18n import _
from heat.engine import attributes, constraints, properties, resource, support
from oslo_config import cfg

from swflows import Swflows, bootdata, exceptions, metadata, states
from swflows import transport_names as names
from swflows.embedding import heat

#: resource type name
TYPE = "OS::Swflows::DeploymentGroup"

#: resource data: the ids of the servers of this stack the group enrolled
ENROLLED = "swflows_enrolled_servers"


class SwflowsDeploymentGroup(resource.Resource):  # type: ignore[misc]  # Heat is untyped
    """Deploys a swflows config to a map of servers and waits for them."""

    support_status = support.SupportStatus(version="27.0.0")

    PROPERTIES = (
        CONFIG,
        SERVERS,
        INPUT_VALUES,
        DEPLOY_ACTIONS,
        NAME,
        SIGNAL_TRANSPORT,
        TIMEOUT,
        MAX_CONCURRENCY,
        MAX_ERRORS,
    ) = (
        "config",
        "servers",
        "input_values",
        "actions",
        "name",
        "signal_transport",
        "timeout",
        "max_concurrency",
        "max_errors",
    )

    properties_schema = {
        CONFIG: properties.Schema(
            properties.Schema.STRING,
            _("Id of the config to deploy: swflows' or a Heat software config."),
            required=True,
            update_allowed=True,
        ),
        SERVERS: properties.Schema(
            properties.Schema.MAP,
            _("Member name -> id of the server to deploy to."),
            required=True,
            update_allowed=True,
        ),
        INPUT_VALUES: properties.Schema(
            properties.Schema.MAP,
            _("Values of the config's inputs, the same for every member."),
            default={},
            update_allowed=True,
        ),
        DEPLOY_ACTIONS: properties.Schema(
            properties.Schema.LIST,
            _("Which lifecycle actions of the group run the config."),
            default=["CREATE", "UPDATE"],
        ),
        NAME: properties.Schema(
            properties.Schema.STRING,
            _("Name of the group (default: the resource's physical name)."),
        ),
        SIGNAL_TRANSPORT: properties.Schema(
            properties.Schema.STRING,
            _("How the servers signal back (default: [swflows] signal_transport)."),
            constraints=[constraints.AllowedValues(heat.SIGNAL_TRANSPORTS)],
        ),
        TIMEOUT: properties.Schema(
            properties.Schema.INTEGER,
            _("Seconds each server has to signal back."),
            constraints=[constraints.Range(min=1)],
        ),
        MAX_CONCURRENCY: properties.Schema(
            properties.Schema.STRING,
            _("Members deploying at once: a number or a percentage (10%)."),
            update_allowed=True,
        ),
        MAX_ERRORS: properties.Schema(
            properties.Schema.STRING,
            _("Failed members before the rest are not started: number or %."),
            update_allowed=True,
        ),
    }

    ATTRIBUTES = (STDOUTS, STDERRS, STATUS_CODES) = (
        "deploy_stdouts",
        "deploy_stderrs",
        "deploy_status_codes",
    )

    attributes_schema = {
        STDOUTS: attributes.Schema(
            _("Each member's captured stdout, by member name."),
            type=attributes.Schema.MAP,
        ),
        STDERRS: attributes.Schema(
            _("Each member's captured stderr, by member name."),
            type=attributes.Schema.MAP,
        ),
        STATUS_CODES: attributes.Schema(
            _("Each member's status code, by member name."),
            type=attributes.Schema.MAP,
        ),
    }

    #: a plural attribute -> the member output it collects
    _COLLECTS = {
        STDOUTS: "deploy_stdout",
        STDERRS: "deploy_stderr",
        STATUS_CODES: "deploy_status_code",
    }

    @property
    def sw(self) -> Swflows:
        return heat.instance()

    def validate(self) -> None:
        super().validate()
        heat.refuse_heat_signal(self.properties[self.SIGNAL_TRANSPORT])

    def _policy(self) -> dict[str, Any]:
        chosen = {
            "max_concurrency": self.properties[self.MAX_CONCURRENCY],
            "max_errors": self.properties[self.MAX_ERRORS],
        }
        return {key: value for key, value in chosen.items() if value is not None}

    def _enroll_heat_booted(self, servers: dict[str, str]) -> None:
        """Servers of this stack booted for Heat's agents read the metadata
        Heat serves: enrolled for them, and remembered, before any deploy."""
        enrolled = set(self._enrolled())
        for server_id in servers.values():
            if heat.heat_booted_transport(self.stack, server_id) is None:
                continue
            if (
                metadata.server_agent(self.sw.services, server_id)
                != (bootdata.HEAT_AGENTS)
                or metadata.find_server(self.sw.services, server_id) is None
            ):
                self.sw.enroll_server(
                    server_id, names.POLL_SERVER_HEAT, agent=bootdata.HEAT_AGENTS
                )
            enrolled.add(server_id)
        self.data_set(ENROLLED, " ".join(sorted(enrolled)))

    def _enrolled(self) -> list[str]:
        return str(self.data().get(ENROLLED) or "").split()

    def _push(self) -> None:
        for server_id in self._enrolled():
            heat.push_server_metadata(self.sw, self.stack, server_id)

    def _settled(self, group_id: str | None) -> bool:
        """True once the group's operation ended COMPLETE; a FAILED one
        fails the resource with the group's reason."""
        if group_id is None:
            return True
        shown = self.sw.show_group(group_id)
        self._push()
        if shown["status"] == states.IN_PROGRESS:
            return False
        if shown["status"] == states.FAILED:
            raise exception.Error(f"{self.name}: {shown['status_reason']}")
        return True

    # -- lifecycle ------------------------------------------------------------
    def handle_create(self) -> str:
        servers = dict(self.properties[self.SERVERS])
        self._enroll_heat_booted(servers)
        config_id = heat.copied_config(self.sw, self, self.properties[self.CONFIG])
        shown = self.sw.create_group(
            self.properties[self.NAME] or self.physical_resource_name(),
            config_id,
            servers,
            input_values=self.properties[self.INPUT_VALUES],
            policy=self._policy(),
            signal_transport=self.properties[self.SIGNAL_TRANSPORT]
            or cfg.CONF[heat.GROUP].signal_transport,
            timeout=self.properties[self.TIMEOUT],
            actions=self.properties[self.DEPLOY_ACTIONS],
            wait=False,
        )
        self.resource_id_set(shown["id"])
        return str(shown["id"])

    def check_create_complete(self, group_id: str | None) -> bool:
        return self._settled(group_id)

    def handle_update(
        self, json_snippet: Any, tmpl_diff: Any, prop_diff: dict[str, Any]
    ) -> str | None:
        if not prop_diff or self.resource_id is None:
            return None
        servers = prop_diff.get(self.SERVERS)
        if servers is not None:
            self._enroll_heat_booted(dict(servers))
        config = prop_diff.get(self.CONFIG)
        self.sw.redeploy_group(
            self.resource_id,
            servers=servers,
            input_values=prop_diff.get(self.INPUT_VALUES),
            config_id=heat.copied_config(self.sw, self, config) if config else None,
            policy=self._policy(),
            wait=False,
        )
        return str(self.resource_id)

    def check_update_complete(self, group_id: str | None) -> bool:
        return self._settled(group_id)

    def handle_delete(self) -> str | None:
        if self.resource_id is None:
            return None
        try:
            self.sw.delete_group(self.resource_id, wait=False)
        except exceptions.GroupNotFound:
            return None
        return str(self.resource_id)

    def check_delete_complete(self, group_id: str | None) -> bool:
        if group_id is not None:
            try:
                shown = self.sw.show_group(group_id)
            except exceptions.GroupNotFound:
                pass
            else:
                if shown["status"] == states.FAILED:
                    raise exception.Error(f"{self.name}: {shown['status_reason']}")
                return False
        heat.release_copied_configs(self.sw, self)
        self._release_servers()
        return True

    def _release_servers(self) -> None:
        """The stack's own servers this group enrolled go with the stack."""
        if self.stack.action != self.stack.DELETE:
            return
        for server_id in self._enrolled():
            heat.release_server(self.sw, server_id)

    # -- attributes -----------------------------------------------------------
    def get_attribute(self, key: str, *path: Any) -> Any:
        """A map from member name to its value: ``deploy_stdouts`` and the
        like, or any member output by its name (``[group, result]``)."""
        if self.resource_id is None:
            return None
        try:
            outputs = self.sw.show_group(self.resource_id)["outputs"]
        except exceptions.GroupNotFound:
            return None
        collected = dict(outputs.get(self._COLLECTS.get(key, key)) or {})
        return attributes.select_from_attribute(collected, path)

    def _resolve_attribute(self, name: str) -> Any:
        return self.get_attribute(name)


def resource_mapping() -> dict[str, type[resource.Resource]]:
    return {TYPE: SwflowsDeploymentGroup}


__all__ = ["TYPE", "SwflowsDeploymentGroup", "resource_mapping"]
