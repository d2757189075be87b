"""The facade's server operations: show, boot through Nova, delete.

:class:`Servers` is the facade's part; enrolling itself is
:mod:`swflows.enrollment`.  A server booted through Nova gets its
channel *before* it exists: Nova chooses the server's id only when it
boots, and the boot data must already say where to poll.  So the channel
is named after a key chosen first (kept in the channel and in the server's
Nova metadata), then recorded under Nova's id once Nova answers, as Heat
names a server's queue or TempURL object after its resource, not its id.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from swflows import (
    bootdata,
    enrollment,
    exceptions,
    metadata,
    model,
    projects,
    states,
    trusts,
)
from swflows import transport_names as names
from swflows.api.deployments import Deployments
from swflows.persistence import tables

if TYPE_CHECKING:
    from oslo_context.context import RequestContext

    from swflows.clients.compute import Compute

LOG = logging.getLogger(__name__)

#: channel entries that are secret or said elsewhere: never shown
_HIDDEN = (enrollment.COLLECT, "user", metadata.AGENT)


def check_server_id(server_id: Any) -> str:
    if (
        not isinstance(server_id, str)
        or not server_id.strip()
        or len(server_id) > tables.NAME_LENGTH
    ):
        raise exceptions.ValidationError(
            "server_id", f"must be 1 to {tables.NAME_LENGTH} characters"
        )
    return str(model.check_name("server_id", server_id))


def enroll(
    sw: Deployments,
    server_id: str,
    requested: str | None,
    agent: str | None = None,
    context: RequestContext | None = None,
) -> dict[str, Any]:
    """Enroll on ``requested``, else the server's transport, else the one
    its Nova metadata names (a boot whose enrollment did not finish: its
    channel is adopted), else the configuration's; for ``agent`` (None:
    the one recorded, else swflows' agent).  Nova is asked as ``context``'s
    caller too when swflows' own listing does not show the server
    (:func:`swflows.enrollment.nova_view`)."""
    check_server_id(server_id)
    if agent is not None:
        bootdata.check_agent(agent)
    services = sw.services
    record = metadata.find_server(services, server_id)
    view = enrollment.nova_view(
        services, server_id, context, recorded=enrollment.recorded_project(record)
    )
    name = names.normalize_config_transport(
        requested
        or (record.config_transport if record else None)
        or (view.transport if record is None else None)
        or sw.conf.default_software_config_transport
    )
    enrollment.enroll(
        services,
        server_id,
        name,
        sw._config_options(name),
        key=view.key if record is None else None,
        nova=view.in_compute,
        compute_project=view.project,
        agent=agent,
    )
    return describe(sw, server_id)


def use_agent(sw: Deployments, server_id: str, agent: str | None) -> str:
    """The agent the server runs: ``agent`` (recorded, and the document
    published again in its form, when it changes), else the recorded one.
    Refused (nothing recorded) when that agent cannot read the server's
    channel."""
    record = sw.store.get_server(server_id)
    current = metadata.agent_of(record)
    chosen = bootdata.check_agent(agent) if agent is not None else current
    bootdata.collector_of(collect_section(sw, server_id), chosen)
    if chosen == current:
        return current
    channel = {**(record.channel or {}), metadata.AGENT: chosen}
    sw.store.set_server_channel(server_id, record.config_transport, channel)
    name = str(record.config_transport)
    metadata.publish_server(sw.services, server_id, name, sw._config_options(name))
    return chosen


def describe(sw: Deployments, server_id: str, console_lines: int = 0) -> dict[str, Any]:
    """The server's enrollment, channel and deployments, without a secret;
    with ``console_lines``, the end of a Nova server's console log."""
    record = sw.store.get_server(server_id)
    channel = dict(record.channel or {})
    shown = {k: v for k, v in channel.items() if k not in _HIDDEN}
    if channel.get("user"):
        shown["user_id"] = channel["user"]["user_id"]
        shown["project_id"] = channel["user"]["project_id"]
    collect = channel.get(enrollment.COLLECT) or {}
    enrolled = record.enrolled_time
    return {
        "server_id": record.server_id,
        "config_transport": record.config_transport,
        "agent": metadata.agent_of(record),
        "enrolled": enrolled is not None,
        "enrolled_at": model.isotime(enrolled),
        "last_seen": model.isotime(record.last_seen),
        "in_compute": record.in_compute,
        # whose Nova listing shows it (None: swflows' own)
        "compute_project": record.compute_project,
        "channel": shown,
        "collectors": list(collect.get("collectors") or ()),
        "metadata_version": record.metadata_version,
        "published_version": record.published_version,
        "deployments": [d.id for d in sw.store.list_deployments(server_id=server_id)],
        **(
            {"console": console(sw, server_id, console_lines)}
            if console_lines and record.in_compute
            else {}
        ),
    }


