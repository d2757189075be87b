"""Enrolling servers: their metadata channel, made once, and Nova's view of them.

A server is *enrolled* when its channel for its config transport exists,
is recorded (sealed) in the store, and carries the current metadata
document.  Enrolling again is harmless; enrolling with another transport
moves the server (the new channel published, then the old one removed,
as Heat does); unenrolling removes all it made.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from swflows import exceptions
from swflows.services import Services

LOG = logging.getLogger(__name__)

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
