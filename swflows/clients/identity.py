"""Heat-style stack domain users, over raw Keystone v3 REST.

A stack user lives in a dedicated domain, in a project made for its stack,
with one role; the in-server agent authenticates as it (heat-semantics §4).
Everything here runs as the stack domain admin with a domain-scoped token.
Passwords are never stored: :func:`derive_password` re-derives one after a
crash, and :meth:`StackUsers.ensure_user` resets it on a re-run.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import logging
import secrets
import string
from collections.abc import Iterable
from typing import Any

import requests
from keystoneauth1 import adapter as ksa_adapter
from keystoneauth1 import exceptions as ksa_exc
from keystoneauth1 import session as ksa_session
from keystoneauth1.identity import v3

from swflows.clients.base import (
    DEFAULT_RETRY,
    RetryPolicy,
    http_error,
    ksa_error,
    redact,
    retried,
)
from swflows.exceptions import CloudError, ValidationError

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class StackUser:
    """The Keystone user a transport's agent side authenticates as (no secret)."""

    user_id: str
    username: str
    project_id: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> StackUser | None:
        if not data:
            return None
        return cls(data["user_id"], data["username"], data["project_id"])


SERVICE = "identity"
DEFAULT_ROLE = "heat_stack_user"
#: Keystone's limit on project names; Heat truncates to it (§4).
PROJECT_NAME_MAX = 64
USER_NAME_MAX = 255
#: Options Heat sets on stack users so password rules never lock them out.
USER_OPTIONS = {
    "ignore_change_password_upon_first_use": True,
    "ignore_password_expiry": True,
    "ignore_lockout_failure_attempts": True,
}
MIN_SECRET_BYTES = 16


def derive_password(secret: bytes, *parts: str) -> str:
    """A stack-user password re-derivable from ``secret`` and ``parts``.

    HMAC-SHA256 over the JSON-encoded parts (so ``("ab", "c")`` and
    ``("a", "bc")`` differ), URL-safe base64 (43 characters), then one
    upper-case letter, one lower-case letter, one digit and one ``-``/``_``,
    all picked from the digest, so the usual Keystone ``password_regex``
    rules are met.  47 characters, below bcrypt's 72-byte limit.
    """
    if len(secret) < MIN_SECRET_BYTES:
        raise ValidationError("secret", f"must be at least {MIN_SECRET_BYTES} bytes")
    if not parts:
        raise ValidationError("parts", "at least one part is needed")
    message = json.dumps(list(parts), separators=(",", ":")).encode()
    digest = hmac.new(secret, message, hashlib.sha256).digest()
    body = base64.urlsafe_b64encode(digest).decode().rstrip("=")
    tail = (
        string.ascii_uppercase[digest[0] % 26]
        + string.ascii_lowercase[digest[1] % 26]
        + string.digits[digest[2] % 10]
        + "-_"[digest[3] % 2]
    )
    return body + tail


@dataclasses.dataclass(frozen=True)
class ProjectInfo:
    id: str
    name: str
    domain_id: str
    description: str


@dataclasses.dataclass(frozen=True)
class UserInfo:
    id: str
    name: str
    domain_id: str
    default_project_id: str | None
    enabled: bool


@dataclasses.dataclass(frozen=True)
class Ec2Credential:
    """An EC2 keypair; ``secret`` is kept out of ``repr``."""

    access: str
    secret: str = dataclasses.field(repr=False)
    credential_id: str


def _project(data: dict[str, Any]) -> ProjectInfo:
    return ProjectInfo(
        id=data["id"],
        name=data["name"],
        domain_id=data["domain_id"],
        description=data.get("description") or "",
    )


def _user(data: dict[str, Any]) -> UserInfo:
    return UserInfo(
        id=data["id"],
        name=data["name"],
        domain_id=data["domain_id"],
        default_project_id=data.get("default_project_id"),
        enabled=bool(data.get("enabled", True)),
    )