def console(sw: Deployments, server_id: str, lines: int) -> str | None:
    """The end of the server's console log, where an agent that died says
    why, asked as the login whose listing shows the server (a project's
    through one of its trusts); None for a server Nova does not hold (or
    no compute), and the error itself when Nova cannot give it."""
    if not sw.services.clients.offers("compute"):
        return None
    project = sw.store.get_server(server_id).compute_project
    try:
        compute = enrollment.project_compute(sw.services, project)
        if compute is None:
            return (
                f"(console log unavailable: project {project} has no live "
                "trust to read it through)"
            )
        return compute.console_output(server_id, lines)
    except exceptions.SwflowsError as exc:
        return f"(console log unavailable: {exc})"


def collect_section(sw: Deployments, server_id: str) -> dict[str, Any]:
    """The ``os-collect-config`` section of the server's channel."""
    record = sw.store.get_server(server_id)
    section = (record.channel or {}).get(enrollment.COLLECT)
    if not section:
        raise exceptions.ValidationError(
            "server_id",
            f"server {server_id} has no metadata channel: enroll it first",
        )
    return dict(section)


def undeploy_all(sw: Deployments, server_id: str) -> list[str]:
    """Undeploy every deployment on the server (waiting ones cancelled);
    the ids removed.  Triggered actions go before what they were run on."""
    found = sw.store.list_deployments(server_id=server_id)
    found.sort(key=lambda d: d.parent_id is None)
    removed = []
    for dep in found:
        try:
            if dep.status == states.IN_PROGRESS:
                try:
                    sw.cancel(dep.id, "server removal")
                except exceptions.InvalidTransition:
                    pass  # it ended meanwhile
            sw.wait(dep.id)
            sw.undeploy(dep.id)
        except exceptions.DeploymentNotFound:
            continue
        removed.append(dep.id)
    return removed


def caller_compute(
    sw: Deployments, context: RequestContext | None
) -> tuple[Compute, str | None]:
    """The Nova client a request acts with, and whose listing it reads:
    the caller's (its token, its project) when trusts are on and the
    context carries a token, else swflows' own (None)."""
    services = sw.services
    if (
        context is not None
        and services.clients.trustee is not None
        and trusts.carries_token(context)
    ):
        project = str(context.project_id)
        caller = services.clients.for_caller(str(context.auth_token), project)
        return caller.compute, project
    return services.clients.compute, None


def server_compute(
    sw: Deployments, server_id: str, context: RequestContext | None
) -> Compute:
    """The Nova client that can act on ``server_id``: swflows' own for a
    server its own listing showed; for a project's server, its caller's
    (a request of that project with its token) or else one through a live
    trust of that project.  NotSupported when there is none."""
    record = metadata.find_server(sw.services, server_id)
    project = enrollment.recorded_project(record)
    if project is None:
        return sw.services.clients.compute
    compute, caller = caller_compute(sw, context)
    if caller == project:
        return compute
    found = enrollment.project_compute(sw.services, project)
    if found is None:
        raise exceptions.NotSupported(
            f"server {server_id} is project {project}'s in Nova: acting on it "
            "needs a token of that project, or a live trust of it"
        )
    return found


