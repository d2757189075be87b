"""Enrolling servers: their metadata channel, made once, and Nova's view of them.

A server is *enrolled* when its channel for its config transport exists,
is recorded (sealed) in the store, and carries the current metadata
document.  Enrolling again is harmless; enrolling with another transport
moves the server (the new channel made, the old one removed, the new one
recorded and published, as Heat does); unenrolling removes all it made,
and so does a failed enrollment.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from swflows import bootdata, exceptions, metadata, trusts
from swflows import transport_names as names
from swflows.clients.identity import StackUser
from swflows.persistence.store import ServerRecord
from swflows.services import Services
from swflows.transports import (
    impl_poll_temp_url,
    impl_zaqar_message,
    server_user,
)

if TYPE_CHECKING:
    from oslo_context.context import RequestContext

    from swflows.clients.compute import Compute

LOG = logging.getLogger(__name__)

#: the channel's entry naming what its resources are named after
KEY = "key"
#: the channel's entry holding what agents are told (os-collect-config)
COLLECT = "os-collect-config"
#: the os-collect-config sections of every transport Heat knows
OCC_SECTIONS = ("heat", "zaqar", "request", "cfn")
#: Nova server metadata naming a booted server's channel, so a server whose
#: enrollment was interrupted can be adopted (``enroll`` finds its channel)
NOVA_CHANNEL_KEY = "swflows_channel"
NOVA_TRANSPORT_KEY = "swflows_config_transport"


def make_channel(
    services: Services,
    name: str,
    options: dict[str, Any] | None,
    key: str,
    server_id: str,
    previous: dict[str, Any] | None = None,
    *,
    adopting: bool = False,
) -> dict[str, Any]:
    """Make (or find) the channel named after ``key``; what the store keeps.

    Its ``os-collect-config`` section is Heat's: the transport's collector
    then ``local``, and the sections an earlier channel used blanked, so an
    agent told by this document stops polling the old place.  A failure
    removes what was made, unless ``adopting`` a booted server's channel:
    its boot data names what is found (a user's id, say), which is kept.
    """
    transport = services.config_transport(name, options)
    try:
        channel = dict(transport.ensure_channel(services, key))
        section = dict(transport.collect_config(services, channel))
        if name == names.POLL_SERVER_HEAT and services.clients.offers("stack_users"):
            channel["user"], section = _server_user(services, key, server_id)
    except BaseException:
        if not adopting:
            _remove_partial(services, name, options, key)
        raise
    collectors = [c for c in section.get("collectors") or () if c != "local"]
    section["collectors"] = [*collectors, "local"]
    for old, values in (previous or {}).items():
        if old in OCC_SECTIONS and old not in section and isinstance(values, dict):
            section[old] = dict.fromkeys(values)
    return {**channel, KEY: key, COLLECT: section}


def _server_user(
    services: Services, key: str, server_id: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """POLL_SERVER_HEAT: the Keystone user Heat's ``heat`` collector logs in as."""
    user = server_user.ensure(services, key, server_user.HEAT, server_id)
    section = {
        "collectors": ["heat"],
        "heat": {
            **server_user.credentials(services, user, key, server_user.HEAT),
            "resource_name": server_id,
        },
    }
    return user.to_dict(), section


def _remove_partial(
    services: Services, name: str, options: dict[str, Any] | None, key: str
) -> None:
    """Remove what a failed :func:`make_channel` may have made, found by the
    names it gives (nothing was recorded); log what could not be."""
    channel: dict[str, Any] = {KEY: key}
    try:
        if name == names.POLL_TEMP_URL:
            container = (options or {}).get("container")
            channel.update(
                container=container or impl_poll_temp_url.DEFAULT_CONTAINER,
                object=key,
            )
        elif name == names.ZAQAR_MESSAGE:
            channel["queue"] = impl_zaqar_message.queue_name(key)
        # only the user this attempt would make: a zaqar user found while
        # moving to signed URLs is the old channel's, still in use
        credentials = (options or {}).get("auth") == names.ZAQAR_AUTH_CREDENTIALS
        kind = {
            names.ZAQAR_MESSAGE: server_user.ZAQAR if credentials else None,
            names.POLL_SERVER_HEAT: server_user.HEAT,
        }.get(name)
        if kind and services.clients.offers("stack_users"):
            users = services.clients.stack_users
            username = server_user.name(key, kind)
            found, project = users.find_user(username), users.find_project(username)
            if found is not None and project is not None:
                channel["user"] = StackUser(found.id, username, project.id).to_dict()
            else:
                if project is not None:
                    users.delete_project(project.id)
                if name == names.ZAQAR_MESSAGE:
                    # its queue is made as its user, after it: none was made
                    # (the queue of that name in swflows' own project is the
                    # old channel's)
                    return
        remove_channel(services, name, channel)
    except Exception:
        LOG.warning(
            "could not remove what a failed enrollment made for channel %s "
            "(enrolling again finds and keeps it)",
            key,
            exc_info=True,
        )


def remove_channel(
    services: Services, name: str | None, channel: dict[str, Any] | None
) -> None:
    """Remove what :func:`make_channel` made; what is gone already is fine."""
    if not name or not channel:
        return
    transport = services.config_transport(name)
    resources = {k: v for k, v in channel.items() if k != COLLECT}
    transport.remove_channel(services, str(channel.get(KEY) or ""), resources)
    user = StackUser.from_dict(channel.get("user"))
    if name == names.POLL_SERVER_HEAT and user is not None:
        server_user.remove(services, user)


class NovaView(NamedTuple):
    """What Nova says of a server being enrolled."""

    #: whether the listing that will judge it shows it (None: no compute,
    #: or Nova could not be asked)
    in_compute: bool | None
    #: the channel key and config transport its Nova metadata names (a
    #: boot whose enrollment did not finish)
    key: str | None = None
    transport: str | None = None
    #: whose listing shows it: the caller's project, None: swflows' own
    project: str | None = None


def nova_view(
    services: Services,
    server_id: str,
    context: RequestContext | None = None,
    *,
    recorded: str | None = None,
) -> NovaView:
    """Whether a listing of Nova's shows ``server_id``, whose, and the
    channel key and config transport its metadata names.

    swflows' own compute login's listing first (it needs nothing more to
    be read again); if it does not show the server, and trusts are on and
    ``context`` carries the caller's token, the caller's own listing (its
    token, scoped to its project): a server of the caller's project that
    swflows' user cannot list is then the caller's project's, which the
    watcher reads through a trust of that project
    (:func:`servers_gone`).  A server no listing shows (another
    project's, which an admin may see) is not watched.  A server
    ``recorded`` as project P's (its listing showed it) keeps that view
    (in_compute None) unless swflows' own listing or P's caller says
    otherwise: no other listing may say it is gone.
    """
    if not services.clients.offers("compute"):
        return NovaView(None)
    own = _view(services.clients.compute, server_id, None)
    if own.in_compute:
        return own
    asked = context if _as_caller(services, context) else None
    project = None if asked is None else str(asked.project_id)
    if recorded is not None and recorded != project:
        return NovaView(None, own.key, own.transport)
    if asked is None or project is None:
        return own
    try:
        compute = services.clients.for_caller(str(asked.auth_token), project).compute
    except exceptions.SwflowsError as exc:
        LOG.warning(
            "could not ask Nova about server %s as its caller: %s", server_id, exc
        )
        return NovaView(None, own.key, own.transport)
    caller = _view(compute, server_id, project)
    if caller.in_compute:
        return caller
    known = None if None in (own.in_compute, caller.in_compute) else False
    return NovaView(known, own.key or caller.key, own.transport or caller.transport)


def recorded_project(record: ServerRecord | None) -> str | None:
    """The project whose listing showed the server when it was enrolled
    (None: none, or swflows' own)."""
    return record.compute_project if record is not None and record.in_compute else None


def _as_caller(services: Services, context: RequestContext | None) -> bool:
    """Whether Nova may be asked as the request's caller: trusts are on
    (a caller's project is then watched through its trusts) and the
    context carries its token."""
    return services.clients.trustee is not None and trusts.carries_token(context)


def _view(compute: Compute, server_id: str, project: str | None) -> NovaView:
    """What ``compute``'s login (``project``'s; None: swflows' own) sees."""
    try:
        server = compute.get_server(server_id)
        listed = server is not None and server_id in compute.list_servers()
    except exceptions.SwflowsError as exc:
        LOG.warning(
            "could not ask Nova about server %s%s: %s",
            server_id,
            f" as project {project}" if project else "",
            exc,
        )
        return NovaView(None)
    if server is None:
        return NovaView(False)
    return NovaView(
        listed,
        server.metadata.get(NOVA_CHANNEL_KEY) or None,
        server.metadata.get(NOVA_TRANSPORT_KEY) or None,
        project if listed else None,
    )


def enroll(
    services: Services,
    server_id: str,
    name: str,
    options: dict[str, Any] | None = None,
    *,
    key: str | None = None,
    nova: bool | None = None,
    compute_project: str | None = None,
    agent: str | None = None,
) -> ServerRecord:
    """Give ``server_id`` its channel on transport ``name``, and publish.

    Idempotent: a server enrolled on ``name`` keeps its channel (and so the
    boot data already given to it), and it is published again.  On another
    transport, or when the options would now make another channel (another
    container, another Zaqar auth), the new channel is made, the old one
    removed, the new one recorded and published: a crash anywhere leaves a
    state that enrolling again finishes.
    ``key`` names the channel's resources (default: the server id).
    ``agent`` (:data:`bootdata.AGENTS`) is recorded as the agent the server
    runs, which decides the form its document is published in; None keeps
    the one recorded.  ``nova`` records whether Nova knows the server, and
    ``compute_project`` whose listing shows it (see :class:`NovaView`);
    with ``nova`` None, swflows' own view is asked (:func:`nova_view`).
    """
    store = services.store
    record = metadata.find_server(services, server_id)
    old_name = record.config_transport if record else None
    old_channel = record.channel if record else None
    if nova is None:
        view = nova_view(services, server_id, recorded=recorded_project(record))
        nova, compute_project = view.in_compute, view.project
        key = key or (view.key if record is None else None)
    adopting = old_channel is None and key is not None
    if (
        old_channel is not None
        and old_name == name
        and _same(options, old_channel)
        and not _lacks_user(services, name, old_channel)
    ):
        channel = old_channel
    else:
        key = str((old_channel or {}).get(KEY) or key or server_id)
        channel = make_channel(
            services,
            name,
            options,
            key,
            server_id,
            previous=(old_channel or {}).get(COLLECT),
            adopting=adopting,
        )
        if old_channel is not None:
            remove_channel(services, old_name, old_channel)
    agent = agent or (old_channel or {}).get(metadata.AGENT)
    if agent is not None:
        channel = {**channel, metadata.AGENT: bootdata.check_agent(agent)}
    store.set_server_channel(
        server_id,
        name,
        channel,
        enrolled=True,
        in_compute=nova,
        compute_project=compute_project if nova else None,
    )
    if (
        old_name
        and old_channel is not None
        and (old_name, metadata.resources(old_channel))
        != (name, metadata.resources(channel))
    ):
        # what a publish in flight wrote to the old channel since its removal
        # (one that reads the new record after its write removes it itself)
        metadata.withdraw(services, server_id, old_name, old_channel)
    metadata.publish_server(services, server_id, name, options)
    return store.get_server(server_id)


def _same(options: dict[str, Any] | None, channel: dict[str, Any]) -> bool:
    """Whether ``channel`` is what ``options`` would make now (same container,
    same Zaqar auth); if not, enrolling again moves the server to a new one."""
    options = options or {}
    if options.get("container") and channel.get("container"):
        return bool(options["container"] == channel["container"])
    if options.get("auth") and channel.get("queue"):
        credentials = bool(options["auth"] == names.ZAQAR_AUTH_CREDENTIALS)
        return credentials == bool(channel.get("user"))
    return True


def _lacks_user(services: Services, name: str, channel: dict[str, Any]) -> bool:
    """Whether a POLL_SERVER_HEAT channel has no Keystone user though one
    could be made (a channel its first deployment made, not an enrollment)."""
    return (
        name == names.POLL_SERVER_HEAT
        and not channel.get("user")
        and services.clients.offers("stack_users")
    )


def unenroll(services: Services, server_id: str) -> bool:
    """Remove the server's channel and row; False if it was not known.

    Refused with ServerInUse while deployments are on it.  No channel
    survives, whatever is in flight: the channel is removed, then the row,
    then what a publish may have written meanwhile (a publish that finds
    the row gone after its write removes it itself, see
    :func:`swflows.metadata.uses_channel`).  Stopped halfway, it is
    finished by unenrolling again: the row goes last but one.
    """
    store = services.store
    record = metadata.find_server(services, server_id)
    if record is None:
        return False
    on_it = store.list_deployments(server_id=server_id, limit=6)
    if on_it:
        raise exceptions.ServerInUse(server_id, [d.id for d in on_it])
    remove_channel(services, record.config_transport, record.channel)
    deleted = bool(store.delete_server(server_id))
    if record.config_transport and record.channel:
        metadata.withdraw(services, server_id, record.config_transport, record.channel)
    return deleted


#: Nova statuses that end a server's deployments
GONE_STATUSES = {"DELETED": "server deleted", "SOFT_DELETED": "server deleted"}
ERROR_STATUS = "ERROR"


@dataclasses.dataclass(frozen=True)
class Listing:
    """One Nova listing the server-gone check reads: ``project``'s
    through ``trust`` (both None: swflows' own), judging ``server_ids``."""

    project: str | None
    trust: str | None
    server_ids: tuple[str, ...]


def plan_listings(
    tracked: Mapping[str, str | None], project_trusts: Mapping[str, str]
) -> tuple[list[Listing], list[str]]:
    """The listings that judge ``tracked`` (server id -> whose listing
    shows it, None: swflows' own), one per project, and the servers no
    listing may judge: their project has no trust in ``project_trusts``
    (project id -> trust).  A server is only ever judged by its own
    project's listing."""
    by_project: dict[str | None, list[str]] = {}
    for server_id, project in sorted(tracked.items()):
        by_project.setdefault(project, []).append(server_id)
    listings: list[Listing] = []
    unchecked: list[str] = []
    for project, ids in sorted(by_project.items(), key=lambda kv: kv[0] or ""):
        if project is None:
            listings.append(Listing(None, None, tuple(ids)))
        elif project in project_trusts:
            listings.append(Listing(project, project_trusts[project], tuple(ids)))
        else:
            unchecked.extend(ids)
    return listings, unchecked


def judge(server_ids: Iterable[str], listed: Mapping[str, str]) -> dict[str, str]:
    """Which of ``server_ids`` their own project's listing (server id ->
    Nova status) says are deleted or broken: id -> why."""
    gone: dict[str, str] = {}
    for server_id in server_ids:
        status = listed.get(server_id)
        if status is None or status in GONE_STATUSES:
            gone[server_id] = "server deleted"
        elif status == ERROR_STATUS:
            gone[server_id] = "server in ERROR"
    return gone


def project_compute(services: Services, project: str | None) -> Compute | None:
    """The compute client whose listing shows a server recorded as
    ``project``'s: swflows' own (None), else one through a live trust of
    that project; None when it has none (or trusts are off)."""
    if project is None:
        return services.clients.compute
    if services.clients.trustee is None:
        return None
    found = trusts.project_trusts(services.store, [project]).get(project)
    if found is None:
        return None
    return services.for_trust(found).project_clients.compute


def servers_gone(services: Services, server_ids: Iterable[str]) -> dict[str, str]:
    """Which of ``server_ids`` Nova deleted or broke: id -> why.

    Only servers known to be Nova's (booted by swflows, or enrolled while
    a listing showed them) are asked about, each in the listing that
    showed it (:func:`plan_listings`), one listing per project: swflows'
    own, or a project's read through a live trust of that project
    (:func:`swflows.trusts.project_trusts`).  The servers of a project
    with no live trust are not asked about; a listing that fails is
    logged and the other projects' are still read.  Nothing is asked
    when no server is tracked, or no compute is configured.
    """
    if not services.clients.offers("compute"):
        return {}
    tracked = services.store.compute_servers(server_ids)
    if not tracked:
        return {}
    projects = {p for p in tracked.values() if p is not None}
    found = (
        trusts.project_trusts(services.store, projects)
        if projects and services.clients.trustee is not None
        else {}
    )
    listings, unchecked = plan_listings(tracked, found)
    if unchecked:
        LOG.debug(
            "servers %s not checked: their project has no live trust to "
            "list them through",
            ", ".join(unchecked),
        )
    gone: dict[str, str] = {}
    for listing in listings:
        try:
            if listing.trust is None:
                listed = services.clients.compute.list_servers()
            else:
                acting = services.for_trust(listing.trust).project_clients
                listed = acting.compute.list_servers()
        except exceptions.SwflowsError as exc:
            LOG.warning(
                "could not list servers%s: %s",
                f" of project {listing.project}" if listing.project else "",
                exc,
            )
            continue
        gone.update(judge(listing.server_ids, listed))
    return gone


def server_gone_check(services: Services, server_ids: Iterable[str]) -> dict[str, str]:
    """:func:`servers_gone`, logging instead of raising when what it
    reads is unreachable."""
    try:
        return servers_gone(services, server_ids)
    except exceptions.SwflowsError as exc:
        LOG.warning("could not check servers: %s", exc)
        return {}