def _keystone_message(resp: requests.Response) -> str:
    try:
        return str(resp.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return resp.reason or ""


def ec2_credential_id(access: str) -> str:
    """The id Keystone gives an EC2 credential: SHA-256 of its access key."""
    return hashlib.sha256(access.encode()).hexdigest()


class StackUsers:
    """Projects, users, roles and EC2 keypairs in the stack user domain.

    ``session`` must be scoped to the domain ``domain_id`` as its admin
    (Heat's ``stack_domain_admin``).  Creating is find-or-create by name;
    deleting something missing returns False.  Users and projects outside
    the domain are never deleted.
    """

    def __init__(
        self,
        session: ksa_session.Session,
        domain_id: str,
        *,
        role_name: str = DEFAULT_ROLE,
        interface: str = "public",
        region_name: str | None = None,
        endpoint_override: str | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self.session = session
        self.domain_id = domain_id
        self.role_name = role_name
        self.retry_policy = retry
        self._api = ksa_adapter.Adapter(
            session,
            service_type="identity",
            interface=interface,
            region_name=region_name,
            endpoint_override=endpoint_override,
            version="3.0",
        )
        self._role_id: str | None = None

    @classmethod
    def from_password(
        cls,
        auth_url: str,
        *,
        domain_id: str,
        username: str,
        password: str,
        timeout: float = 30.0,
        **kwargs: Any,
    ) -> StackUsers:
        """Log in as the stack domain admin ``username`` (a user of the domain)."""
        auth = v3.Password(
            auth_url=auth_url,
            username=username,
            password=password,
            user_domain_id=domain_id,
            domain_id=domain_id,
        )
        session = ksa_session.Session(auth=auth, timeout=timeout)
        return cls(session, domain_id, **kwargs)

    # -- plumbing ---------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        what: str,
        *,
        ok: Iterable[int] = (200,),
        json: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        secrets: Iterable[str] = (),
        authenticated: bool | None = None,
    ) -> requests.Response:
        """One Keystone call; any status outside ``ok`` becomes a CloudError.

        Calls that carry ``secrets`` are not logged by keystoneauth, and the
        secrets are blanked out of any error text.
        """
        hidden = tuple(secrets)
        try:
            resp = self._api.request(
                path,
                method,
                json=json,
                params=params,
                raise_exc=False,
                log=not hidden,
                authenticated=authenticated,
            )
        except ksa_exc.ClientException as exc:
            raise ksa_error(SERVICE, what, exc) from None
        if resp.status_code not in tuple(ok):
            detail = redact(_keystone_message(resp), hidden)
            raise http_error(SERVICE, what, resp.status_code, detail)
        return resp

    def _show(self, kind: str, ident: str) -> dict[str, Any] | None:
        """A user or project of the stack domain; None if missing.

        Anything outside the domain is refused: this adapter never touches it.
        """
        resp = self._request(
            "GET", f"/{kind}s/{ident}", f"show {kind} {ident}", ok=(200, 404)
        )
        if resp.status_code == 404:
            return None
        found: dict[str, Any] = resp.json()[kind]
        if found.get("domain_id") != self.domain_id:
            raise ValidationError(
                f"{kind}_id",
                f"{kind} {ident} is not in the stack user domain; not touching it",
            )
        return found

    def _role(self) -> str:
        if self._role_id is None:
            resp = self._request(
                "GET",
                "/roles",
                f"look up role {self.role_name}",
                params={"name": self.role_name},
            )
            roles = resp.json()["roles"]
            if not roles:
                raise CloudError(SERVICE, f"role {self.role_name} not found")
            self._role_id = str(roles[0]["id"])
        return self._role_id

    # -- projects ---------------------------------------------------------

    def find_project(self, name: str) -> ProjectInfo | None:
        return self.retry_policy.call(self._find_project, name)

    def _find_project(self, name: str) -> ProjectInfo | None:
        resp = self._request(
            "GET",
            "/projects",
            f"find project {name}",
            params={"domain_id": self.domain_id, "name": name},
        )
        found = resp.json()["projects"]
        return _project(found[0]) if found else None

    @retried
    def ensure_project(
        self, name: str, description: str = "swflows stack user project"
    ) -> str:
        """The id of the domain's project ``name``, created if missing."""
        if not 0 < len(name) <= PROJECT_NAME_MAX:
            raise ValidationError("name", f"must be 1 to {PROJECT_NAME_MAX} chars")
        # created first, found on a conflict: a new stack user's project
        # (the usual case) costs one request
        body = {
            "project": {
                "name": name,
                "description": description,
                "domain_id": self.domain_id,
                "enabled": True,
            }
        }
        resp = self._request(
            "POST", "/projects", f"create project {name}", ok=(201, 409), json=body
        )
        if resp.status_code == 201:
            LOG.info("Created stack user project %s", name)
            return str(resp.json()["project"]["id"])
        # It exists: made by a run before a crash, or by a racing one.
        found = self._find_project(name)
        if found is None:
            raise CloudError(SERVICE, f"project {name} conflicts but is not found")
        return found.id

    @retried
    def delete_project(self, project_id: str) -> bool:
        """Delete a project of the domain; False if it was already gone."""
        if self._show("project", project_id) is None:
            return False
        resp = self._request(
            "DELETE", f"/projects/{project_id}", "delete project", ok=(204, 404)
        )
        return resp.status_code == 204

    @retried
    def list_projects(self, prefix: str = "") -> list[ProjectInfo]:
        """The domain's projects (those whose name starts with ``prefix``,
        Keystone's ``name__startswith``; a Keystone without that filter
        lists them all)."""
        resp = self._request(
            "GET", "/projects", "list projects", params=self._listing(prefix)
        )
        return [_project(p) for p in resp.json()["projects"]]

    def _listing(self, prefix: str) -> dict[str, str]:
        params = {"domain_id": self.domain_id}
        if prefix:
            params["name__startswith"] = prefix
        return params

    # -- users ------------------------------------------------------------

    def find_user(self, name: str) -> UserInfo | None:
        return self.retry_policy.call(self._find_user, name)

    def _find_user(self, name: str) -> UserInfo | None:
        resp = self._request(
            "GET",
            "/users",
            f"find user {name}",
            params={"domain_id": self.domain_id, "name": name},
        )
        found = resp.json()["users"]
        return _user(found[0]) if found else None

    @retried
    def ensure_user(self, name: str, project_id: str, password: str) -> str:
        """The id of user ``name`` with ``password`` and the role on the project.

        An existing user gets its attributes set again and, only if the
        password does not already work, its password reset: a re-run after
        a crash converges on the (re-derived) password without revoking the
        tokens the user holds (Keystone revokes them all on any password
        change, and also refuses tokens issued in the same second).
        """
        if not 0 < len(name) <= USER_NAME_MAX:
            raise ValidationError("name", f"must be 1 to {USER_NAME_MAX} chars")
        if not password:
            raise ValidationError("password", "must not be empty")
        role_id = self._role()
        if self._show("project", project_id) is None:
            raise CloudError(SERVICE, f"project {project_id} not found", status=404)
        attrs = {
            "default_project_id": project_id,
            "enabled": True,
            "options": USER_OPTIONS,
        }
        # created first, looked up on a conflict (a re-run after a crash)
        body = {
            "user": {
                "name": name,
                "domain_id": self.domain_id,
                "password": password,
                **attrs,
            }
        }
        resp = self._request(
            "POST",
            "/users",
            f"create user {name}",
            ok=(201, 409),
            json=body,
            secrets=(password,),
        )
        if resp.status_code == 201:
            user_id = str(resp.json()["user"]["id"])
            LOG.info("Created stack user %s (%s)", name, user_id)
            self._grant(project_id, user_id, role_id)
            return user_id
        # It exists: made by a run before a crash, or by a racing one.
        user = self._find_user(name)
        if user is None:
            raise CloudError(SERVICE, f"user {name} conflicts but is not found")
        # The options first: they keep a failed password check from counting
        # towards a lockout.
        self._request(
            "PATCH", f"/users/{user.id}", f"update user {name}", json={"user": attrs}
        )
        if not self._authenticates(user.id, password, None):
            self._request(
                "PATCH",
                f"/users/{user.id}",
                f"reset the password of user {name}",
                json={"user": {"password": password}},
                secrets=(password,),
            )
            LOG.info("Reset the password of existing stack user %s", name)
        self._grant(project_id, user.id, role_id)
        return user.id

    def _grant(self, project_id: str, user_id: str, role_id: str) -> None:
        self._request(
            "PUT",
            f"/projects/{project_id}/users/{user_id}/roles/{role_id}",
            f"grant role {self.role_name}",
            ok=(204,),
        )

    @retried
    def delete_user(self, user_id: str) -> bool:
        """Delete a user of the domain; False if it was already gone."""
        if self._show("user", user_id) is None:
            return False
        resp = self._request(
            "DELETE", f"/users/{user_id}", "delete user", ok=(204, 404)
        )
        return resp.status_code == 204

    @retried
    def list_users(self, prefix: str = "") -> list[UserInfo]:
        """The domain's users (as :meth:`list_projects` filters them)."""
        resp = self._request(
            "GET", "/users", "list users", params=self._listing(prefix)
        )
        return [_user(u) for u in resp.json()["users"]]

    @retried
    def user_token_works(self, user_id: str, password: str, project_id: str) -> bool:
        """Whether the user can get a token scoped to the project right now."""
        return self._authenticates(user_id, password, project_id)

    def _authenticates(
        self, user_id: str, password: str, project_id: str | None
    ) -> bool:
        auth: dict[str, Any] = {
            "identity": {
                "methods": ["password"],
                "password": {"user": {"id": user_id, "password": password}},
            }
        }
        if project_id is not None:
            auth["scope"] = {"project": {"id": project_id}}
        resp = self._request(
            "POST",
            "/auth/tokens",
            "authenticate stack user",
            ok=(201, 401),
            json={"auth": auth},
            secrets=(password,),
            authenticated=False,
        )
        return resp.status_code == 201

    # -- EC2 credentials --------------------------------------------------

    def create_ec2_credential(self, user_id: str, project_id: str) -> Ec2Credential:
        """A new EC2 keypair for the user, scoped to the project.

        The keypair is chosen before the first attempt, so a retried create
        that meets its own earlier success (409) does not leak a second one.
        """
        access = secrets.token_hex(16)
        secret = secrets.token_hex(20)
        credential_id = self._store_ec2(user_id, project_id, access, secret)
        return Ec2Credential(access=access, secret=secret, credential_id=credential_id)

    @retried
    def _store_ec2(
        self, user_id: str, project_id: str, access: str, secret: str
    ) -> str:
        body = {
            "credential": {
                "type": "ec2",
                "user_id": user_id,
                "project_id": project_id,
                "blob": json.dumps({"access": access, "secret": secret}),
            }
        }
        resp = self._request(
            "POST",
            "/credentials",
            "create EC2 credential",
            ok=(201, 409),
            json=body,
            secrets=(secret,),
        )
        if resp.status_code == 409:
            return ec2_credential_id(access)
        return str(resp.json()["credential"]["id"])

    @retried
    def delete_credential(self, credential_id: str) -> bool:
        resp = self._request(
            "DELETE",
            f"/credentials/{credential_id}",
            "delete credential",
            ok=(204, 404),
        )
        return resp.status_code == 204
