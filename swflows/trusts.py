"""Keystone trusts: work that outlives a request acts through one.

With ``deferred_auth_method = trusts``, a deployment made by a request
carrying the caller's token gets a trust from the caller (trustor) to
swflows' own user (the ``[trustee]`` options), delegating the caller's
roles on its project with impersonation, as Heat does for deferred stack
actions.  Its flows, the watcher reading its signal store and its undeploy
then log in as the trustee scoped by that trust, so they go on after the
caller's token expired or was revoked; only the trust id is kept (sealed,
beside the deployment's owner), never a password.  The trust is deleted
when the deployment is.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from swflows import exceptions
from swflows.clients.trustee import (
    Trustee,
    carries_token,
    delegated_roles,
    trust_request,
)

if TYPE_CHECKING:
    from swflows.services import Services

LOG = logging.getLogger(__name__)

#: the owners' kind of a Mistral action's pending result (its execution id)
CALLBACK: Final = "callback"


def release(services: Services, kind: str, object_id: str) -> bool:
    """Delete the object's trust in Keystone, then forget it; whether it
    had one.  Errors (Keystone unreachable) propagate with the trust still
    recorded, so a later attempt deletes it."""
    trust_id = services.store.get_trust(kind, object_id)
    if trust_id is None:
        return False
    trustee = services.clients.trustee
    if trustee is None:
        raise exceptions.NotSupported(
            f"{kind} {object_id} acts through a trust, and no [trustee] is "
            "configured to delete it"
        )
    if not trustee.delete(trust_id):
        LOG.info("%s %s: its trust was gone already", kind, object_id)
    services.store.set_trust(kind, object_id, None)
    services.clients.forget_trust(trust_id)
    return True


__all__ = [
    "CALLBACK",
    "Trustee",
    "carries_token",
    "delegated_roles",
    "release",
    "trust_request",
]
