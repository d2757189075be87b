"""A publish racing an unenroll or a move, against an object store in memory."""

from __future__ import annotations

import threading
import time
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


def _held_publish(
    services: Services, objects: Objects, waiters: int, fail_held: bool
) -> tuple[list[str], list[int | BaseException]]:
    """One publish to s1 held inside its write while ``waiters`` more ask;
    the writes made, and what each waiter's call returned or raised."""
    enrollment.enroll(services, "s1", names.POLL_TEMP_URL, nova=False)
    writes: list[str] = []
    put = objects.put_object
    holding, release = threading.Event(), threading.Event()

    def counted(container: str, name: str, body: bytes, content_type: str = "") -> str:
        writes.append(threading.current_thread().name)
        if threading.current_thread().name == "held":
            holding.set()
            release.wait(10)
            if fail_held:
                raise RuntimeError("the write failed")
        return put(container, name, body, content_type)

    objects.put_object = counted  # type: ignore[method-assign]
    results: list[int | BaseException] = []

    store = services.store

    def call() -> None:
        try:
            results.append(metadata.publish_server(services, "s1", names.POLL_TEMP_URL))
        except BaseException as exc:  # what the caller got
            results.append(exc)

    held = threading.Thread(target=call, name="held")
    held.start()
    assert holding.wait(10)
    for _ in range(waiters):  # each waiter's change (one connection: in turn)
        store._write("change", lambda conn: store._bump(conn, "s1"))
    others = [threading.Thread(target=call, name=f"w{i}") for i in range(waiters)]
    for thread in others:
        thread.start()
    turns = metadata._TURNS[services.store]["s1"]
    deadline = time.monotonic() + 10
    while turns.asked < waiters + 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert turns.asked == waiters + 1
    release.set()
    for thread in [held, *others]:
        thread.join(10)
    return writes, results


def test_callers_waiting_on_a_publish_are_covered_by_the_next_one(
    services: Services, objects: Objects
) -> None:
    """Eight callers change the server and ask while a publish is writing:
    that publish read the store before they did, so one more publish covers
    all eight (the held one's own, as its copy turned out stale: a waiter
    then finds the version it needs published, and writes nothing)."""
    writes, results = _held_publish(services, objects, waiters=8, fail_held=False)
    assert writes == ["held", "held"]
    version = services.store.get_server("s1").published_version
    assert results == [version] * 9
    assert metadata._TURNS.get(services.store, {}) == {}  # nothing kept


def test_callers_that_asked_before_a_retrys_read_are_covered_by_it(
    services: Services, objects: Objects, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held publish found the server changed by the waiters' changes:
    it reads again at once, without resting (the change is this process's),
    and that read covers every waiter, which then reads nothing either."""
    reads: list[str] = []
    read = services.store.server_metadata

    def counted(server_id: str) -> Any:
        reads.append(threading.current_thread().name)
        return read(server_id)

    monkeypatch.setattr(services.store, "server_metadata", counted)
    rests: list[float] = []
    wait = metadata._conflict_wait

    def recorded(given: Any) -> Callable[[Any], float]:
        inner = wait(given)

        def rest(state: Any) -> float:
            rests.append(inner(state))
            return rests[-1]

        return rest

    monkeypatch.setattr(metadata, "_conflict_wait", recorded)
    writes, results = _held_publish(services, objects, waiters=8, fail_held=False)
    assert writes == ["held", "held"]
    assert rests == [0.0]
    # the held publish's two reads and the check after its conflict; no
    # waiter reads (each enrollment published first, in this thread)
    assert [name for name in reads if name != "MainThread"] == ["held"] * 3
    version = services.store.get_server("s1").published_version
    assert results == [version] * 9


def test_a_conflict_with_another_process_is_tried_again_after_a_rest(
    services: Services,
) -> None:
    turns = metadata._Turns()
    reads = metadata._Reads(turns)
    turns.asked = 3
    reads.reading()
    assert reads.covering == 3 and not reads.asked_since()
    state: Any = type("State", (), {"attempt_number": 3})()
    rests = {metadata._conflict_wait(reads)(state) for _ in range(20)}
    assert max(rests) > 0  # random, up to 0.2 s at the third try
    turns.asked = 4  # a caller here changed the server since the read
    assert reads.asked_since()
    assert metadata._conflict_wait(reads)(state) == 0.0


def test_callers_a_failed_publish_would_have_covered_publish_themselves(
    services: Services, objects: Objects
) -> None:
    writes, results = _held_publish(services, objects, waiters=3, fail_held=True)
    assert writes[0] == "held" and len(writes) == 2
    assert isinstance(results[0], RuntimeError)
    version = services.store.get_server("s1").published_version
    assert results[1:] == [version] * 3


def test_a_version_another_process_published_is_not_written_again(
    services: Services, objects: Objects
) -> None:
    """Publishers in two processes: the store says the version a caller
    would publish was published by the other (it read the store after
    this caller's change), so nothing is written; a newer version is."""
    enrollment.enroll(services, "s1", names.POLL_TEMP_URL, nova=False)
    store = services.store
    store._write("change", lambda conn: store._bump(conn, "s1"))
    writes: list[int] = []
    put = objects.put_object

    def counted(container: str, name: str, body: bytes, content_type: str = "") -> str:
        writes.append(len(body))
        return put(container, name, body, content_type)

    objects.put_object = counted  # type: ignore[method-assign]
    version = metadata.publish_server(services, "s1", names.POLL_TEMP_URL)
    assert len(writes) == 1
    # the same version asked again, as from another process: nothing written
    metadata._TURNS.pop(store, None)
    assert metadata.publish_server(services, "s1", names.POLL_TEMP_URL) == version
    assert len(writes) == 1
    store._write("change", lambda conn: store._bump(conn, "s1"))
    newer = metadata.publish_server(services, "s1", names.POLL_TEMP_URL)
    assert newer > version and len(writes) == 2
    assert store.get_server("s1").published_version == newer
