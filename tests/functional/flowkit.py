"""Build a :class:`swflows.api.Swflows` on the dev cloud, and count leftovers."""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from swflows import conf as sw_conf
from swflows.api import Swflows

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from devcloud_lib import keystone as keystone  # also for the tests
from devcloud_lib import swflowsconf as swflowsconf  # also for the tests

#: the service groups :func:`conf_text` may leave out
CLOUD_SERVICES = swflowsconf.CLOUD_SERVICES


#: the tests' watcher looks every 0.2 s: signals land at once for a test,
#: while a parked deployment's looks (a Swift listing, a Zaqar claim each)
#: cost the shared dev cloud half what the shortest interval (0.1) does
POLL_INTERVAL = 0.2
#: the cap of its backoff from a failing service
MAX_POLL_INTERVAL = 0.5


def conf_text(
    cloud: dict[str, Any],
    *,
    database: str | None = None,
    stack_domain_by_name: bool = False,
    services: tuple[str, ...] = CLOUD_SERVICES,
    poll_interval: float = POLL_INTERVAL,
) -> str:
    """The dev cloud's swflows configuration (``tools/devcloud_lib``), with a
    watcher that polls every :data:`POLL_INTERVAL` so tests do not wait for it."""
    return str(
        swflowsconf.conf_text(
            cloud,
            database=database,
            stack_domain_by_name=stack_domain_by_name,
            services=services,
            extra={
                "watcher": [
                    f"poll_interval = {poll_interval}",
                    f"max_poll_interval = {MAX_POLL_INTERVAL}",
                ]
            },
        )
    )


def write_conf(cloud: dict[str, Any], path: Path, **kwargs: Any) -> Path:
    """Write :func:`conf_text` to ``path``, readable by its owner only."""
    path.touch(mode=0o600)
    path.write_text(conf_text(cloud, **kwargs))
    return path


@pytest.fixture
def sw(devcloud: dict[str, Any], tmp_path: Path) -> Iterator[Swflows]:
    """A Swflows built from a configuration file alone, its store in tmp_path."""
    path = write_conf(
        devcloud,
        tmp_path / "swflows.conf",
        database=f"sqlite:///{tmp_path / 'swflows.sqlite'}",
    )
    instance = Swflows.from_conf(sw_conf.get_conf(config_files=[str(path)]))
    try:
        yield instance
    finally:
        instance.close()
        instance.store.close()


def leftovers(sw: Swflows, *deployment_ids: str) -> dict[str, list[str]]:
    """What the real servers still hold for these deployments.

    Names swflows makes carry the deployment id (stack user and project
    ``swflows-<id>``, signal objects ``<id>/<generation>``, queues
    ``sws-<id>-<generation>``), so tests running in parallel never see one
    another's resources.  Queues are counted in every project, stack users'
    included.
    """
    clients = sw.services.clients
    found: dict[str, list[str]] = {}

    def mine(name: str) -> bool:
        return any(d in name for d in deployment_ids)

    if clients.offers("stack_users"):
        users = clients.stack_users
        found["users"] = [u.name for u in users.list_users() if mine(u.name)]
        found["projects"] = [p.name for p in users.list_projects() if mine(p.name)]
    if clients.offers("object_store"):
        swift = clients.object_store
        found["objects"] = [
            f"{container}/{o.name}"
            for container in swift.list_containers()
            for o in swift.list_objects(container)
            if mine(o.name)
        ]
    found["queues"] = zaqar_queues(*deployment_ids)  # in every project
    return {kind: names for kind, names in found.items() if names}


#: Zaqar's queue catalogue (its management store) in the dev cloud
ZAQAR_CATALOGUE = (
    Path(__file__).resolve().parents[2]
    / ".devcloud"
    / "state"
    / "zaqar"
    / "zaqar-management.db"
)


def zaqar_queues(*fragments: str) -> list[str]:
    """``project/queue`` of every Zaqar queue whose name holds a fragment.

    Read from Zaqar's own catalogue, so queues of any project are seen,
    even those of a stack user that no longer exists (the API only lists
    the caller's project).
    """
    assert ZAQAR_CATALOGUE.is_file(), f"no Zaqar catalogue at {ZAQAR_CATALOGUE}"
    with contextlib.closing(
        sqlite3.connect(f"file:{ZAQAR_CATALOGUE}?mode=ro", uri=True, timeout=30)
    ) as db:
        rows = db.execute('SELECT project, name FROM "Queues"').fetchall()
    return sorted(
        f"{project}/{name}"
        for project, name in rows
        if any(fragment in name for fragment in fragments)
    )


class ServiceApi:
    """An OpenStack service's API as the dev cloud's demo user, found in
    the catalog by ``service_type`` (keystoneauth only, no service client)."""

    service_type = ""

    def __init__(self, cloud: dict[str, Any]) -> None:
        ks = cloud["keystone"]
        self.session = ks_session.Session(
            auth=v3.Password(auth_url=ks["auth_url"], **ks["demo"])
        )
        self.filter = {"service_type": self.service_type, "interface": "public"}

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer (None when there is no body); an error status
        fails the test with the service's answer."""
        resp = self.session.request(
            path, method, endpoint_filter=self.filter, raise_exc=False, **kwargs
        )
        if resp.status_code >= 400:
            raise AssertionError(f"{method} {path}: {resp.status_code} {resp.text}")
        try:
            return resp.json()
        except ValueError:
            return None  # 202 Accepted or 204 No Content
