"""A flow's writes outside the database check its fence at the moment they
write: a runner paused right before a write, whose flow was taken over
meanwhile, writes nothing once it goes on (an embedded runner on SQLite,
its cloud in memory)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import types
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

import pytest
from taskflow import states as tf_states

from swflows import failpoints, model, services, trusts
from swflows.api import Swflows
from swflows.clients.cloud import Clients
from swflows.engine import conductor, driving
from swflows.fixture import LocalSwflows
from swflows.persistence import flow_registry as flow_rows
from swflows.persistence import logbook
from swflows.tasks import identity, signal
from swflows.transports import impl_poll_temp_url
from tests.unit.test_runner_fencing import MemoryBoard

if TYPE_CHECKING:
    from swflows.clients.object_store import ObjectStore


@pytest.fixture
def local() -> Iterator[LocalSwflows]:
    with LocalSwflows() as made:
        yield made


def until(check: Any, seconds: float) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"not within {seconds} s")


def stall_first(stalled: threading.Event, release: threading.Event) -> Any:
    """A failpoint action freezing the first caller (as SIGSTOP would)
    until ``release``; later callers pass."""
    first = [True]
    lock = threading.Lock()

    def action(name: str) -> None:
        with lock:
            mine, first[0] = first[0], False
        if mine:
            stalled.set()
            release.wait(30)

    return action


def written(writes: list[tuple[str, bytes]], server_id: str) -> list[dict[str, Any]]:
    """Every document written to ``server_id``'s metadata object, in order
    (not the empty one its channel starts with)."""
    found = [json.loads(body) for name, body in writes if name == server_id]
    return [doc for doc in found if "deployments" in doc]


@pytest.mark.parametrize("batch", [0, 64], ids=["engine", "batched"])
def test_a_publisher_stalled_past_a_takeover_writes_nothing(batch: int) -> None:
    with LocalSwflows(overrides={"runner": {"launch_batch": batch}}) as local:
        publisher_stalled_past_a_takeover(local, batched=batch > 0)


def publisher_stalled_past_a_takeover(local: LocalSwflows, *, batched: bool) -> None:
    """Launched by an engine, the stalled step is left RUNNING in its
    logbook; launched in a round, nothing of it is (the steps are written
    at the park): either way its new owner runs it again."""
    sw = local.sw
    writes: list[tuple[str, bytes]] = []
    writes_to = local.objects.on_write

    def record(container: str, name: str, body: bytes) -> None:
        if container == impl_poll_temp_url.DEFAULT_CONTAINER:
            writes.append((name, body))
        if writes_to is not None:
            writes_to(container, name, body)

    local.objects.on_write = record
    server = local.new_server()
    first = sw.create_config("first", "#!/bin/sh", group="script")
    second = sw.create_config("second", "#!/bin/sh", group="script")
    stalled, release = threading.Event(), threading.Event()
    with failpoints.armed("metadata.publish", stall_first(stalled, release)):
        old = sw.deploy(server, first.id, wait=False)
        assert stalled.wait(30)  # its document is read, not yet written
        registry = flow_rows.FlowRegistry(sw.store)
        (row,) = registry.find(deployment_id=old.id)
        # the flow is another runner's now, as after this one's lease ran out
        assert registry.claim(
            row.id,
            "other-runner",
            lease_until=time.time() + 600,
            now=time.time() + 3600,
            from_states=(flow_rows.RUNNING,),
        )
        # meanwhile a newer document is published: both deployments
        new = sw.deploy(server, second.id, wait=True, wait_timeout=60)
        assert new.status == "COMPLETE"
        release.set()
        until(lambda: sw.runner.drives_now(row.id) is None, 30)
    documents = written(writes, server)
    generations = [doc[model.DOCUMENT_GENERATION] for doc in documents]
    # the stalled copy (the first deployment only, read before the second)
    # was never written over the newer one
    assert generations == sorted(generations)
    assert len(documents[-1]["deployments"]) == 2
    backend = sw.store.taskflow_backend()
    with contextlib.closing(backend.get_connection()) as conn:
        detail = conn.get_logbook(row.id).find(row.id)
    steps = {atom.name: atom.state for atom in detail}
    publish = [name for name in steps if "publish" in name.lower()]
    assert publish
    if not batched:
        assert all(steps[name] == tf_states.RUNNING for name in publish)
    else:
        assert {steps[name] for name in steps if name.startswith("swflows.")} == {
            tf_states.PENDING
        }


class Fenced(BaseException):
    pass


def fenced_services(clients: Any, store: Any = None) -> services.Services:
    def fence() -> None:
        raise Fenced

    made = services.Services(
        store=store or cast(Any, None),
        conf=cast(Any, None),
        clients=clients,
        secret=b"k" * 32,
    )
    return made.fenced(fence)


class Calls:
    """Any method called on it is recorded; it returns nothing."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return types.SimpleNamespace(id=f"{name}-id")

        return call


