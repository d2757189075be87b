"""Keystone trusts: work that outlives a request acts through one.

With ``deferred_auth_method = trusts``, a deployment made by a request
carrying the caller's token gets a trust from the caller (trustor) to
swflows' own user (the ``[trustee]`` options), delegating the caller's
roles on its project with impersonation, as Heat does for deferred stack
actions.  Its flows, the watcher reading its signal store and its undeploy
then log in as the trustee scoped by that trust, so they go on after the
caller's token expired or was revoked; only the trust id is kept (sealed,
beside the deployment's owner), never a password.  The trust is deleted
when the deployment is.  A group's members act through the group's
trust, made when the group is and deleted with it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from swflows import exceptions, projects
from swflows.clients.trustee import (
    Trustee,
    carries_token,
    delegated_roles,
    trust_request,
)

if TYPE_CHECKING:
    from swflows.persistence.store import Store
    from swflows.transports.base import Context

LOG = logging.getLogger(__name__)

#: the owners' kind of a Mistral action's pending result (its execution id)
CALLBACK: Final = "callback"
#: a group member's record of its group's trust (see :func:`group_ref`)
GROUP_REF: Final = "group:"


def group_ref(group_id: str) -> str:
    """What a group member records instead of a trust of its own: its
    work acts through its group's trust, deleted with the group."""
    return GROUP_REF + group_id


def acting_trusts(store: Store, deployment_ids: Iterable[str]) -> dict[str, str]:
    """Deployment id -> the trust its work acts through (its own, or its
    group's), for those of ``deployment_ids`` that have one."""
    found = store.trusts(projects.DEPLOYMENT, deployment_ids)
    groups = {
        ident: value[len(GROUP_REF) :]
        for ident, value in found.items()
        if value.startswith(GROUP_REF)
    }
    if groups:
        of_groups = store.trusts(projects.GROUP, set(groups.values()))
        for ident, group_id in groups.items():
            if group_id in of_groups:
                found[ident] = of_groups[group_id]
            else:  # the group's trust is gone: nothing to act through
                del found[ident]
    return found


def project_trusts(store: Store, project_ids: Iterable[str]) -> dict[str, str]:
    """Project id -> a live trust of that project (a deployment's or a
    group's, never a member's reference to its group's), for those of
    ``project_ids`` that have one: what reads a project's own view of
    the cloud (its Nova listing) after its callers' tokens expired."""
    return store.project_trusts(
        project_ids, (projects.DEPLOYMENT, projects.GROUP), skip=GROUP_REF
    )


def trusting_projects(store: Store) -> dict[str, str]:
    """Project id -> a live trust of that project, for every project
    owning a deployment or group with one: the projects whose accounts
    hold signal stores of this installation (the sweep lists them)."""
    found = store.trusting_projects((projects.DEPLOYMENT, projects.GROUP))
    return project_trusts(store, found)


def callback_key(deployment_id: str | None, nonce: str) -> str:
    """The key a pending result's trust is kept under: the deployment the
    result waits for (``-`` until it is known) and a nonce."""
    return f"{deployment_id or '-'}/{nonce}"


def callback_deployment(key: str) -> str | None:
    """The deployment a pending result's key names (None: not known yet)."""
    head, sep, _ = key.rpartition("/")
    return head if sep and head != "-" else None


def unneeded(store: Store) -> list[tuple[str, str]]:
    """``(kind, object id)`` of the owner rows, with their trusts, that
    nothing needs any more:

    * a deployment's, with no deployment row and no flow of it (a revert
      removed the row and its runner stopped before it let go of the
      trust);
    * a pending result's (:data:`CALLBACK`) that no result row names
      (:mod:`swflows.engine.outbox` forgets the row, with its trust, once
      it was sent and kept) and whose deployment ended or is gone with no
      flow of it left, or was never named (the process holding it died
      before it wrote the result's row).

    A row that is merely new looks the same (its deployment is being made):
    callers wait for a grace period before acting on one.
    """
    from swflows.persistence import flow_registry as flow_rows

    found = [(projects.DEPLOYMENT, i) for i in store.ownerless_deployments()]
    registry = flow_rows.FlowRegistry(store)
    # a result's row, sent or not, needs its trust until it is forgotten
    of_results = store.result_trust_keys()
    for key in store.owned_ids(CALLBACK):
        if key in of_results:
            continue
        deployment_id = callback_deployment(key)
        if deployment_id is not None:
            if registry.find(deployment_id=deployment_id):
                continue
            try:
                if not store.get_deployment(deployment_id).is_terminal:
                    continue
            except exceptions.DeploymentNotFound:
                pass
        found.append((CALLBACK, key))
    return found


def release(services: Context, kind: str, object_id: str) -> bool:
    """Delete the object's trust in Keystone, then forget it; whether it
    had one.  A trust another object still acts through (a result's trust
    a deployment made by the caller's next action reused) is only
    forgotten here: it goes with the last of them.  A group member's
    reference to its group's trust is only forgotten.  Errors (Keystone
    unreachable) propagate with the trust still recorded, so a later
    attempt deletes it.  Run by a flow, it deletes nothing once that flow
    is lost (:meth:`Context.check_fence`)."""
    trust_id = services.store.get_trust(kind, object_id)
    if trust_id is None:
        return False
    if trust_id.startswith(GROUP_REF):
        services.store.set_trust(kind, object_id, None)
        return True
    trustee = services.clients.trustee
    if trustee is None:
        raise exceptions.NotSupported(
            f"{kind} {object_id} acts through a trust, and no [trustee] is "
            "configured to delete it"
        )
    services.check_fence()
    if services.store.let_go_if_shared(kind, object_id):
        LOG.info("%s %s: let go of a trust still shared", kind, object_id)
        return True
    if not trustee.delete(trust_id):
        LOG.info("%s %s: its trust was gone already", kind, object_id)
    services.store.set_trust(kind, object_id, None)
    services.clients.forget_trust(trust_id)
    return True


def let_go(services: Context, kind: str, object_id: str) -> bool:
    """:func:`release` the object's trust, then forget its owner row;
    whether it had a trust.  Errors leave both for a later attempt."""
    had = release(services, kind, object_id)
    services.store.forget_owner(kind, object_id)
    return had


__all__ = [
    "CALLBACK",
    "GROUP_REF",
    "Trustee",
    "acting_trusts",
    "callback_deployment",
    "callback_key",
    "carries_token",
    "delegated_roles",
    "group_ref",
    "let_go",
    "project_trusts",
    "release",
    "trust_request",
    "trusting_projects",
    "unneeded",
]
