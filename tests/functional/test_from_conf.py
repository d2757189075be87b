"""Swflows configured by a file alone deploys on the dev cloud.

The file is written from ``.devcloud/cloud.json`` as an operator would write
it: swflows' own Keystone user, the stack domain admin, and Swift, Zaqar
and Nova found through the Keystone catalog.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swflows import conf as sw_conf
from swflows import exceptions, states
from swflows.api import Swflows
from tests.functional import flowkit
from tests.functional.fakeserver import FakeServer
from tests.functional.flowkit import leftovers


def from_file(devcloud: dict[str, Any], tmp_path: Path, **kwargs: Any) -> Swflows:
    path = flowkit.write_conf(
        devcloud,
        tmp_path / "swflows.conf",
        database=f"sqlite:///{tmp_path / 'state' / 'swflows.sqlite'}",
        **kwargs,
    )
    assert path.stat().st_mode & 0o077 == 0
    return Swflows.from_conf(sw_conf.get_conf(["--config-file", str(path)]))


@pytest.fixture
def configured(devcloud: dict[str, Any], tmp_path: Path) -> Iterator[Swflows]:
    # the stack user domain by name: its id is looked up on the real Keystone
    sw = from_file(devcloud, tmp_path, stack_domain_by_name=True)
    try:
        yield sw
    finally:
        sw.close()
        sw.store.close()


def test_everything_comes_from_the_file(
    configured: Swflows, devcloud: dict[str, Any], tmp_path: Path
) -> None:
    clients = configured.services.clients
    assert clients.identity_url == devcloud["keystone"]["auth_url"]
    assert clients.stack_users.domain_id == devcloud["keystone"]["stack_user_domain_id"]
    # Zaqar and Nova come from the catalog of the [identity] user's token
    assert clients.messaging.url.rstrip("/") == devcloud["zaqar"]["url"]
    assert clients.compute.server_exists(str(uuid.uuid4())) is False
    # Swift too, with the account of the [identity] user's project
    assert clients.object_store.account_url == devcloud["swift"]["accounts"]["demo"]
    # the store is the [database] connection, its key made beside it
    assert (tmp_path / "state" / "swflows.sqlite").is_file()
    assert (tmp_path / "state" / "secret.key").stat().st_mode & 0o077 == 0


TRANSPORTS = ["TEMP_URL_SIGNAL", "ZAQAR_SIGNAL", "HEAT_SIGNAL"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_deploy_end_to_end(configured: Swflows, transport: str) -> None:
    sw = configured
    config = sw.create_config(
        "app",
        "#!/bin/sh\n",
        group="script",
        inputs=[{"name": "foo"}],
        outputs=[{"name": "result"}],
    )
    server = str(uuid.uuid4())
    with FakeServer(sw, server) as fake:
        dep = sw.deploy(
            server,
            config.id,
            input_values={"foo": "conf"},
            signal_transport=transport,
            timeout=60,
        )
        assert dep.status == states.COMPLETE, dep.status_reason
        assert sw.outputs(dep.id)["result"] == "out-conf"
        sw.undeploy(dep.id)
    assert len(fake.handled) == 1
    assert sw.list_deployments(server_id=server) == []
    assert leftovers(sw, dep.id) == {}


def test_auto_uses_what_the_file_configures(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    """No [object_store]: AUTO skips TEMP_URL_SIGNAL for the next it is offered."""
    sw = from_file(devcloud, tmp_path, services=("messaging",))
    try:
        assert not sw.services.clients.offers("object_store")
        assert not sw.services.clients.offers("compute")
        config = sw.create_config("app", "#!/bin/sh\n", group="script")
        server = str(uuid.uuid4())
        with FakeServer(sw, server):
            dep = sw.deploy(
                server,
                config.id,
                signal_transport="AUTO",
                config_transport="ZAQAR_MESSAGE",
                timeout=60,
            )
        assert dep.status == states.COMPLETE, dep.status_reason
        assert dep.signal_transport == "ZAQAR_SIGNAL"
        with pytest.raises(exceptions.NotSupported, match="object store"):
            sw.deploy(server, config.id, signal_transport="TEMP_URL_SIGNAL")
        sw.undeploy(dep.id)
        assert leftovers(sw, dep.id) == {}
    finally:
        sw.close()
        sw.store.close()
