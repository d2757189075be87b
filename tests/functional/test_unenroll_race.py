"""Unenrolling while publishes are in flight, on PostgreSQL and the dev cloud.

``undeploy(wait=False)`` of a server's deployments removes their rows, then
each flow publishes the server's metadata without its deployment.  A caller
that unenrolls the server as soon as the rows are gone races those
publishes: one that lands after the channel was removed must not bring the
Swift object (readable until 2038 through its TempURL) or the Zaqar queue
back.  The metadata sweep removes channels no server of the store owns.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swflows import exceptions
from swflows import transport_names as names
from swflows.api import Swflows
from swflows.transports import impl_zaqar_message
from tests.functional.db_fixtures import SECRET_KEY, pg_url, unique_prefix
from tests.functional.flowkit import zaqar_queues
from tests.functional.test_agent import isolated, script_config
from tests.functional.test_runner import until

__all__ = ["pg_url"]  # the fixture, used by name

#: rounds of deploy, undeploy(wait=False), unenroll per transport
ROUNDS = 4
#: deployments per server: each undeploy publishes once its row is gone
DEPLOYMENTS = 4
WAIT = 90
TRANSPORTS = (names.POLL_TEMP_URL, names.ZAQAR_MESSAGE)


@contextlib.contextmanager
def own_container(
    cloud: dict[str, Any], folder: Path, url: str | None = None
) -> Iterator[Swflows]:
    """A swflows with a metadata container of its own, on the session's
    PostgreSQL database (tables of its own) or, without ``url``, a SQLite
    file."""
    container = f"swflows-race-{uuid.uuid4().hex[:12]}"
    database = (
        {
            "database__connection": url,
            "database__table_prefix": unique_prefix(),
            "database__secret_key": SECRET_KEY.decode(),
        }
        if url
        else {}
    )
    with isolated(cloud, folder, metadata_container=container, **database) as made:
        try:
            yield made
        finally:
            made.services.clients.object_store.delete_container(container, force=True)


@pytest.fixture
def sw(devcloud: dict[str, Any], tmp_path: Path, pg_url: str) -> Iterator[Swflows]:
    with own_container(devcloud, tmp_path / "swflows", pg_url) as made:
        yield made


@pytest.fixture(params=["postgresql", "sqlite"])
def any_sw(
    request: pytest.FixtureRequest, devcloud: dict[str, Any], tmp_path: Path
) -> Iterator[Swflows]:
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    with own_container(devcloud, tmp_path / "swflows", url) as made:
        yield made


def channel_left(sw: Swflows, server_id: str) -> list[str]:
    """The server's metadata object or queue, if the cloud still holds it."""
    swift = sw.services.clients.object_store
    container = sw.conf.metadata_container
    found = [
        f"{container}/{o.name}"
        for o in swift.list_objects(container)
        if o.name == server_id
    ]
    return found + zaqar_queues(impl_zaqar_message.queue_name(server_id))


def settle(sw: Swflows, deployment_ids: list[str]) -> None:
    """Wait until no flow works on these deployments any more."""
    for deployment_id in deployment_ids:
        with contextlib.suppress(exceptions.DeploymentNotFound):
            sw.wait(deployment_id, WAIT)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_unenroll_right_after_undeploys_leaves_no_channel(
    any_sw: Swflows, transport: str
) -> None:
    """Several deployments undeployed without waiting, then the server
    unenrolled as soon as their rows are gone: whatever the publishes
    still in flight do, no object or queue stays, round after round."""
    sw = any_sw
    config = script_config(sw, "#!/bin/sh\necho hi\n")
    leaked = {}
    for _ in range(ROUNDS):
        server_id = str(uuid.uuid4())
        sw.enroll_server(server_id, transport)
        deployed = [
            sw.deploy(server_id, config.id, signal_transport=names.NO_SIGNAL).id
            for _ in range(DEPLOYMENTS)
        ]
        for deployment_id in deployed:
            sw.undeploy(deployment_id, wait=False)
        until(
            lambda: not sw.store.list_deployments(server_id=server_id),  # noqa: B023
            WAIT,
            "the deployments' rows to go",
        )
        assert sw.unenroll_server(server_id) is True
        settle(sw, deployed)
        left = channel_left(sw, server_id)
        if left:
            leaked[server_id] = left
        with pytest.raises(exceptions.ServerNotFound):
            sw.show_server(server_id)
    assert leaked == {}


def test_the_sweep_removes_orphaned_channels_of_its_own_only(sw: Swflows) -> None:
    """Channels whose rows went without them (a crash) are removed by the
    sweep once the grace period has passed; enrolled servers' channels,
    another installation's and untagged ones stay, and one recorded again
    within the grace period stays too."""
    sweeper = sw.runner.watcher.sweeper
    swift = sw.services.clients.object_store
    messaging = sw.services.clients.messaging
    container = sw.conf.metadata_container
    servers: dict[tuple[str, str], str] = {}
    for role in ("kept", "orphan", "back"):
        for transport in TRANSPORTS:
            server_id = str(uuid.uuid4())
            sw.enroll_server(server_id, transport)
            servers[(role, transport)] = server_id
    for (role, _), server_id in servers.items():
        if role != "kept":
            assert sw.store.delete_server(server_id)  # the channel stays
    foreign = str(uuid.uuid4())
    swift.put_object(container, foreign, b"{}")  # untagged
    other_queue = impl_zaqar_message.queue_name(foreign)
    messaging.ensure_queue(other_queue, {"swflows_owner": "another-installation"})
    try:
        sw.conf.set_override("channel_sweep_grace", 3600, "watcher")
        assert sweeper.sweep_channels() == []  # seen, within the grace period
        for transport in TRANSPORTS:  # enrolled again meanwhile
            sw.enroll_server(servers[("back", transport)], transport)
        sw.conf.set_override("channel_sweep_grace", 0, "watcher")
        removed = sweeper.sweep_channels()
        orphans = [servers[("orphan", t)] for t in TRANSPORTS]
        assert sorted(removed) == sorted(
            [
                f"{container}/{orphans[0]}",
                impl_zaqar_message.queue_name(orphans[1]),
            ]
        )
        for (role, _), server_id in servers.items():
            assert bool(channel_left(sw, server_id)) == (role != "orphan"), role
        assert channel_left(sw, foreign) == [
            f"{container}/{foreign}",
            *zaqar_queues(other_queue),
        ]
        assert sweeper.sweep_channels() == []
    finally:
        messaging.delete_queue(other_queue)
        for (role, _), server_id in servers.items():
            if role != "orphan":
                sw.unenroll_server(server_id)
