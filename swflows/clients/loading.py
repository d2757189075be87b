"""Cloud clients built from oslo.config options, through keystoneauth1 loading.

Each client group (``[identity]``, ``[object_store]``, ``[messaging]``,
``[compute]``) carries keystoneauth1's session options (TLS, timeout) and
auth options (``auth_type`` and the plugin's own, or ``auth_section``
naming another group to borrow them from).  A group without auth leaves
its service out: :meth:`~swflows.clients.cloud.Clients.offers` then says no, and
using it raises :class:`~swflows.exceptions.NotSupported` naming it.

* ``[identity]``: swflows' Keystone.  Its ``endpoint_override``, else its
  auth plugin's ``auth_url``, is where stack users log in (the URL agents
  are given); its session options also apply to the stack domain admin's.
* ``[stack_user]``: the stack domain admin; stack users are offered when
  ``stack_domain_admin`` is set.
* ``[object_store]``: ``auth_version = v1`` logs in with Swift's own v1
  auth (tempauth) from ``v1_auth_url``/``v1_user``/``v1_key``, which
  keystoneauth1 cannot load; else the group's keystoneauth1 session.
* ``[messaging]`` and ``[compute]``: the group's session; endpoints come
  from ``endpoint_override`` or the catalog.
* ``[trustee]``: with ``deferred_auth_method = trusts``, swflows' own user
  that callers' trusts delegate to; clients acting through a trust log in
  as it, scoped by the trust, with each group's session options and
  endpoint (Swift's always from the catalog: it names the trustor's account).
  Clients acting as a request's caller (its token, scoped to its project)
  are built the same way.

Options are read and auth plugins loaded when the clients are built, so a
bad configuration fails at once; the services themselves are only reached
when a client is first used.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import threading
from collections.abc import Callable
from typing import Any, Final

from keystoneauth1 import exceptions as ksa_exc
from keystoneauth1 import loading
from keystoneauth1.identity import v3
from oslo_config import cfg

from swflows import conf as swconf
from swflows import exceptions
from swflows.clients.compute import Compute
from swflows.clients.identity import StackUser, StackUsers
from swflows.clients.messaging import Messaging
from swflows.clients.object_store import ObjectStore
from swflows.clients.trustee import Trustee

#: session timeout (seconds) when a group sets none: never wait forever
DEFAULT_TIMEOUT: Final = 30.0
#: stack-user messaging clients kept for reuse (one per waiting deployment)
STACK_USER_CLIENTS: Final = 256


@dataclasses.dataclass(frozen=True)
class _Endpoint:
    """Where a group's service is found: its catalog filters or override."""

    interface: str
    region_name: str | None
    endpoint_override: str | None

    @classmethod
    def of(cls, conf: cfg.ConfigOpts, group: str) -> _Endpoint:
        section = conf[group]
        return cls(
            interface=section.interface,
            region_name=section.region_name or None,
            endpoint_override=section.endpoint_override or None,
        )


def _invalid(group: str, option: str, reason: str) -> exceptions.ValidationError:
    return exceptions.ValidationError(f"[{group}] {option}", reason)


def load_auth(conf: cfg.ConfigOpts, group: str) -> Any | None:
    """The group's keystoneauth1 auth plugin; None when it configures none.

    Errors name the options to fix, never their values.
    """
    try:
        return loading.load_auth_from_conf_options(conf, group)
    except ksa_exc.NoMatchingPlugin as exc:
        raise _invalid(group, "auth_type", f"no auth plugin {exc.name!r}") from None
    except ksa_exc.MissingRequiredOptions as exc:
        missing = ", ".join(sorted(o.dest for o in exc.options))
        raise _invalid(group, "auth_type", f"the plugin needs {missing}") from None
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError) as exc:
        raise _invalid(
            group, "auth_section", f"names no group with auth options ({exc})"
        ) from None


def load_session(conf: cfg.ConfigOpts, group: str, auth: Any) -> Any:
    """A keystoneauth1 session with the group's session options and ``auth``."""
    timeout = conf[group].timeout
    return loading.load_session_from_conf_options(
        conf, group, auth=auth, timeout=timeout if timeout else DEFAULT_TIMEOUT
    )