def create(
    sw: Deployments,
    name: str,
    image: str,
    flavor: str,
    config_transport: str | None,
    agent: str,
    context: RequestContext | None = None,
) -> dict[str, Any]:
    """Boot ``name`` with boot data for ``agent``; enroll it under Nova's id.

    Booted as the caller, in its project, when trusts are on and
    ``context`` carries its token (see :func:`caller_compute`), else with
    swflows' own login.  Anything Nova refuses leaves nothing behind: the
    channel made for the boot is removed.
    """
    bootdata.check_agent(agent)
    for field, value in (("name", name), ("image", image), ("flavor", flavor)):
        if not isinstance(value, str) or not value.strip():
            raise exceptions.ValidationError(field, "must not be empty")
        model.check_name(field, value)
    transport = names.normalize_config_transport(
        config_transport or sw.conf.default_software_config_transport
    )
    services = sw.services
    compute, project = caller_compute(sw, context)
    options = sw._config_options(transport)
    key = model.new_id()
    channel = enrollment.make_channel(services, transport, options, key, key)
    channel[metadata.AGENT] = agent
    try:
        user_data = bootdata.user_data(channel[enrollment.COLLECT], agent)
        server = compute.create_server(
            name,
            image,
            flavor,
            user_data=user_data,
            metadata={
                enrollment.NOVA_CHANNEL_KEY: key,
                enrollment.NOVA_TRANSPORT_KEY: transport,
            },
        )
    except BaseException:
        try:
            enrollment.remove_channel(services, transport, channel)
        except Exception:
            # the boot's own error is what the caller must see
            LOG.warning(
                "could not remove the channel %s made for a boot that did not happen",
                key,
                exc_info=True,
            )
        raise
    try:
        # the listing of the login that booted it shows it
        services.store.set_server_channel(
            server.id,
            transport,
            channel,
            enrolled=True,
            in_compute=True,
            compute_project=project,
        )
        metadata.publish_server(services, server.id, transport, options)
    except BaseException:
        LOG.error(
            "server %s booted but its enrollment did not finish: "
            "`swflows server enroll %s` finishes it",
            server.id,
            server.id,
        )
        raise
    return {"name": name, **describe(sw, server.id)}


def delete(
    sw: Deployments, server_id: str, context: RequestContext | None = None
) -> None:
    """Undeploy, unenroll, then delete the server in Nova (the channel of
    a boot whose enrollment did not finish included), through the Nova
    client that can act on it (:func:`server_compute`)."""
    # NotSupported before anything is done
    compute = server_compute(sw, server_id, context)
    known = metadata.find_server(sw.services, server_id) is not None
    if not known and enrollment.nova_view(sw.services, server_id).key:
        # booted by swflows, its enrollment unfinished: the channel its
        # Nova metadata names is adopted, to be removed with the server
        enroll(sw, server_id, None)
        known = True
    if known:
        undeploy_all(sw, server_id)
        enrollment.unenroll(sw.services, server_id)
    deleted = compute.delete_server(server_id)
    if not deleted and not known:
        raise exceptions.ServerNotFound(server_id)


