"""Where an asynchronous action's result goes (Mistral's API), and the
trust it is sent through; the store keeps both, and whichever process
sees the deployment end sends it (:mod:`swflows.engine.outbox`)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from swflows import exceptions, projects, trusts
from swflows.api import Swflows

if TYPE_CHECKING:
    from oslo_context.context import RequestContext

LOG = logging.getLogger(__name__)

#: Mistral's API (its base URL) when the caller's catalog does not say
MISTRAL_URL_ENV: Final = "SWFLOWS_MISTRAL_URL"


def _catalog_entries(catalog: Any) -> list[Mapping[str, Any]]:
    if isinstance(catalog, str):
        try:
            catalog = json.loads(catalog)
        except ValueError:
            return []
    if isinstance(catalog, Mapping):
        catalog = catalog.get("catalog") or catalog.get("serviceCatalog") or []
    if not isinstance(catalog, list):
        return []
    return [entry for entry in catalog if isinstance(entry, Mapping)]


def mistral_endpoint(security: Any) -> str | None:
    """Mistral's API (service type ``workflowv2``) from the caller's catalog."""
    region = getattr(security, "region_name", None)
    catalog = getattr(security, "service_catalog", None)
    for entry in _catalog_entries(catalog):
        if entry.get("type") != "workflowv2":
            continue
        for point in entry.get("endpoints") or []:
            if point.get("interface", "public") != "public":
                continue
            if region and point.get("region", region) != region:
                continue
            url = point.get("url")
            if url:
                return str(url)
    return None


def callback_url(context: Any, base_url: str | None = None) -> str:
    """The URL to PUT an asynchronous action's result to."""
    execution = getattr(context, "execution", None)
    path = getattr(execution, "callback_url", None)
    if not path:
        action_id = getattr(execution, "action_execution_id", None)
        if not action_id:
            raise exceptions.ValidationError(
                "context", "no action execution to report the result to"
            )
        path = f"/v2/action_executions/{action_id}"
    path = str(path)
    if path.startswith(("http://", "https://")):
        return path
    base = (
        base_url
        or os.environ.get(MISTRAL_URL_ENV)
        or mistral_endpoint(getattr(context, "security", None))
    )
    if not base:
        raise exceptions.ValidationError(
            "callback_base_url",
            f"Mistral's URL is not in the caller's catalog: "
            f"give callback_base_url or set ${MISTRAL_URL_ENV}",
        )
    base = base.rstrip("/")
    # the catalog's endpoint usually ends with /v2, as the path begins
    if base.endswith("/v2") and path.startswith("/v2/"):
        base = base[: -len("/v2")]
    return base + "/" + path.lstrip("/")


def caller_context(sw: Swflows, token: str | None) -> RequestContext | None:
    """With ``deferred_auth_method = trusts``, the request context of the
    action's caller, read from Keystone by its token (its user, project
    and roles: Mistral's context names no roles); None otherwise, and the
    action is swflows' own, as without projects."""
    trustee = sw.services.clients.trustee
    if trustee is None or not token:
        return None
    return trustee.caller(token)


def hold_trust(sw: Swflows, caller: RequestContext, key: str) -> bool:
    """Have the caller delegate the trust its result is sent through,
    kept (sealed) under ``key``; whether it did (only when swflows makes
    trusts).  The result then reaches Mistral after the caller's token
    expired or was revoked.  A caller whose token is scoped by a trust to
    swflows (the action after a result sent through a trust) hands on
    that trust, shared, never deleted while another row acts through it."""
    trustee = sw.services.clients.trustee
    if trustee is None or not trusts.carries_token(caller):
        return False
    sw.store.set_owner(trusts.CALLBACK, key, projects.owner_of(caller))
    try:
        trust_id, made = trustee.obtain(caller)
    except BaseException:
        sw.store.forget_owner(trusts.CALLBACK, key)
        raise
    try:
        if not sw.store.set_trust(trusts.CALLBACK, key, trust_id):
            raise exceptions.SwflowsError(f"result {key} has no owner")
    except BaseException:
        if made:
            trustee.delete(trust_id)
        sw.store.forget_owner(trusts.CALLBACK, key)
        raise
    return True


def name_result(sw: Swflows, key: str, deployment_id: str, nonce: str) -> str:
    """Keep the trust :func:`hold_trust` kept under ``key`` under the
    deployment the result waits for instead; the key it is kept under."""
    named = trusts.callback_key(deployment_id, nonce)
    return named if sw.store.rename_owner(trusts.CALLBACK, key, named) else key


def drop_trust(sw: Swflows, key: str) -> None:
    """Let go of the trust :func:`hold_trust` kept under ``key`` (deleted
    unless another row acts through it), and of its record."""
    try:
        trusts.let_go(sw.services, trusts.CALLBACK, key)
    except exceptions.SwflowsError as exc:
        LOG.error("the trust of result %s could not be deleted: %s", key, exc)
