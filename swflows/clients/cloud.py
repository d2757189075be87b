"""The cloud's adapters, each built on first use (see :class:`Clients`)."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from swflows import exceptions

if TYPE_CHECKING:
    from oslo_config import cfg

    from swflows.clients.compute import Compute
    from swflows.clients.identity import StackUser, StackUsers
    from swflows.clients.messaging import Messaging
    from swflows.clients.object_store import ObjectStore
    from swflows.clients.trustee import Trustee

#: trust-scoped clients kept for reuse (one per deployment with a trust)
TRUSTED_CLIENTS = 256


class Clients:
    """Cloud adapters, each built on first use from a factory.

    A missing factory means the cloud does not offer that service here; the
    error then names the service instead of failing deep inside a task.
    """

    def __init__(
        self,
        *,
        object_store: Callable[[], ObjectStore] | None = None,
        messaging: Callable[[], Messaging] | None = None,
        stack_users: Callable[[], StackUsers] | None = None,
        compute: Callable[[], Compute] | None = None,
        messaging_for: Callable[[StackUser, str], Messaging] | None = None,
        identity_url: str | None = None,
        trustee: Trustee | None = None,
        acting: Callable[[Any], dict[str, Callable[[], Any] | None]] | None = None,
    ) -> None:
        self._factories: dict[str, Callable[[], Any] | None] = {
            "object_store": object_store,
            "messaging": messaging,
            "stack_users": stack_users,
            "compute": compute,
        }
        self._built: dict[str, Any] = {}
        self._messaging_for = messaging_for
        self._lock = threading.Lock()
        #: the Keystone URL agents authenticate against (``deploy_auth_url``)
        self.identity_url = identity_url
        #: swflows' own user callers delegate to (None: no trusts are made)
        self.trustee = trustee
        #: a login -> the factories of the clients acting with it
        self._acting = acting
        self._by_trust: collections.OrderedDict[str, Clients] = (
            collections.OrderedDict()
        )

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts) -> Clients:
        """The clients ``conf``'s client groups and ``[stack_user]`` configure.

        Built with keystoneauth1's loading (see :mod:`swflows.clients.loading`);
        a service whose group has no auth is not offered.
        """
        from swflows.clients import loading

        return cls(**loading.client_factories(conf))

    def for_trust(self, trust_id: str) -> Clients:
        """Clients acting through ``trust_id`` (as its trustor, on its
        project) for the object store, messaging and compute; stack users
        and the identity URL are these clients' own.  Kept for reuse."""
        trustee = self._needs_trustee("act through a trust")
        with self._lock:
            if trust_id in self._by_trust:
                self._by_trust.move_to_end(trust_id)
                return self._by_trust[trust_id]
        made = self._logged_in(trustee.login(trust_id))
        with self._lock:
            self._by_trust[trust_id] = made
            while len(self._by_trust) > TRUSTED_CLIENTS:
                self._by_trust.popitem(last=False)
        return made

    def for_caller(self, token: str, project_id: str) -> Clients:
        """Clients acting as a request's caller, with its ``token`` scoped
        to ``project_id``, for the object store, messaging and compute (as
        :meth:`for_trust`); for that request only: never kept."""
        trustee = self._needs_trustee("act as a caller")
        return self._logged_in(trustee.caller_login(token, project_id))

    def _needs_trustee(self, what: str) -> Trustee:
        if self.trustee is None or self._acting is None:
            raise exceptions.NotSupported(f"no [trustee] is configured to {what}")
        return self.trustee

    def _logged_in(self, login: Any) -> Clients:
        """Clients acting with ``login``; the rest are these clients' own."""
        assert self._acting is not None
        factories = self._acting(login)
        return Clients(
            object_store=factories.get("object_store"),
            messaging=factories.get("messaging"),
            compute=factories.get("compute"),
            stack_users=(lambda: self.stack_users)
            if self.offers("stack_users")
            else None,
            messaging_for=self._messaging_for,
            identity_url=self.identity_url,
            trustee=self.trustee,
        )

    def forget_trust(self, trust_id: str) -> None:
        """Drop the clients kept for a trust that was deleted."""
        with self._lock:
            self._by_trust.pop(trust_id, None)

    def offers(self, name: str) -> bool:
        return self._factories.get(name) is not None

    def _get(self, name: str) -> Any:
        with self._lock:
            if name not in self._built:
                factory = self._factories.get(name)
                if factory is None:
                    raise exceptions.NotSupported(
                        f"no {name.replace('_', ' ')} service is configured"
                    )
                self._built[name] = factory()
            return self._built[name]

    @property
    def object_store(self) -> ObjectStore:
        return self._get("object_store")  # type: ignore[no-any-return]

    @property
    def messaging(self) -> Messaging:
        return self._get("messaging")  # type: ignore[no-any-return]

    @property
    def stack_users(self) -> StackUsers:
        return self._get("stack_users")  # type: ignore[no-any-return]

    def messaging_for(self, user: StackUser, password: str) -> Messaging:
        """A messaging client acting as a stack user (Zaqar credentials mode)."""
        if self._messaging_for is None:
            raise exceptions.NotSupported(
                "no messaging service for stack users is configured"
            )
        return self._messaging_for(user, password)

    @property
    def compute(self) -> Compute:
        return self._get("compute")  # type: ignore[no-any-return]
