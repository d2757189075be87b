"""The dev cloud's ZooKeeper as kazoo, tooz and TaskFlow's jobboard use it:
a version check through ``envi``, ephemeral nodes that end with their
session, and tooz's leader election."""

import socket
import threading
import uuid
from collections.abc import Callable, Iterator

import pytest
from kazoo import client as kazoo_client
from tooz import coordination


def four_letter_word(hosts: str, word: str) -> str:
    host, port = hosts.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode()


@pytest.fixture
def kazoo(
    zookeeper_hosts: str,
) -> Iterator[Callable[[], kazoo_client.KazooClient]]:
    clients: list[kazoo_client.KazooClient] = []

    def make() -> kazoo_client.KazooClient:
        client = kazoo_client.KazooClient(hosts=zookeeper_hosts, timeout=4.0)
        client.start(timeout=10)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.stop()
        client.close()


def test_four_letter_words_are_those_the_clients_need(zookeeper_hosts: str) -> None:
    assert four_letter_word(zookeeper_hosts, "ruok") == "imok"
    assert "Mode: standalone" in four_letter_word(zookeeper_hosts, "srvr")
    # kazoo's server_version() (TaskFlow's jobboard calls it at connect)
    assert "zookeeper.version=3." in four_letter_word(zookeeper_hosts, "envi")
    # and nothing more is allowed
    refused = four_letter_word(zookeeper_hosts, "dump")
    assert "not in the whitelist" in refused


def test_ephemeral_node_ends_with_its_session(
    kazoo: Callable[[], kazoo_client.KazooClient],
) -> None:
    owner, watcher = kazoo(), kazoo()
    assert owner.server_version()[:2] >= (3, 5)
    path = f"/swflows-smoke/{uuid.uuid4().hex}"
    owner.create(path, b"owner", ephemeral=True, makepath=True)
    assert watcher.get(path)[0] == b"owner"
    gone = threading.Event()
    assert watcher.exists(path, watch=lambda event: gone.set()) is not None
    owner.stop()  # closes the session: the server removes its ephemeral nodes
    assert gone.wait(10)
    assert watcher.exists(path) is None
    watcher.delete(path.rsplit("/", 1)[0], recursive=True)


def test_tooz_leader_election_on_zookeeper(zookeeper_hosts: str) -> None:
    group = f"swflows-smoke-{uuid.uuid4().hex[:8]}".encode()
    url = f"zookeeper://{zookeeper_hosts}?timeout=4"
    first = coordination.get_coordinator(url, b"first")
    second = coordination.get_coordinator(url, b"second")
    first.start(start_heart=True)
    second.start(start_heart=True)
    try:
        first.create_group(group).get()
        for member in (first, second):
            member.join_group(group).get()
        elected: list[bytes] = []
        first.watch_elected_as_leader(group, lambda event: elected.append(b"first"))
        first.run_watchers()
        second.watch_elected_as_leader(group, lambda event: elected.append(b"second"))
        second.run_watchers()
        assert elected == [b"first"]
        assert first.get_leader(group).get() == b"first"
        first.stand_down_group_leader(group)
        first.leave_group(group).get()
        second.run_watchers()
        assert elected == [b"first", b"second"]
        assert second.get_leader(group).get() == b"second"
    finally:
        first.stop()
        second.stop()