def identity_url(conf: cfg.ConfigOpts) -> str | None:
    """The Keystone URL stack users log in at, None when none is configured."""
    override: str | None = conf.identity.endpoint_override
    if override:
        return override
    auth = load_auth(conf, "identity")
    url = getattr(auth, "auth_url", None)
    return str(url) if url else None


def _object_store(conf: cfg.ConfigOpts) -> Callable[[], ObjectStore] | None:
    group = conf.object_store
    if group.auth_version == "v1":
        missing = [
            name for name in ("v1_auth_url", "v1_user", "v1_key") if not group[name]
        ]
        if missing:
            raise _invalid(
                "object_store", "auth_version", f"v1 needs {', '.join(missing)}"
            )
        timeout = float(group.timeout or DEFAULT_TIMEOUT)
        url, user, key = group.v1_auth_url, group.v1_user, group.v1_key
        return lambda: ObjectStore.from_tempauth(url, user, key, timeout=timeout)
    auth = load_auth(conf, "object_store")
    if auth is None:
        return None
    where = _Endpoint.of(conf, "object_store")
    timeout = float(group.timeout or DEFAULT_TIMEOUT)
    return lambda: ObjectStore.from_session(
        load_session(conf, "object_store", auth),
        endpoint_override=where.endpoint_override,
        region_name=where.region_name,
        interface=where.interface,
        timeout=timeout,
    )


def _messaging(conf: cfg.ConfigOpts) -> Callable[[], Messaging] | None:
    auth = load_auth(conf, "messaging")
    if auth is None:
        return None
    where = _Endpoint.of(conf, "messaging")
    return lambda: Messaging.from_session(
        load_session(conf, "messaging", auth),
        url=where.endpoint_override,
        interface=where.interface,
        region_name=where.region_name,
    )


def _messaging_for(
    conf: cfg.ConfigOpts, auth_url: str | None
) -> Callable[[StackUser, str], Messaging] | None:
    """Zaqar as a stack user (ZAQAR_SIGNAL's credentials mode).

    Clients are kept (the latest :data:`STACK_USER_CLIENTS`), so polling a
    queue reuses the user's token instead of logging in at every look.
    """
    if auth_url is None or load_auth(conf, "messaging") is None:
        return None
    where = _Endpoint.of(conf, "messaging")
    kept: collections.OrderedDict[tuple[str, str, str], Messaging] = (
        collections.OrderedDict()
    )
    lock = threading.Lock()

    def build(user: StackUser, password: str) -> Messaging:
        auth = v3.Password(
            auth_url=auth_url,
            user_id=user.user_id,
            password=password,
            project_id=user.project_id,
        )
        return Messaging.from_session(
            load_session(conf, "messaging", auth),
            url=where.endpoint_override,
            interface=where.interface,
            region_name=where.region_name,
        )

    def get(user: StackUser, password: str) -> Messaging:
        digest = hashlib.sha256(password.encode()).hexdigest()
        key = (user.user_id, user.project_id, digest)
        with lock:
            if key in kept:
                kept.move_to_end(key)
                return kept[key]
        client = build(user, password)
        with lock:
            kept[key] = client
            while len(kept) > STACK_USER_CLIENTS:
                kept.popitem(last=False)
        return client

    return get


def _stack_users(
    conf: cfg.ConfigOpts, auth_url: str | None
) -> Callable[[], StackUsers] | None:
    group = conf.stack_user
    admin: str | None = group.stack_domain_admin
    if not admin:
        return None
    if not group.stack_domain_admin_password:
        raise _invalid(
            "stack_user",
            "stack_domain_admin_password",
            "is needed with stack_domain_admin",
        )
    domain_id: str | None = group.stack_user_domain_id
    domain_name: str | None = group.stack_user_domain_name
    if not (domain_id or domain_name):
        raise _invalid(
            "stack_user",
            "stack_user_domain_id",
            "or stack_user_domain_name is needed with stack_domain_admin",
        )
    if auth_url is None:
        raise _invalid(
            "identity",
            "auth_url",
            "(or endpoint_override) is needed to log stack users in",
        )
    password: str = group.stack_domain_admin_password
    role: str = group.stack_user_role
    where = _Endpoint.of(conf, "identity")

    def build() -> StackUsers:
        # the admin belongs to the stack domain and acts on it alone
        scope = (
            {"user_domain_id": domain_id, "domain_id": domain_id}
            if domain_id
            else {"user_domain_name": domain_name, "domain_name": domain_name}
        )
        auth = v3.Password(
            auth_url=auth_url, username=admin, password=password, **scope
        )
        session = load_session(conf, "identity", auth)
        resolved = domain_id or str(auth.get_access(session).domain_id)
        return StackUsers(
            session,
            resolved,
            role_name=role,
            interface=where.interface,
            region_name=where.region_name,
            endpoint_override=where.endpoint_override,
        )

    return build


