"""The flows table: claims, leases, parking, takeovers (SQLite)."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from swflows import model, states
from swflows.persistence import Store
from swflows.persistence import flow_registry as flow_rows

NOW = 1_000_000.0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as made:
        yield made


@pytest.fixture
def registry(store: Store) -> flow_rows.FlowRegistry:
    return flow_rows.FlowRegistry(store)


def add(registry: flow_rows.FlowRegistry, flow_id: str = "f1", **kw: object) -> None:
    values: dict[str, object] = {
        "kind": "deploy",
        "deployment_id": "d1",
        "server_id": "s1",
        "owner": "a",
        "lease_until": NOW + 30,
    }
    values.update(kw)
    registry.add(flow_id, **values)  # type: ignore[arg-type]


def in_progress(store: Store) -> model.Deployment:
    """A deployment of server s1 whose action is under way."""
    return store.create_deployment(
        model.Deployment(
            id=model.new_id(),
            server_id="s1",
            config_id=None,
            source_config_id=None,
            action="CREATE",
            status=states.IN_PROGRESS,
        )
    )


def test_a_running_flow_is_held_until_its_lease_runs_out(
    registry: flow_rows.FlowRegistry,
) -> None:
    add(registry)
    assert not registry.claim("f1", "b", lease_until=NOW + 60, now=NOW)
    assert registry.claim("f1", "b", lease_until=NOW + 60, now=NOW + 31)
    row = registry.get("f1")
    assert row is not None
    assert (row.owner, row.lease_until, row.takeovers) == ("b", NOW + 60, 1)
    # its old owner lost it: renewing keeps nothing for it
    assert registry.renew("a", ["f1"], NOW + 90) == set()
    assert registry.renew("b", ["f1"], NOW + 90) == {"f1"}
    assert registry.get("f1").lease_until == NOW + 90  # type: ignore[union-attr]


def test_a_dead_owner_is_taken_over_at_once(registry: flow_rows.FlowRegistry) -> None:
    add(registry)
    assert registry.claim("f1", "b", lease_until=NOW + 60, now=NOW, dead_owner="a")
    assert not registry.claim("f1", "c", lease_until=NOW + 60, now=NOW, dead_owner="a")


def test_parking_frees_the_flow_for_one_claimant(
    registry: flow_rows.FlowRegistry,
) -> None:
    add(registry)
    assert not registry.park("f1", "b", {"x": 1})  # only its owner parks it
    assert registry.park("f1", "a", {"x": 1})
    row = registry.get("f1")
    assert row is not None
    assert (row.state, row.owner, row.waiting) == (flow_rows.PARKED, None, {"x": 1})
    assert [r.id for r in registry.parked()] == ["f1"]
    wins = []
    barrier = threading.Barrier(4)

    def claim(owner: str) -> None:
        barrier.wait()
        if registry.claim(
            "f1",
            owner,
            lease_until=NOW + 60,
            now=NOW,
            from_states=(flow_rows.PARKED,),
        ):
            wins.append(owner)

    threads = [threading.Thread(target=claim, args=(f"o{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(wins) == 1
    row = registry.get("f1")
    assert row is not None
    assert (row.state, row.owner, row.takeovers) == (flow_rows.RUNNING, wins[0], 0)


def test_reaching_a_wait_starts_the_count_of_takeovers_again(
    registry: flow_rows.FlowRegistry,
) -> None:
    """A long wait lived through four of its runners' deaths; taken over
    once more after its signal, it is not set aside: it got somewhere."""
    add(registry)
    for n, owner in enumerate("bcde", start=1):
        assert registry.claim("f1", owner, lease_until=NOW + 60 * n, now=NOW + 60 * n)
    assert registry.get("f1").takeovers == 4  # type: ignore[union-attr]
    assert registry.park("f1", "e", {"x": 1})
    assert registry.get("f1").takeovers == 0  # type: ignore[union-attr]
    assert registry.claim("f1", "f", lease_until=NOW + 400, now=NOW + 300)
    assert registry.claim("f1", "g", lease_until=NOW + 500, now=NOW + 450)
    assert registry.get("f1").takeovers == 1  # type: ignore[union-attr]


def test_waiting_updates_compare_and_set(registry: flow_rows.FlowRegistry) -> None:
    add(registry)
    registry.park("f1", "a", {"picked_up": False})
    assert registry.update_waiting(
        "f1", {"picked_up": True}, expected={"picked_up": False}
    )
    assert not registry.update_waiting(
        "f1", {"picked_up": False}, expected={"picked_up": False}
    )
    assert registry.get("f1").waiting == {"picked_up": True}  # type: ignore[union-attr]


def test_metadata_read_marks_the_servers_parked_flows(
    registry: flow_rows.FlowRegistry,
) -> None:
    add(registry, "f1")
    add(registry, "f2", server_id="s2")
    add(registry, "f3")
    for flow_id in ("f1", "f2"):
        registry.park(flow_id, "a", {"picked_up": False})
    assert registry.mark_picked_up("s1") == 1  # f3 is not parked
    assert registry.mark_picked_up("s1") == 0
    waiting = registry.get("f1").waiting  # type: ignore[union-attr]
    assert waiting is not None and waiting["picked_up"] is True
    assert waiting["picked_up_at"] > 0  # when: the stage a wait shows
    assert registry.get("f2").waiting == {"picked_up": False}  # type: ignore[union-attr]


def test_rows_come_with_their_deployment(
    store: Store, registry: flow_rows.FlowRegistry
) -> None:
    dep = in_progress(store)
    add(registry, deployment_id=dep.id)
    [row] = registry.find(deployment_id=dep.id)
    assert (row.deployment_status, row.deployment_generation) == (
        dep.status,
        dep.generation,
    )
    assert registry.any_for_deployment(dep.id)
    assert registry.remove("f1") and not registry.remove("f1")
    assert not registry.any_for_deployment(dep.id)


def test_broken_flows_are_not_claimed(registry: flow_rows.FlowRegistry) -> None:
    add(registry)
    registry.break_flow("f1", "its flow changed version")
    row = registry.get("f1")
    assert row is not None and row.state == flow_rows.BROKEN
    assert row.note == "its flow changed version"
    assert not registry.claim("f1", "b", lease_until=NOW + 60, now=NOW + 1000)


def test_owner_names_and_dead_owners() -> None:
    me = flow_rows.new_owner("t")
    host, pid, token = me.split(":")
    assert (host, int(pid), token) == (socket.gethostname(), os.getpid(), "t")
    assert not flow_rows.owner_is_dead(me)
    assert flow_rows.owner_is_dead(None)
    # a process of this host that is gone
    gone = 2**22 + 12345
    assert flow_rows.owner_is_dead(f"{socket.gethostname()}:{gone}:x")
    # another host: only its lease tells
    assert not flow_rows.owner_is_dead(f"elsewhere-{host}:{gone}:x")


def test_a_release_after_a_failed_run_counts_as_a_takeover(
    registry: flow_rows.FlowRegistry,
) -> None:
    add(registry)
    assert registry.release("f1", "a")  # the runner stopping: not counted
    assert registry.get("f1").takeovers == 0  # type: ignore[union-attr]
    assert registry.claim("f1", "a", lease_until=NOW + 60, now=NOW)
    assert registry.release("f1", "a", failed=True)
    row = registry.get("f1")
    assert row is not None
    assert (row.owner, row.takeovers) == (None, 1)
    assert not registry.release("f1", "a", failed=True)  # not its owner now
    assert registry.get("f1").takeovers == 1  # type: ignore[union-attr]


def test_parked_rows_are_built_again_only_when_they_change(
    store: Store, registry: flow_rows.FlowRegistry
) -> None:
    """The watcher reads every parked row at each look; a row read as it
    was is the very row built before, and any change is seen."""
    dep = in_progress(store)
    for flow_id in ("f1", "f2", "f3"):
        add(registry, flow_id, deployment_id=dep.id if flow_id == "f3" else "d1")
        registry.park(flow_id, "a", {"picked_up": False, "store": {"object": flow_id}})
    first = {row.id: row for row in registry.parked()}
    again = {row.id: row for row in registry.parked()}
    assert all(again[i] is first[i] for i in first)

    assert registry.update_waiting(
        "f1", {"picked_up": True, "store": {}}, expected=first["f1"].waiting or {}
    )
    assert registry.request_cancel("f2", "cancelled: by hand")
    store.update_deployment(dep.id, status=states.COMPLETE)
    changed = {row.id: row for row in registry.parked()}
    assert changed["f1"].waiting == {"picked_up": True, "store": {}}
    assert changed["f2"].note == "cancelled: by hand"
    assert changed["f3"].deployment_status == states.COMPLETE
    # what every other read of the table finds, field for field
    assert registry.parked() == registry.find(states=[flow_rows.PARKED])
    assert registry.claim("f1", "b", lease_until=NOW + 60, now=NOW)
    assert [row.id for row in registry.parked()] == ["f2", "f3"]


def test_a_fresh_look_reads_only_the_flows_asked_for(
    store: Store, registry: flow_rows.FlowRegistry
) -> None:
    """A look at the flows just parked reads those still parked among them,
    and keeps what was built for the others."""
    for flow_id in ("f1", "f2", "f3", "f4"):
        add(registry, flow_id)
        registry.park(flow_id, "a", {"picked_up": False, "store": {"object": flow_id}})
    first = {row.id: row for row in registry.parked()}
    assert registry.claim("f4", "b", lease_until=NOW + 60, now=NOW)  # resumed
    assert registry.update_waiting(
        "f2", {"picked_up": True, "store": {}}, expected=first["f2"].waiting or {}
    )
    some = registry.parked(frozenset({"f2", "f3", "f4", "nothing"}))
    assert [row.id for row in some] == ["f2", "f3"]
    assert some[0].waiting == {"picked_up": True, "store": {}}
    assert some[1] is first["f3"]
    assert registry.parked(frozenset()) == []
    # the next full look builds again only the row that changed
    again = {row.id: row for row in registry.parked()}
    assert sorted(again) == ["f1", "f2", "f3"]
    assert again["f1"] is first["f1"] and again["f2"] is some[0]


def test_a_posted_flow_is_taken_in_one_write_and_no_other_is(
    registry: flow_rows.FlowRegistry,
) -> None:
    """A conductor takes a flow as posted (RUNNING, held by nobody) in one
    write; a flow held by a runner, parked, or taken over too often is
    left to the full claim."""

    def take(flow_id: str, below: int = 3) -> bool:
        return flow_rows.claim_unowned(
            registry, flow_id, "c", lease_until=NOW + 60, below=below
        )

    add(registry, "posted", owner=None, lease_until=None)
    add(registry, "held")
    add(registry, "parked")
    assert registry.park("parked", "a", {"deployment_id": "d1"})
    add(registry, "poison", owner=None, lease_until=None)
    for _ in range(3):
        assert registry.claim("poison", "x", lease_until=NOW, now=NOW)
        assert registry.release("poison", "x", failed=True)
    assert take("posted")
    row = registry.get("posted")
    assert row is not None
    assert (row.owner, row.lease_until, row.takeovers) == ("c", NOW + 60, 0)
    assert not take("posted")  # held now, by "c"
    assert not take("held")
    assert registry.get("held").owner == "a"  # type: ignore[union-attr]
    assert not take("parked")
    assert not take("poison")
    assert take("poison", below=4)
    assert not take("gone")
