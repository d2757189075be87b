"""A publish racing an unenroll or a move, against an object store in memory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from swflows import conf as sw_conf
from swflows import enrollment, metadata
from swflows import transport_names as names
from swflows.clients.cloud import Clients
from swflows.persistence.store import Store
from swflows.services import Services


class Objects:
    """The few object-store calls POLL_TEMP_URL makes, in memory; ``on_put``
    runs inside a write, before it lands (what happens meanwhile)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}
        self.on_put: Callable[[], object] | None = None

    def ensure_container(self, name: str) -> None:
        pass

    def head_object(self, container: str, name: str) -> Any:
        return self.objects.get((container, name))

    def put_object(
        self, container: str, name: str, body: bytes, content_type: str = ""
    ) -> str:
        hook, self.on_put = self.on_put, None
        if hook is not None:
            hook()
        self.objects[(container, name)] = body
        return "etag"

    def delete_object(self, container: str, name: str) -> bool:
        return self.objects.pop((container, name), None) is not None

    def temp_url(self, container: str, name: str, *args: Any, **kwargs: Any) -> str:
        return f"http://swift/{container}/{name}?sig"


@pytest.fixture
def objects() -> Objects:
    return Objects()


@pytest.fixture
def services(objects: Objects) -> Iterator[Services]:
    store = Store("sqlite://")
    conf = sw_conf.get_conf()
    made = Services(
        store=store,
        conf=conf,
        clients=Clients(object_store=lambda: objects),  # type: ignore[arg-type,return-value]
        secret=store.derivation_key(),
    )
    try:
        yield made
    finally:
        store.close()


def test_resources_leave_out_what_agents_are_told() -> None:
    channel = {"container": "c", "object": "s", "key": "s", "os-collect-config": {}}
    assert metadata.resources(channel) == {"container": "c", "object": "s", "key": "s"}
    assert metadata.resources(None) == {}


def test_a_publish_that_lands_after_unenroll_is_removed(
    services: Services, objects: Objects
) -> None:
    """The server is unenrolled while a publish is writing: the object the
    write brought back is removed by the writer."""
    enrollment.enroll(services, "s1", names.POLL_TEMP_URL, nova=False)
    assert ("swflows-metadata", "s1") in objects.objects
    objects.on_put = lambda: enrollment.unenroll(services, "s1")
    metadata.publish_server(services, "s1", names.POLL_TEMP_URL, create=False)
    assert objects.objects == {}
    assert services.store.list_servers() == []


def test_a_removal_makes_no_channel_for_a_server_without_one(
    services: Services, objects: Objects
) -> None:
    assert (
        metadata.publish_server(services, "gone", names.POLL_TEMP_URL, create=False)
        == 0
    )
    assert objects.objects == {}
    assert services.store.list_servers() == []


def test_a_publish_to_a_moved_server_removes_only_the_old_channel(
    services: Services, objects: Objects
) -> None:
    """The server moved to another container while a publish wrote to the
    old one: the old object goes, the new one stays."""
    enrollment.enroll(services, "s1", names.POLL_TEMP_URL, nova=False)

    def move() -> None:
        enrollment.enroll(
            services, "s1", names.POLL_TEMP_URL, {"container": "other"}, nova=False
        )

    objects.on_put = move
    metadata.publish_server(services, "s1", names.POLL_TEMP_URL)
    assert set(objects.objects) == {("other", "s1")}
    assert (services.store.get_server("s1").channel or {})["container"] == "other"


def test_a_publish_to_the_current_channel_keeps_it(
    services: Services, objects: Objects
) -> None:
    enrollment.enroll(services, "s1", names.POLL_TEMP_URL, nova=False)
    version = metadata.publish_server(services, "s1", names.POLL_TEMP_URL)
    assert ("swflows-metadata", "s1") in objects.objects
    assert services.store.get_server("s1").published_version == version


def test_a_write_to_the_old_channel_during_a_move_is_removed(
    services: Services, objects: Objects, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A publish lands on the old object after the move removed it and
    before the new channel is recorded: the move removes it again."""
    enrollment.enroll(services, "s1", names.POLL_TEMP_URL, nova=False)
    store = services.store
    record = store.set_server_channel

    def late_write(*args: Any, **kwargs: Any) -> Any:
        objects.objects[("swflows-metadata", "s1")] = b"{}"
        return record(*args, **kwargs)

    monkeypatch.setattr(store, "set_server_channel", late_write)
    enrollment.enroll(
        services, "s1", names.POLL_TEMP_URL, {"container": "other"}, nova=False
    )
    assert set(objects.objects) == {("other", "s1")}


def test_an_unenroll_stopped_halfway_is_finished_by_unenrolling_again(
    services: Services, objects: Objects, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The channel went but the row could not: unenrolling again removes
    the row, and a write that landed meanwhile."""
    enrollment.enroll(services, "s1", names.POLL_TEMP_URL, nova=False)
    store = services.store
    delete = store.delete_server

    def fails(server_id: str) -> bool:
        raise RuntimeError("stopped")

    monkeypatch.setattr(store, "delete_server", fails)
    with pytest.raises(RuntimeError):
        enrollment.unenroll(services, "s1")
    assert objects.objects == {}
    assert store.get_server("s1").channel
    objects.objects[("swflows-metadata", "s1")] = b"{}"  # a late publish
    monkeypatch.setattr(store, "delete_server", delete)
    assert enrollment.unenroll(services, "s1") is True
    assert objects.objects == {}
    assert store.list_servers() == []
