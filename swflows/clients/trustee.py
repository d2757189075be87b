"""swflows' own Keystone user, the trustee of the trusts callers delegate
(see :mod:`swflows.trusts`), and the requests that make and end a trust."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

from keystoneauth1 import exceptions as ksa_exc
from keystoneauth1 import session as ksa_session
from keystoneauth1.identity import v3
from oslo_context import context as oslo_context

from swflows import exceptions
from swflows.clients import base as client_base

#: Keystone's trusts, under its v3 URL
TRUSTS_PATH: Final = "/OS-TRUST/trusts"


def delegated_roles(
    context_roles: Sequence[str], configured: Sequence[str] = ()
) -> list[str]:
    """The role names a trust delegates: ``configured``, else the caller's.

    ValidationError when there is none (a trust without roles grants nothing).
    """
    roles = list(dict.fromkeys(r for r in (configured or context_roles) if r))
    if not roles:
        raise exceptions.ValidationError(
            "context", "the request context names no role to delegate"
        )
    return roles


def trust_request(
    trustor_user_id: str, trustee_user_id: str, project_id: str, roles: Sequence[str]
) -> dict[str, Any]:
    """The body of Keystone's ``POST /v3/OS-TRUST/trusts``: the trustor's
    ``roles`` on ``project_id``, impersonating the trustor, never expiring
    (the trust is deleted with the deployment)."""
    return {
        "trust": {
            "trustor_user_id": trustor_user_id,
            "trustee_user_id": trustee_user_id,
            "project_id": project_id,
            "impersonation": True,
            "roles": [{"name": role} for role in roles],
        }
    }


def carries_token(context: oslo_context.RequestContext | None) -> bool:
    """Whether ``context`` can delegate: it names a user, a project and a token."""
    return bool(
        context is not None
        and context.auth_token
        and context.user_id
        and context.project_id
    )


class Trustee:
    """swflows' own Keystone user, the trustee of callers' trusts.

    ``auth_for(trust_id)`` is the trustee's login scoped by that trust (by
    nothing with None); ``session_for(auth)`` a keystoneauth1 session with
    it.  ``auth_url`` is Keystone's v3 URL.
    """

    def __init__(
        self,
        auth_url: str,
        auth_for: Callable[[str | None], Any],
        session_for: Callable[[Any], ksa_session.Session],
        roles: Sequence[str] = (),
    ) -> None:
        self.auth_url = auth_url.rstrip("/")
        self._auth_for = auth_for
        self._session_for = session_for
        self.roles = tuple(roles)
        self._user_id: str | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Trustee(auth_url={self.auth_url!r})"

    @property
    def user_id(self) -> str:
        """The trustee's user id (one login, then kept)."""
        with self._lock:
            if self._user_id is None:
                session = self._session_for(self._auth_for(None))
                try:
                    self._user_id = str(session.get_user_id())
                except ksa_exc.ClientException as exc:
                    raise client_base.ksa_error(
                        "identity", "trustee login", exc
                    ) from None
            return self._user_id

    def login(self, trust_id: str) -> Any:
        """The trustee's auth plugin scoped by ``trust_id``: its tokens act
        as the trustor, with the delegated roles on the trustor's project."""
        return self._auth_for(trust_id)

    def session(self, trust_id: str) -> ksa_session.Session:
        """A session of the trustee scoped by ``trust_id`` (see :meth:`login`)."""
        return self._session_for(self.login(trust_id))

    def caller_login(self, token: str, project_id: str) -> Any:
        """A caller's login with its own ``token``, scoped to ``project_id``
        (good while the token is)."""
        return v3.Token(auth_url=self.auth_url, token=token, project_id=project_id)

    def create(self, context: oslo_context.RequestContext) -> str:
        """A new trust from the caller of ``context`` (its token) to the
        trustee; its id."""
        if not carries_token(context):
            raise exceptions.ValidationError(
                "context", "a trust needs the caller's user, project and token"
            )
        body = trust_request(
            str(context.user_id),
            self.user_id,
            str(context.project_id),
            delegated_roles(list(context.roles or ()), self.roles),
        )
        caller = self._session_for(
            self.caller_login(str(context.auth_token), str(context.project_id))
        )
        try:
            resp = caller.post(self.auth_url + TRUSTS_PATH, json=body, raise_exc=False)
        except (ksa_exc.NotFound, ksa_exc.Unauthorized):
            # Keystone does not log in with the caller's token
            raise exceptions.CloudError(
                "identity",
                "create trust failed: the caller's token is expired or "
                "revoked (log in again)",
                status=401,
            ) from None
        except ksa_exc.ClientException as exc:
            raise client_base.ksa_error("identity", "create trust", exc) from None
        if resp.status_code != 201:
            raise client_base.http_error(
                "identity", "create trust", resp.status_code, resp.reason
            )
        return str(resp.json()["trust"]["id"])

    def caller(self, token: str) -> oslo_context.RequestContext:
        """The request context of a caller known by its token alone (a
        Mistral action's): Keystone says whose token it is.  A token reads
        itself; one scoped by a trust may not (Keystone answers 403), and
        the trustee reads it instead: a :class:`TrustScoped` context names
        that trust (Mistral hands such a token on after a result was sent
        through a trust)."""
        body = self._validate(token, own=True)
        if body is None:
            body = self._validate(token, own=False)
        if body is None:
            raise client_base.http_error("identity", "validate token", 403, "FORBIDDEN")
        fields: dict[str, Any] = {
            "auth_token": token,
            "user_id": body["user"]["id"],
            "project_id": (body.get("project") or {}).get("id"),
            "roles": [role["name"] for role in body.get("roles") or ()],
        }
        trust = body.get("OS-TRUST:trust")
        if isinstance(trust, dict) and trust.get("id"):
            return TrustScoped(
                trust_id=str(trust["id"]),
                trustee_user_id=str((trust.get("trustee_user") or {}).get("id") or ""),
                **fields,
            )
        return oslo_context.RequestContext(**fields)

    def _validate(self, token: str, *, own: bool) -> dict[str, Any] | None:
        """The token's body as Keystone validates it, read with the token
        itself (``own``) or by the trustee; None when that reader may not
        (403)."""
        headers = {"X-Subject-Token": token}
        if own:
            session = self._session_for(None)
            headers["X-Auth-Token"] = token
        else:
            session = self._session_for(self._auth_for(None))
        try:
            resp = session.get(
                self.auth_url + "/auth/tokens",
                headers=headers,
                authenticated=not own,
                raise_exc=False,
            )
        except ksa_exc.ClientException as exc:
            raise client_base.ksa_error("identity", "validate token", exc) from None
        if resp.status_code == 403:
            return None
        if resp.status_code != 200:
            raise client_base.http_error(
                "identity", "validate token", resp.status_code, resp.reason
            )
        found: dict[str, Any] = resp.json()["token"]
        return found

    def obtain(self, context: oslo_context.RequestContext) -> tuple[str, bool]:
        """A trust the caller of ``context`` delegates to the trustee, and
        whether it was made here (else it is the trust the caller's token
        is scoped by, one of the trustee's own: it is shared, never
        deleted by whoever got it this way alone).  A token scoped by a
        trust to another user cannot delegate (Keystone forbids
        re-delegating): ValidationError."""
        trust_id = getattr(context, "trust_id", None)
        if trust_id is None:
            return self.create(context), True
        if getattr(context, "trustee_user_id", None) != self.user_id:
            raise exceptions.ValidationError(
                "context",
                "the caller's token is scoped by a trust to another user: "
                "it cannot delegate a trust to swflows",
            )
        return str(trust_id), False

    def delete(self, trust_id: str) -> bool:
        """Delete the trust, logged in through it (the trustor may delete its
        trust); False when it was gone already."""
        try:
            resp = self.session(trust_id).delete(
                f"{self.auth_url}{TRUSTS_PATH}/{trust_id}", raise_exc=False
            )
        except (ksa_exc.NotFound, ksa_exc.Unauthorized) as exc:
            # Keystone refuses a login through a trust it no longer has;
            # the trustee's own login tells that from a wrong password
            if not self._trustee_logs_in():
                raise client_base.ksa_error("identity", "delete trust", exc) from None
            return False
        except ksa_exc.ClientException as exc:
            raise client_base.ksa_error("identity", "delete trust", exc) from None
        if resp.status_code == 404:
            return False
        if resp.status_code not in (200, 204):
            raise client_base.http_error(
                "identity", "delete trust", resp.status_code, resp.reason
            )
        return True

    def _trustee_logs_in(self) -> bool:
        try:
            self._session_for(self._auth_for(None)).get_token()
        except ksa_exc.Unauthorized:
            return False
        return True


class TrustScoped(oslo_context.RequestContext):
    """A caller's context whose token is scoped by a trust
    (:meth:`Trustee.caller`): its ``trust_id``, and the user that trust
    delegates to (``trustee_user_id``)."""

    def __init__(self, *, trust_id: str, trustee_user_id: str, **fields: Any) -> None:
        super().__init__(**fields)
        self.trust_id = trust_id
        self.trustee_user_id = trustee_user_id


__all__ = [
    "TrustScoped",
    "Trustee",
    "carries_token",
    "delegated_roles",
    "trust_request",
]
