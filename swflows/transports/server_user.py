"""A server's own Keystone user, for agents that log in to read metadata.

Heat's ``heat`` collector (POLL_SERVER_HEAT) and its ``zaqar`` collector
(ZAQAR_MESSAGE) authenticate as a user with a password.  swflows makes one
per server and transport: user and project ``swflows-<kind>-<key>`` in the
stack-user domain (``kind`` is ``heat`` or ``zaqar``, so moving a server
between the two never removes the user the other made), the password
re-derived from the store's secret (never a task result, never in a log);
the channel that holds it is sealed in the store.
"""

from __future__ import annotations

from typing import Final

from swflows.clients import identity
from swflows.clients.identity import StackUser
from swflows.transports import base

HEAT: Final = "heat"
ZAQAR: Final = "zaqar"


def name(key: str, kind: str) -> str:
    return f"swflows-{kind}-{key}"


def password(services: base.Context, key: str, kind: str) -> str:
    return identity.derive_password(services.secret, "server-user", kind, key)


def ensure(services: base.Context, key: str, kind: str, what: str) -> StackUser:
    """Make (or find) the server's user and project."""
    users = services.clients.stack_users
    username = name(key, kind)
    project_id = users.ensure_project(username, f"swflows server {what}")
    user_id = users.ensure_user(username, project_id, password(services, key, kind))
    return StackUser(user_id, username, project_id)


def remove(services: base.Context, user: StackUser) -> None:
    """Remove the user and its project; what is gone already is fine."""
    users = services.clients.stack_users
    users.delete_user(user.user_id)
    users.delete_project(user.project_id)


def credentials(
    services: base.Context, user: StackUser, key: str, kind: str
) -> base.JsonDict:
    """What an agent logs in with (the password included)."""
    return {
        "user_id": user.user_id,
        "password": password(services, key, kind),
        "auth_url": services.clients.identity_url,
        "project_id": user.project_id,
    }
