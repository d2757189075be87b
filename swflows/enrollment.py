"""Enrolling servers: their metadata channel, made once, and Nova's view of them.

A server is *enrolled* when its channel for its config transport exists,
is recorded (sealed) in the store, and carries the current metadata
document.  Enrolling again is harmless; enrolling with another transport
moves the server (the new channel made, the old one removed, the new one
recorded and published, as Heat does); unenrolling removes all it made,
and so does a failed enrollment.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from swflows import bootdata, exceptions, metadata
from swflows import transport_names as names
from swflows.clients.identity import StackUser
from swflows.persistence.store import ServerRecord
from swflows.services import Services
from swflows.transports import (
    impl_poll_temp_url,
    impl_zaqar_message,
    server_user,
)

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


def nova_view(
    services: Services, server_id: str
) -> tuple[bool | None, str | None, str | None]:
    """Whether ``server_id`` is a server of swflows' own project in Nova
    (None: no compute, or Nova is down), and the channel key and config
    transport its metadata names (a boot whose enrollment did not finish).

    Only servers the project's listing shows are watched (the watcher
    reads that listing); another project's server, which an admin may
    see, is not.
    """
    if not services.clients.offers("compute"):
        return None, None, None
    compute = services.clients.compute
    try:
        server = compute.get_server(server_id)
        listed = server is not None and server_id in compute.list_servers()
    except exceptions.SwflowsError as exc:
        LOG.warning("could not ask Nova about server %s: %s", server_id, exc)
        return None, None, None
    if server is None:
        return False, None, None
    return (
        listed,
        server.metadata.get(NOVA_CHANNEL_KEY) or None,
        server.metadata.get(NOVA_TRANSPORT_KEY) or None,
    )


def enroll(
    services: Services,
    server_id: str,
    name: str,
    options: dict[str, Any] | None = None,
    *,
    key: str | None = None,
    nova: bool | None = None,
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
    the one recorded.
    """
    store = services.store
    record = metadata.find_server(services, server_id)
    old_name = record.config_transport if record else None
    old_channel = record.channel if record else None
    if nova is None:
        nova, booted_key, _ = nova_view(services, server_id)
        key = key or (booted_key if record is None else None)
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
    store.set_server_channel(server_id, name, channel, enrolled=True, in_compute=nova)
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


def servers_gone(services: Services, server_ids: Iterable[str]) -> dict[str, str]:
    """Which of ``server_ids`` Nova deleted or broke: id -> why.

    Only servers known to be Nova's (booted by swflows, or enrolled while
    Nova listed them) are asked about, with one listing of the project's
    servers; nothing is asked when none is, or no compute is configured.
    """
    if not services.clients.offers("compute"):
        return {}
    tracked = services.store.compute_servers(server_ids)
    if not tracked:
        return {}
    listed = services.clients.compute.list_servers()
    gone: dict[str, str] = {}
    for server_id in tracked:
        status = listed.get(server_id)
        if status is None or status in GONE_STATUSES:
            gone[server_id] = "server deleted"
        elif status == ERROR_STATUS:
            gone[server_id] = "server in ERROR"
    return gone


def server_gone_check(services: Services, server_ids: Iterable[str]) -> dict[str, str]:
    """:func:`servers_gone`, logging instead of raising when Nova is down."""
    try:
        return servers_gone(services, server_ids)
    except exceptions.SwflowsError as exc:
        LOG.warning("could not list servers: %s", exc)
        return {}