def _compute(conf: cfg.ConfigOpts) -> Callable[[], Compute] | None:
    auth = load_auth(conf, "compute")
    if auth is None:
        return None
    where = _Endpoint.of(conf, "compute")
    return lambda: Compute.from_session(
        load_session(conf, "compute", auth),
        endpoint_override=where.endpoint_override,
        interface=where.interface,
        region_name=where.region_name,
    )


def _trustee(conf: cfg.ConfigOpts, auth_url: str | None) -> Trustee | None:
    """swflows' own user callers delegate to (None unless trusts are on)."""
    if conf.deferred_auth_method != swconf.DEFERRED_TRUSTS:
        return None
    group = swconf.TRUSTEE_GROUP
    auth = load_auth(conf, group)
    if auth is None:
        raise _invalid(
            group, "auth_type", "is needed with deferred_auth_method = trusts"
        )
    url = getattr(auth, "auth_url", None) or auth_url
    if not url:
        raise _invalid(group, "auth_url", "is needed to make trusts")

    def auth_for(trust_id: str | None) -> Any:
        if trust_id is None:
            return auth
        return loading.load_auth_from_conf_options(conf, group, trust_id=trust_id)

    return Trustee(
        str(url),
        auth_for,
        lambda login: load_session(conf, group, login),
        roles=conf.trusts_delegated_roles,
    )


def _acting(
    conf: cfg.ConfigOpts,
) -> Callable[[Any], dict[str, Callable[[], Any] | None]]:
    """Factories of the clients acting with a login other than swflows'
    own (the trustee's through a trust, a caller's token), for each
    service swflows' own clients offer (Swift only through Keystone)."""
    offered = {
        "object_store": conf.object_store.auth_version != "v1"
        and load_auth(conf, "object_store") is not None,
        "messaging": load_auth(conf, "messaging") is not None,
        "compute": load_auth(conf, "compute") is not None,
    }
    swift = _Endpoint.of(conf, "object_store")
    zaqar = _Endpoint.of(conf, "messaging")
    nova = _Endpoint.of(conf, "compute")

    def build(login: Any) -> dict[str, Callable[[], Any] | None]:
        # one login, so one token, for the three services
        def object_store() -> ObjectStore:
            return ObjectStore.from_session(
                load_session(conf, "object_store", login),
                region_name=swift.region_name,
                interface=swift.interface,
                timeout=float(conf.object_store.timeout or DEFAULT_TIMEOUT),
            )

        def messaging() -> Messaging:
            return Messaging.from_session(
                load_session(conf, "messaging", login),
                url=zaqar.endpoint_override,
                interface=zaqar.interface,
                region_name=zaqar.region_name,
            )

        def compute() -> Compute:
            return Compute.from_session(
                load_session(conf, "compute", login),
                endpoint_override=nova.endpoint_override,
                interface=nova.interface,
                region_name=nova.region_name,
            )

        made: dict[str, Callable[[], Any]] = {
            "object_store": object_store,
            "messaging": messaging,
            "compute": compute,
        }
        return {name: made[name] if offered[name] else None for name in made}

    return build


def client_factories(conf: cfg.ConfigOpts) -> dict[str, Any]:
    """The arguments of :class:`~swflows.clients.cloud.Clients` for every
    client ``conf`` configures; see the module's description."""
    if "identity" not in conf:
        swconf.register_opts(conf)
    auth_url = identity_url(conf)
    return {
        "object_store": _object_store(conf),
        "messaging": _messaging(conf),
        "stack_users": _stack_users(conf, auth_url),
        "compute": _compute(conf),
        "messaging_for": _messaging_for(conf, auth_url),
        "identity_url": auth_url,
        "trustee": _trustee(conf, auth_url),
        "acting": _acting(conf),
    }


__all__ = [
    "DEFAULT_TIMEOUT",
    "client_factories",
    "identity_url",
    "load_auth",
    "load_session",
]
