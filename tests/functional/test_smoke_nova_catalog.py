"""The Nova stand-in's flavors, a server's interfaces and its image service
(Glance's v2 API, in the catalog as ``image``): what Heat's
``OS::Nova::Server`` looks up when it boots a server."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import requests
from keystoneauth1 import session as ks_session
from novaclient import client as nova_client
from novaclient import exceptions as nova_exc

CIRROS = "9e2c1c5e-7e0b-4a43-9a53-5d1b3c1c0a11"


@pytest.fixture(scope="module")
def nova(keystone_demo_session: ks_session.Session, devcloud: dict[str, Any]) -> Any:
    return nova_client.Client(
        "2.1",
        session=keystone_demo_session,
        region_name=devcloud["keystone"]["region"],
    )


@pytest.fixture(scope="module")
def image_url(
    keystone_demo_session: ks_session.Session, devcloud: dict[str, Any]
) -> str:
    url = keystone_demo_session.get_endpoint(
        service_type="image",
        interface="public",
        region_name=devcloud["keystone"]["region"],
    )
    assert url is not None, "no image service in the catalog"
    return str(url)


def test_flavors_by_id_and_by_name(nova: Any) -> None:
    tiny = nova.flavors.get("1")
    assert (tiny.name, tiny.ram, tiny.disk, tiny.vcpus) == ("m1.tiny", 512, 1, 1)
    assert nova.flavors.find(name="m1.small").id == "2"
    assert sorted(f.name for f in nova.flavors.list()) == ["m1.small", "m1.tiny"]
    # a name is not an id: Nova answers 404, novaclient's find then lists
    with pytest.raises(nova_exc.NotFound, match=r"m1\.tiny could not be found"):
        nova.flavors.get("m1.tiny")


def test_a_servers_interfaces(nova: Any, devcloud: dict[str, Any]) -> None:
    control = devcloud["nova"]["control_url"]
    sid = str(uuid.uuid4())
    assert requests.put(f"{control}/servers/{sid}", json={}).status_code == 201
    try:
        assert nova.servers.interface_list(sid) == []
    finally:
        requests.delete(f"{control}/servers/{sid}")
    with pytest.raises(nova_exc.NotFound):
        nova.servers.interface_list(sid)


def test_images_by_id_and_by_name(
    keystone_demo_session: ks_session.Session, image_url: str
) -> None:
    def get(path: str) -> Any:
        return keystone_demo_session.get(image_url + path, raise_exc=False)

    shown = get(f"/v2/images/{CIRROS}")
    assert shown.status_code == 200
    image = shown.json()
    assert (image["id"], image["name"], image["status"]) == (CIRROS, "cirros", "active")
    assert set(image) <= set(get("/v2/schemas/image").json()["properties"])
    assert [i["id"] for i in get("/v2/images?name=cirros").json()["images"]] == [CIRROS]
    assert get("/v2/images?name=fedora").json()["images"] == []
    assert get(f"/v2/images/{uuid.uuid4()}").status_code == 404
    # as Glance: a token is needed
    assert requests.get(f"{image_url}/v2/images/{CIRROS}").status_code == 401
