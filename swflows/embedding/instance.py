"""A :class:`~swflows.api.Swflows` built from what an embedder already has.

An embedder (Heat, Mistral, another orchestrator) has its own Keystone
identity (a keystoneauth1 session, possibly trust-scoped) and its own
database.  :func:`from_session` builds swflows on those instead of on a
configuration file: the cloud clients use the session and its catalog,
and the store is either a database URL of swflows' own or the embedder's
SQLAlchemy engine, with every swflows table under ``table_prefix``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, Final

from swflows import conf as swconf
from swflows import exceptions
from swflows.api import Swflows
from swflows.clients.cloud import Clients

if TYPE_CHECKING:
    import sqlalchemy as sa
    from keystoneauth1 import session as ksa_session
    from oslo_config import cfg

    from swflows.clients.compute import Compute
    from swflows.clients.identity import StackUsers
    from swflows.clients.messaging import Messaging
    from swflows.clients.object_store import ObjectStore

#: the services an embedder's session reaches through its catalog by default
SESSION_SERVICES: Final = ("object_store", "messaging", "compute")


def _auth_url(session: ksa_session.Session) -> str | None:
    url = getattr(session.auth, "auth_url", None)
    return str(url) if url else None


def session_clients(
    session: ksa_session.Session,
    *,
    services: Collection[str] = SESSION_SERVICES,
    endpoint_overrides: Mapping[str, str] | None = None,
    interface: str = "public",
    region_name: str | None = None,
    stack_domain_session: ksa_session.Session | None = None,
    stack_user_domain_id: str | None = None,
    stack_user_role: str = "heat_stack_user",
    identity_url: str | None = None,
    key_seed: bytes | None = None,
) -> Clients:
    """Cloud clients acting with ``session`` (the embedder's identity).

    ``services`` names the services swflows may use (``object_store``,
    ``messaging``, ``compute``); each is found in the session's catalog
    unless ``endpoint_overrides`` gives its URL.  Stack users (HEAT_SIGNAL,
    CFN_SIGNAL and Zaqar credentials mode) need ``stack_domain_session``,
    a session of the stack domain's admin scoped to that domain, and
    ``stack_user_domain_id``.  ``identity_url`` is the Keystone URL agents
    log in at; by default the session's own ``auth_url``.  ``key_seed``
    (:func:`from_session` passes its ``secret_key``): a Swift account found
    without a TempURL key gets one derived from it, the same in every
    process of the installation.
    """
    unknown = sorted(set(services) - set(SESSION_SERVICES))
    if unknown:
        raise exceptions.ValidationError(
            "services", f"unknown service(s) {', '.join(unknown)}"
        )
    overrides = dict(endpoint_overrides or {})
    wrong = sorted(set(overrides) - set(SESSION_SERVICES))
    if wrong:
        raise exceptions.ValidationError(
            "endpoint_overrides", f"unknown service(s) {', '.join(wrong)}"
        )
    if (stack_domain_session is None) != (stack_user_domain_id is None):
        raise exceptions.ValidationError(
            "stack_domain_session",
            "stack users need both stack_domain_session and stack_user_domain_id",
        )
    auth_url = identity_url or _auth_url(session)

    def object_store() -> ObjectStore:
        from swflows.clients.object_store import ObjectStore

        return ObjectStore.from_session(
            session,
            endpoint_override=overrides.get("object_store"),
            region_name=region_name,
            interface=interface,
            key_seed=key_seed,
        )

    def messaging() -> Messaging:
        from swflows.clients.messaging import Messaging

        return Messaging.from_session(
            session,
            url=overrides.get("messaging"),
            interface=interface,
            region_name=region_name,
        )

    def compute() -> Compute:
        from swflows.clients.compute import Compute

        return Compute.from_session(
            session,
            endpoint_override=overrides.get("compute"),
            interface=interface,
            region_name=region_name,
        )

    def stack_users() -> StackUsers:
        from swflows.clients.identity import StackUsers

        assert stack_domain_session is not None and stack_user_domain_id is not None
        return StackUsers(
            stack_domain_session,
            stack_user_domain_id,
            role_name=stack_user_role,
            interface=interface,
            region_name=region_name,
        )

    return Clients(
        object_store=object_store if "object_store" in services else None,
        messaging=messaging if "messaging" in services else None,
        compute=compute if "compute" in services else None,
        stack_users=stack_users if stack_domain_session is not None else None,
        identity_url=auth_url,
    )


def from_session(
    session: ksa_session.Session,
    database_url: str | None = None,
    *,
    engine: sa.Engine | None = None,
    table_prefix: str = "swflows_",
    secret_key: bytes | str | None = None,
    conf: cfg.ConfigOpts | None = None,
    start: bool = True,
    **clients: Any,
) -> Swflows:
    """A running :class:`~swflows.api.Swflows` on the embedder's identity
    and database.

    The store is ``database_url`` (swflows' own database), or ``engine``
    (the embedder's SQLAlchemy engine: swflows creates its tables there,
    named ``<table_prefix>...``, plus TaskFlow's logbook tables, and never
    disposes of the engine).  A server database needs ``secret_key``, the
    Fernet key encrypting secrets at rest, the same on every host.
    ``conf`` carries swflows' other options (timeouts, transports, runner,
    the ``[database]`` pool's limits for ``database_url``); by default
    every option has its default.  With ``start=False`` no
    runner starts until a flow is started from this instance (a process
    that only reads, or serves an API).  ``clients`` are passed to
    :func:`session_clients`.  Close the instance with ``close()``.
    """
    from swflows.persistence.database import PoolLimits
    from swflows.persistence.store import Store

    if database_url is not None and engine is not None:
        raise exceptions.ValidationError(
            "engine", "give database_url or engine, not both"
        )
    options = conf if conf is not None else swconf.get_conf()
    if secret_key is not None:
        seed = secret_key.encode() if isinstance(secret_key, str) else secret_key
        clients.setdefault("key_seed", seed)
    made_clients = session_clients(session, **clients)
    store = Store(
        database_url,
        table_prefix=table_prefix,
        secret_key=secret_key,
        engine=engine,
        pool_limits=PoolLimits.from_conf(options),
    )
    try:
        instance = Swflows(store, made_clients, options, start=start)
    except BaseException:
        store.close()
        raise
    # the store opened here is closed with the instance (as from_conf does)
    instance._owns_store = True
    return instance


__all__ = ["SESSION_SERVICES", "from_session", "session_clients"]