def test_a_signal_store_is_not_removed_once_fenced() -> None:
    transport = Calls()
    with pytest.raises(Fenced):
        signal.delete_store(
            fenced_services(Calls()), cast(Any, transport), {"container": "c"}
        )
    assert transport.calls == []


def test_a_stack_user_is_neither_made_nor_removed_once_fenced() -> None:
    users = Calls()
    clients = types.SimpleNamespace(stack_users=users)
    made = fenced_services(clients)
    with pytest.raises(Fenced):
        identity.EnsureStackUser("deploy").execute(made, "dep-1")
    with pytest.raises(Fenced):
        identity.delete_stack_user(made, "dep-1")
    # the look-ups only: nothing made, nothing deleted
    assert users.calls == ["find_user", "find_project"]


def test_a_trust_is_not_deleted_once_fenced() -> None:
    trustee = Calls()
    store = types.SimpleNamespace(get_trust=lambda kind, object_id: "trust-1")
    clients = types.SimpleNamespace(trustee=trustee)
    with pytest.raises(Fenced):
        trusts.release(fenced_services(clients, store), "deployment", "dep-1")
    assert trustee.calls == []


def test_unfenced_services_check_nothing() -> None:
    made = services.Services(
        store=cast(Any, None), conf=cast(Any, None), clients=cast(Any, None), secret=b""
    )
    made.check_fence()
    assert made.fenced(None).fence is None


def test_a_publisher_stalled_past_its_lost_claim_writes_nothing(
    local: LocalSwflows,
) -> None:
    """Under a conductor: the job's claim is another's when the stalled
    publisher goes on (its row still names the conductor)."""
    writes: list[tuple[str, bytes]] = []

    def record(container: str, name: str, body: bytes) -> None:
        if container == impl_poll_temp_url.DEFAULT_CONTAINER:
            writes.append((name, body))

    local.objects.on_write = record
    clients = Clients(object_store=lambda: cast("ObjectStore", local.objects))
    sw = Swflows(local.store, clients, local.conf, start=False)
    board = MemoryBoard()
    driver = conductor.Conductor(sw, board=board, workers=2)  # type: ignore[arg-type]
    sw.adopt_runner(driver.runner)
    stalled, release = threading.Event(), threading.Event()
    try:
        board.announce(driver.name, {})
        config = sw.create_config("first", "#!/bin/sh", group="script")
        server = local.new_server()
        with failpoints.armed("metadata.publish", stall_first(stalled, release)):
            # it returns once its row is written: by a step the conductor runs
            deploying = threading.Thread(
                target=sw.deploy,
                args=(server, config.id),
                kwargs={"deployment_id": "dep-1", "wait": False},
            )
            deploying.start()
            registry = flow_rows.FlowRegistry(sw.store)
            row = until(lambda: registry.find(deployment_id="dep-1"), 30)[0]
            assert until(driver.claim_some, 30) == [row.id]  # once posted
            deploying.join(30)
            assert stalled.wait(30)
            board.drop_claims(driver.name)
            (job,) = board.jobs()
            assert board.claim(job, "other-conductor")
            release.set()
            until(lambda: driver.runner.drives_now(row.id) is None, 30)
        assert written(writes, server) == []
    finally:
        release.set()
        driver.close()
        sw.close()


def test_the_write_fence_checks_the_claim_then_the_row() -> None:
    drive = driving._Drive("f", engine=None, park_after={})
    holder = ["me"]
    registry = types.SimpleNamespace(holder=lambda flow_id: holder[0])
    fence = driving.write_fence(cast(Any, registry), "me", drive)
    fence()  # held: nothing raised

    def claim_lost(_drive: Any) -> None:
        raise conductor.ClaimLost("f")

    drive.fence = claim_lost
    with pytest.raises(conductor.ClaimLost):
        fence()
    drive.fence = None
    holder[0] = "other"
    with pytest.raises(logbook.FlowFenced):
        fence()
    assert drive.lost
