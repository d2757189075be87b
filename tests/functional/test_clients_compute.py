"""Compute against the dev cloud's Nova stand-in (tokens checked by Keystone).

Servers are put in place through the stand-in's test-only control path and
removed afterwards; every test checks its servers are gone.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from swflows.clients import NO_RETRY, Compute, ServerInfo
from swflows.exceptions import CloudError

Seed = Callable[..., str]


@pytest.fixture(scope="module")
def demo_session(devcloud: dict[str, Any]) -> ks_session.Session:
    ks = devcloud["keystone"]
    return ks_session.Session(auth=v3.Password(auth_url=ks["auth_url"], **ks["demo"]))


@pytest.fixture(scope="module")
def compute(devcloud: dict[str, Any], demo_session: ks_session.Session) -> Compute:
    return Compute.from_session(demo_session, endpoint_override=devcloud["nova"]["url"])


@pytest.fixture
def seed(devcloud: dict[str, Any], demo_session: ks_session.Session) -> Iterator[Seed]:
    """Put a server in place (owned by the demo project unless told)."""
    control = devcloud["nova"]["control_url"]
    made: list[str] = []

    def put(**fields: Any) -> str:
        server_id = str(uuid.uuid4())
        fields.setdefault("tenant_id", demo_session.get_project_id())
        resp = requests.put(f"{control}/servers/{server_id}", json=fields, timeout=30)
        assert resp.status_code == 201, resp.text
        made.append(server_id)
        return server_id

    yield put
    for server_id in made:
        requests.delete(f"{control}/servers/{server_id}", timeout=30)
    for server_id in made:
        assert (
            requests.get(f"{control}/servers/{server_id}", timeout=30).status_code
            == 404
        )


def test_get_server(compute: Compute, seed: Seed) -> None:
    server_id = seed(name="web-1", status="ACTIVE", metadata={"role": "web"})
    assert compute.get_server(server_id) == ServerInfo(
        id=server_id, name="web-1", status="ACTIVE", metadata={"role": "web"}
    )
    assert compute.server_exists(server_id)
    assert compute.server_status(server_id) == "ACTIVE"


def test_status_follows_the_server(
    devcloud: dict[str, Any], compute: Compute, seed: Seed
) -> None:
    server_id = seed(name="db-1", status="BUILD")
    assert compute.server_status(server_id) == "BUILD"
    control = devcloud["nova"]["control_url"]
    requests.put(
        f"{control}/servers/{server_id}", json={"status": "SHUTOFF"}, timeout=30
    )
    assert compute.server_status(server_id) == "SHUTOFF"


def test_missing_server_is_none(
    devcloud: dict[str, Any], compute: Compute, seed: Seed
) -> None:
    unknown = str(uuid.uuid4())
    assert compute.get_server(unknown) is None
    assert not compute.server_exists(unknown)
    assert compute.server_status(unknown) is None

    server_id = seed(name="gone")
    requests.delete(
        f"{devcloud['nova']['control_url']}/servers/{server_id}", timeout=30
    )
    assert compute.get_server(server_id) is None


def test_other_projects_servers_are_not_seen(compute: Compute, seed: Seed) -> None:
    server_id = seed(name="theirs", tenant_id=uuid.uuid4().hex)
    assert compute.get_server(server_id) is None


def test_endpoint_from_the_catalog(
    demo_session: ks_session.Session, seed: Seed
) -> None:
    server_id = seed(name="catalog")
    assert Compute.from_session(demo_session).server_exists(server_id)


def test_keystone_refusal_is_not_a_missing_server(
    devcloud: dict[str, Any], demo_session: ks_session.Session, seed: Seed
) -> None:
    server_id = seed(name="mine")
    ks = devcloud["keystone"]
    bogus = ks_session.Session(
        auth=v3.Token(
            auth_url=ks["auth_url"],
            token="not-a-token",
            project_id=demo_session.get_project_id(),
        )
    )
    bad = Compute.from_session(
        bogus, endpoint_override=devcloud["nova"]["url"], retry=NO_RETRY
    )
    with pytest.raises(CloudError) as caught:
        bad.get_server(server_id)
    assert caught.value.service == "identity" and "not-a-token" not in str(caught.value)


def test_unreachable_nova_is_retryable(demo_session: ks_session.Session) -> None:
    dead = Compute.from_session(
        demo_session, endpoint_override="http://127.0.0.1:9/v2.1", retry=NO_RETRY
    )
    with pytest.raises(CloudError) as caught:
        dead.get_server(str(uuid.uuid4()))
    assert (caught.value.service, caught.value.retryable) == ("compute", True)
