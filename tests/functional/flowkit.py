"""Build a :class:`swflows.api.Swflows` on the dev cloud, and count leftovers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from swflows import conf as sw_conf
from swflows.api import Swflows
from swflows.clients.compute import Compute
from swflows.clients.identity import StackUsers
from swflows.clients.messaging import Messaging
from swflows.clients.object_store import ObjectStore
from swflows.persistence.store import Store
from swflows.services import Clients
from swflows.transports.base import StackUser


def password_session(auth_url: str, creds: dict[str, Any]) -> ks_session.Session:
    return ks_session.Session(auth=v3.Password(auth_url=auth_url, **creds))


def make_clients(cloud: dict[str, Any]) -> Clients:
    ks = cloud["keystone"]
    auth_url = ks["auth_url"]
    demo = password_session(auth_url, ks["demo"])

    def messaging_for(user: StackUser, password: str) -> Messaging:
        session = ks_session.Session(
            auth=v3.Password(
                auth_url=auth_url,
                user_id=user.user_id,
                password=password,
                project_id=user.project_id,
            )
        )
        return Messaging.from_session(session, url=cloud["zaqar"]["url"])

    return Clients(
        object_store=lambda: ObjectStore.from_tempauth(
            cloud["swift"]["auth_url"], cloud["swift"]["user"], cloud["swift"]["key"]
        ),
        messaging=lambda: Messaging.from_session(demo, url=cloud["zaqar"]["url"]),
        stack_users=lambda: StackUsers.from_password(
            auth_url,
            domain_id=ks["stack_user_domain_id"],
            username=ks["stack_domain_admin"],
            password=ks["stack_domain_admin_password"],
            role_name=ks["stack_user_role"],
        ),
        compute=lambda: Compute.from_session(demo),
        messaging_for=messaging_for,
        identity_url=auth_url,
    )


def make_conf(**overrides: Any) -> Any:
    conf = sw_conf.get_conf()
    conf.set_override("poll_interval", 0.1, "watcher")
    conf.set_override("max_poll_interval", 0.5, "watcher")
    for name, value in overrides.items():
        conf.set_override(name, value)
    return conf


@pytest.fixture
def sw(devcloud: dict[str, Any], tmp_path: Path) -> Iterator[Swflows]:
    store = Store(f"sqlite:///{tmp_path / 'swflows.sqlite'}")
    instance = Swflows(store, make_clients(devcloud), make_conf())
    try:
        yield instance
    finally:
        instance.close()
        store.close()


def leftovers(sw: Swflows, *deployment_ids: str) -> dict[str, list[str]]:
    """What the real servers still hold for these deployments.

    Names swflows makes carry the deployment id (stack user and project
    ``swflows-<id>``, signal objects ``<id>/<generation>``, queues
    ``sws-<id>-<generation>``), so tests running in parallel never see one
    another's resources.
    """
    clients = sw.services.clients
    swift = clients.object_store
    found: dict[str, list[str]] = {}

    def mine(name: str) -> bool:
        return any(d in name for d in deployment_ids)

    found["users"] = [u.name for u in clients.stack_users.list_users() if mine(u.name)]
    found["projects"] = [
        p.name for p in clients.stack_users.list_projects() if mine(p.name)
    ]
    found["objects"] = [
        f"{container}/{o.name}"
        for container in swift.list_containers()
        for o in swift.list_objects(container)
        if mine(o.name)
    ]
    found["queues"] = [q for q in clients.messaging.list_queues() if mine(q)]
    return {kind: names for kind, names in found.items() if names}