class Servers(Deployments):
    """Enrolling servers, their boot data, and booting them through Nova."""

    def enroll_server(
        self,
        server_id: str,
        config_transport: str | None = None,
        agent: str | None = None,
        *,
        deploy_policy: Mapping[str, Any] | None = None,
        context: RequestContext | None = None,
    ) -> dict[str, Any]:
        """Give a server its metadata channel and publish its document.

        Idempotent; another ``config_transport`` moves the server: the new
        channel is published and the old one removed.  ``agent`` ("swflows"
        or "heat") records the agent the server runs, which decides the
        form of its document and the signal transports it can use (None:
        the one recorded, else swflows' agent).  With ``context`` the
        server becomes its project's (a server already another project's
        is not found); ``deploy_policy`` sets who may deploy to it
        (:meth:`set_deploy_policy`).  Returns :meth:`show_server`.
        """
        check_server_id(server_id)
        if context is not None:
            self._allow(context, "swflows:server:enroll")
            if self.store.get_owner(projects.SERVER, server_id) is not None:
                self._visible(
                    context, projects.SERVER, server_id, "swflows:server:enroll"
                )
        policy = (
            projects.DeployPolicy.from_dict(deploy_policy)
            if deploy_policy is not None
            else None
        )
        self._own(context, projects.SERVER, server_id)
        enroll(self, server_id, config_transport, agent, context)
        if policy is not None:
            self.set_deploy_policy(server_id, policy.to_dict(), context=context)
        return describe(self, server_id)

    def set_deploy_policy(
        self,
        server_id: str,
        policy: Mapping[str, Any],
        *,
        context: RequestContext | None = None,
    ) -> dict[str, Any]:
        """Set who may deploy to the server: ``{"mode": "project"}`` (its
        own project, the default), ``{"mode": "projects", "projects": [...]}``
        (its own and those), or ``{"mode": "any"}``; ``config_ids`` limits
        which source configs may be deployed.  The change is recorded (who,
        when); returns :meth:`deploy_policy`."""
        parsed = projects.DeployPolicy.from_dict(policy)
        self.store.get_server(server_id)
        self._visible(context, projects.SERVER, server_id, "swflows:server:set_policy")
        if context is not None:
            owner = projects.owner_of(context)
            who = f"{owner.user_id or '-'}@{owner.project_id}"
        else:
            owner = projects.Owner(self._default_project())
            who = "-"
        current = self.store.get_owner(projects.SERVER, server_id)
        self.store.set_deploy_policy(server_id, parsed, current or owner, who)
        return self.deploy_policy(server_id, context=context)

    def deploy_policy(
        self, server_id: str, *, context: RequestContext | None = None
    ) -> dict[str, Any]:
        """The server's owner project, deployment policy and its last
        change (``changed_by`` as ``user@project``, ``changed_at``)."""
        self.store.get_server(server_id)
        self._visible(context, projects.SERVER, server_id, "swflows:server:show")
        found = self.store.get_deploy_policy(server_id)
        changed = found["changed_at"]
        return {
            "server_id": server_id,
            "project_id": self._project_of(projects.SERVER, server_id),
            **found,
            "changed_at": model.isotime(changed),
        }

    def unenroll_server(
        self,
        server_id: str,
        *,
        force: bool = False,
        context: RequestContext | None = None,
    ) -> bool:
        """Remove everything enrolling made; False if the server was unknown.

        Refused (ServerInUse) while deployments are on the server, unless
        ``force``: then each is undeployed first (a waiting one cancelled).
        """
        if context is not None and metadata.find_server(self.services, server_id):
            self._visible(
                context, projects.SERVER, server_id, "swflows:server:unenroll"
            )
        if force:
            undeploy_all(self, server_id)
        removed = enrollment.unenroll(self.services, server_id)
        if removed:
            self.store.forget_owner(projects.SERVER, server_id)
        return removed

    def show_server(
        self,
        server_id: str,
        *,
        console_lines: int = 0,
        context: RequestContext | None = None,
    ) -> dict[str, Any]:
        """A server's enrollment, channel (no secret) and deployments; with
        ``console_lines``, also the end of its console log from Nova
        (``console``: where an agent that died at boot says why)."""
        self.store.get_server(server_id)
        self._visible(context, projects.SERVER, server_id, "swflows:server:show")
        return describe(self, server_id, console_lines)

    def list_servers(
        self, *, context: RequestContext | None = None, all_projects: bool = False
    ) -> list[dict[str, Any]]:
        """Every server the store holds (with ``context``, its project's
        unless ``all_projects``): id, config transport, agent, enrolled,
        its number of deployments, and when it was last seen (it read its
        metadata through swflows, or signalled; None: not seen yet)."""
        self._allow(context, "swflows:server:list")
        found = self.store.list_servers(**self._listing(context, all_projects))
        counts = self.store.deployment_counts()
        return [
            {
                "server_id": record.server_id,
                "config_transport": record.config_transport,
                "agent": metadata.agent_of(record),
                "enrolled": record.enrolled_time is not None,
                "deployments": counts.get(record.server_id, 0),
                "last_seen": model.isotime(record.last_seen),
            }
            for record in found
        ]

    def boot_data(self, server_id: str, agent: str | None = None) -> str:
        """cloud-init user_data starting ``agent`` ("swflows" or "heat";
        None: the one the server was enrolled for).  Another agent than the
        recorded one is recorded (see :meth:`enroll_server`)."""
        section = collect_section(self, server_id)
        return bootdata.user_data(section, use_agent(self, server_id, agent))

    def agent_config(self, server_id: str, agent: str | None = None) -> str:
        """The agent's configuration file, for a server that already runs
        (``agent`` as for :meth:`boot_data`)."""
        section = collect_section(self, server_id)
        return bootdata.agent_config(section, use_agent(self, server_id, agent))

    def create_server(
        self,
        name: str,
        image: str,
        flavor: str,
        *,
        config_transport: str | None = None,
        agent: str = bootdata.SWFLOWS_AGENT,
        context: RequestContext | None = None,
    ) -> dict[str, Any]:
        """Boot a server through Nova with boot data for ``agent``, and
        enroll it (recording ``agent``, see :meth:`enroll_server`).  With
        ``context`` the server is its project's, and with trusts on and
        the caller's token it is booted as the caller, in its project."""
        if context is not None:
            self._allow(context, "swflows:server:create")
        made = create(self, name, image, flavor, config_transport, agent, context)
        self._own(context, projects.SERVER, str(made["server_id"]))
        return made

    def delete_server(
        self, server_id: str, *, context: RequestContext | None = None
    ) -> None:
        """Undeploy what is on the server, unenroll it, and delete it in
        Nova: a project's server (``compute_project``) as its caller, or
        through a live trust of its project."""
        if context is not None and metadata.find_server(self.services, server_id):
            self._visible(context, projects.SERVER, server_id, "swflows:server:delete")
        delete(self, server_id, context)
        self.store.forget_owner(projects.SERVER, server_id)
