"""The Nova stand-in answers python-novaclient as Nova does."""

import base64
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from keystoneauth1 import session as ks_session
from novaclient import client as nova_client
from novaclient import exceptions as nova_exc


@pytest.fixture(scope="module")
def nova(keystone_demo_session: ks_session.Session) -> Any:
    # No URL given: novaclient finds "compute" in the demo user's catalog.
    return nova_client.Client("2.1", session=keystone_demo_session)


@pytest.fixture
def control(devcloud: dict[str, Any]) -> str:
    return str(devcloud["nova"]["control_url"])


@pytest.fixture
def server_id(control: str) -> Iterator[str]:
    """A server made through the stand-in's control path, with our id."""
    sid = str(uuid.uuid4())
    resp = requests.put(
        f"{control}/servers/{sid}", json={"name": "smoke-server", "status": "ACTIVE"}
    )
    assert resp.status_code == 201
    yield sid
    requests.delete(f"{control}/servers/{sid}")


def test_catalog_points_at_the_stand_in(
    keystone_demo_session: ks_session.Session, nova_url: str
) -> None:
    assert (
        keystone_demo_session.get_endpoint(service_type="compute", interface="public")
        == nova_url
    )


def test_admin_sees_the_demo_tenants_server(
    keystone_admin_session: ks_session.Session, server_id: str
) -> None:
    admin = nova_client.Client("2.1", session=keystone_admin_session)
    assert admin.servers.get(server_id).tenant_id != (
        keystone_admin_session.get_project_id()
    )


def test_get_server_and_unknown_id(nova: Any, server_id: str) -> None:
    server = nova.servers.get(server_id)
    assert (server.id, server.name, server.status) == (
        server_id,
        "smoke-server",
        "ACTIVE",
    )
    with pytest.raises(nova_exc.NotFound):
        nova.servers.get(str(uuid.uuid4()))


def test_metadata_round_trip(nova: Any, server_id: str) -> None:
    nova.servers.set_meta(server_id, {"deployments": "[]", "a": "1"})
    nova.servers.set_meta_item(server_id, "a", "2")
    assert nova.servers.get(server_id).metadata == {"deployments": "[]", "a": "2"}
    nova.servers.delete_meta(server_id, ["a"])
    assert nova.servers.list_meta(server_id)["metadata"] == {"deployments": "[]"}
    with pytest.raises(nova_exc.NotFound):
        nova.servers.get_meta(server_id, "a")


def test_status_flip_through_control_path(
    nova: Any, server_id: str, control: str
) -> None:
    requests.put(
        f"{control}/servers/{server_id}", json={"status": "ERROR"}
    ).raise_for_status()
    assert nova.servers.get(server_id).status == "ERROR"


def test_stop_and_start(nova: Any, server_id: str) -> None:
    nova.servers.stop(server_id)
    assert nova.servers.get(server_id).status == "SHUTOFF"
    with pytest.raises(nova_exc.Conflict):
        nova.servers.stop(server_id)
    nova.servers.start(server_id)
    assert nova.servers.get(server_id).status == "ACTIVE"


def test_create_keeps_user_data_and_delete(nova: Any, control: str) -> None:
    server = nova.servers.create(
        "smoke-created",
        image="image-1",
        flavor="1",
        userdata="#!/bin/sh\necho hi\n",
        meta={"k": "v"},
    )
    try:
        stored = requests.get(f"{control}/servers/{server.id}").json()
        assert (
            base64.b64decode(stored["server"]["user_data"]) == b"#!/bin/sh\necho hi\n"
        )
        assert nova.servers.get(server.id).metadata == {"k": "v"}
        assert server.id in [s.id for s in nova.servers.list()]
    finally:
        nova.servers.delete(server.id)
    with pytest.raises(nova_exc.NotFound):
        nova.servers.get(server.id)


def test_refusals(
    nova_url: str,
    keystone_demo_session: ks_session.Session,
    stack_domain_admin: ks_session.Session,
    server_id: str,
) -> None:
    url = f"{nova_url}/servers/{server_id}"
    assert requests.get(url).status_code == 401
    assert requests.get(url, headers={"X-Auth-Token": "bogus"}).status_code == 401
    # Tokens are checked with Keystone: a domain-scoped one has no project.
    domain_token = stack_domain_admin.get_token()
    assert requests.get(url, headers={"X-Auth-Token": domain_token}).status_code == 403
    token = keystone_demo_session.get_token()
    resp = requests.get(
        url, headers={"X-Auth-Token": token, "X-OpenStack-Nova-API-Version": "2.1"}
    )
    assert resp.status_code == 200
    assert resp.headers["X-OpenStack-Nova-API-Version"] == "2.1"
    resp = requests.get(
        url, headers={"X-Auth-Token": token, "X-OpenStack-Nova-API-Version": "2.99"}
    )
    assert resp.status_code == 406
