"""The group driver on a SQLite store, its members' flows stubbed.

What a takeover finds after a crash is made by hand (rows of the group,
deployments, flows), and the driver is checked to do the right thing with
it: launch again a member whose flow never started, leave one whose flow
exists, record an end once, give up after three reverted launches.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swflows import exceptions, model, projects, rollout, states
from swflows.api import group_driver, groups
from swflows.persistence import Store
from swflows.persistence import flow_registry as flow_rows
from swflows.persistence.groups import GroupRecord, GroupStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as made:
        yield made


class Launched:
    """Stands for :func:`swflows.api.group_driver.launch`: records who was started,
    and writes the flow's row as the runner's launch does before it
    returns."""

    def __init__(self, store: Store) -> None:
        self.names: list[str] = []
        self.registry = flow_rows.FlowRegistry(store)

    def __call__(self, sw: Any, record: Any, name: str, member: Any) -> Any:
        self.names.append(name)
        self.registry.add(
            model.new_id(),
            kind=member["task"],
            deployment_id=member["deployment_id"],
            server_id=member["server_id"],
            owner="me:1:x",
            lease_until=0.0,
        )
        return types.SimpleNamespace(add_done_callback=lambda fn: None)


@pytest.fixture
def driver(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> tuple[group_driver.GroupDriver, Launched]:
    launched = Launched(store)
    monkeypatch.setattr(group_driver, "launch", launched)
    conf = types.SimpleNamespace(
        runner=types.SimpleNamespace(lease_seconds=30),
        watcher=types.SimpleNamespace(poll_interval=0.1),
    )
    services = types.SimpleNamespace(store=store)
    # its launches write their rows at once: none waits for a round
    runner = types.SimpleNamespace(launching=lambda deployment_id: False)
    sw = types.SimpleNamespace(store=store, conf=conf, services=services, runner=runner)
    return group_driver.GroupDriver(sw, "me:1:x"), launched  # type: ignore[arg-type]


def make_group(
    store: Store,
    members: dict[str, dict[str, Any]],
    kind: str = groups.DEPLOY,
    **policy: Any,
) -> str:
    operation = groups.new_operation(
        kind, "CREATE", members, rollout.Policy.from_dict(policy)
    )
    record = GroupRecord(
        id=model.new_id(),
        name="g",
        config_id="c",
        servers={n: m["server_id"] for n, m in members.items()},
        input_values={},
        member_values={},
        signal_transport="NO_SIGNAL",
        timeout=None,
        policy={},
        deployments={n: m["deployment_id"] for n, m in members.items()},
        operation=operation,
        action="CREATE",
        status=states.IN_PROGRESS,
        status_reason="",
        owner="elsewhere:99999999:dead",
        lease_until=0.0,
    )
    GroupStore(store).create(record)
    return record.id


def running(name: str, launches: int = 1) -> dict[str, Any]:
    member = groups._member(f"s-{name}", "deploy", model.new_id())
    member.update(state=rollout.RUNNING, launches=launches)
    return member


def dead_runners_flow(
    store: Store, flow_id: str, member: dict[str, Any]
) -> flow_rows.FlowRegistry:
    """The member's deploy flow, its runner dead; the registry it is in."""
    registry = flow_rows.FlowRegistry(store)
    registry.add(
        flow_id,
        kind="deploy",
        deployment_id=member["deployment_id"],
        server_id=member["server_id"],
        owner="elsewhere:99999999:dead",
        lease_until=0.0,
    )
    return registry


def deployment(store: Store, member: dict[str, Any], status: str) -> None:
    """The member's deployment, ended ``status`` (made IN_PROGRESS first)."""
    store.create_deployment(
        model.Deployment(
            id=member["deployment_id"],
            server_id=member["server_id"],
            config_id=None,
            source_config_id=None,
            action="CREATE",
            status=states.IN_PROGRESS,
            generation=1,
        )
    )
    store.update_deployment(member["deployment_id"], status=status)


def test_a_takeover_relaunches_only_what_never_started(
    store: Store, driver: tuple[group_driver.GroupDriver, Launched]
) -> None:
    drive, launched = driver
    members = {
        "lost": running("lost"),  # recorded RUNNING, no flow, no deployment
        "busy": running("busy"),  # its flow is there: the runner resumes it
        "done": running("done"),  # its deployment ended meanwhile
        "failed": running("failed"),
        "next": groups._member("s-next", "deploy", model.new_id()),
    }
    dead_runners_flow(store, "f-busy", members["busy"])
    deployment(store, members["done"], states.COMPLETE)
    deployment(store, members["failed"], states.FAILED)
    group_id = make_group(store, members, max_concurrency=4, max_errors=1)

    drive.tick()
    assert sorted(launched.names) == ["lost", "next"]
    operation = GroupStore(store).get(group_id).operation
    states_now = {n: m["state"] for n, m in operation["members"].items()}
    assert states_now == {
        "lost": "RUNNING",
        "busy": "RUNNING",
        "done": "COMPLETE",
        "failed": "FAILED",
        "next": "RUNNING",
    }
    assert operation["members"]["lost"]["launches"] == 2
    assert GroupStore(store).get(group_id).owner == "me:1:x"

    # nothing changed: nothing launched, no write
    version = GroupStore(store).get(group_id).version
    drive.tick()
    assert sorted(launched.names) == ["lost", "next"]
    assert GroupStore(store).get(group_id).version == version


def test_an_end_is_counted_once(
    store: Store, driver: tuple[group_driver.GroupDriver, Launched]
) -> None:
    drive, _ = driver
    members = {"a": running("a"), "b": running("b")}
    deployment(store, members["a"], states.FAILED)
    deployment(store, members["b"], states.COMPLETE)
    group_id = make_group(store, members, max_errors=1)
    for _ in range(3):
        drive.tick()
    found = GroupStore(store).get(group_id)
    assert found.status == states.COMPLETE
    assert found.status_reason.startswith(
        "deploy COMPLETE: 1 members COMPLETE, 1 FAILED"
    )
    assert found.owner is None  # released


def test_three_reverted_launches_fail_the_member(
    store: Store, driver: tuple[group_driver.GroupDriver, Launched]
) -> None:
    drive, launched = driver
    group_id = make_group(
        store, {"a": running("a", launches=group_driver.MAX_LAUNCHES)}
    )
    drive.tick()
    assert launched.names == []
    found = GroupStore(store).get(group_id)
    assert found.status == states.FAILED
    assert "max_errors 0 exceeded: 1 of 1 members FAILED (a)" in found.status_reason
    member = found.operation["members"]["a"]
    assert (
        member["reason"]
        == "its deploy flow was reverted 3 times (see the runner's log)"
    )


def test_a_member_whose_flow_was_set_aside_fails_and_the_group_ends(
    store: Store, driver: tuple[group_driver.GroupDriver, Launched]
) -> None:
    """A member's flow set aside as BROKEN (here: a flow that could not be
    loaded, taken over five times) made no deployment: the group waited
    on it for ever.  The member fails with the flow's note, is not started
    again, and the group ends by its error budget."""
    drive, launched = driver
    members = {"a": running("a"), "b": running("b")}
    dead_runners_flow(store, "f-a", members["a"]).break_flow(
        "f-a", "taken over 5 times without finishing"
    )
    deployment(store, members["b"], states.COMPLETE)
    group_id = make_group(store, members, max_errors=1)
    drive.tick()
    assert launched.names == []
    found = GroupStore(store).get(group_id)
    assert found.status == states.COMPLETE
    member = found.operation["members"]["a"]
    assert member["state"] == rollout.FAILED
    assert member["reason"] == (
        "its deploy flow was set aside: taken over 5 times without finishing"
    )


def test_a_cancel_ends_the_running_members_actions(
    store: Store, driver: tuple[group_driver.GroupDriver, Launched]
) -> None:
    drive, launched = driver
    members = {"a": running("a"), "b": running("b"), "c": running("c")}
    deployment(store, members["a"], states.IN_PROGRESS)
    deployment(store, members["b"], states.COMPLETE)
    group_id = make_group(store, members)
    rows = GroupStore(store)
    record = rows.get(group_id)
    operation = dict(record.operation, cancel="enough")
    rows.update(record, operation=operation)
    cancelled: list[tuple[str, str | None]] = []
    setattr(drive.sw, "cancel", lambda dep, reason: cancelled.append((dep, reason)))  # noqa: B010
    drive.tick()
    # only the one whose action runs: b ended, c never started its flow
    assert cancelled == [(members["a"]["deployment_id"], "enough")]
    assert launched.names == []


def test_a_live_owner_is_left_alone(
    store: Store, driver: tuple[group_driver.GroupDriver, Launched]
) -> None:
    import os
    import socket
    import time

    drive, launched = driver
    group_id = make_group(store, {"a": groups._member("s", "deploy", "d")})
    alive = f"{socket.gethostname()}:{os.getpid()}:other"
    GroupStore(store).claim(group_id, alive, lease_until=time.time() + 60, now=0)
    drive.tick()
    assert launched.names == []
    assert GroupStore(store).get(group_id).owner == alive


def test_a_finished_delete_removes_the_group_in_the_write_that_ends_it(
    store: Store,
    driver: tuple[group_driver.GroupDriver, Launched],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A waiter polling the group never sees its delete ended COMPLETE and
    the group still there: the group and its owner row go in one write."""
    drive, _ = driver
    undeployed = groups._member("s-a", "undeploy", model.new_id())
    undeployed.update(state=rollout.RUNNING, launches=1)  # its deployment gone
    group_id = make_group(store, {"a": undeployed}, kind=groups.DELETE)
    store.set_owner(projects.GROUP, group_id, projects.Owner("p", "u"))
    written: list[str] = []
    update = GroupStore.update

    def recording(self: GroupStore, record: Any, **changes: Any) -> Any:
        written.append(str(changes.get("status", record.status)))
        return update(self, record, **changes)

    monkeypatch.setattr(GroupStore, "update", recording)
    drive.tick()
    with pytest.raises(exceptions.GroupNotFound):
        GroupStore(store).get(group_id)
    assert states.COMPLETE not in written
    assert store.get_owner(projects.GROUP, group_id) is None


def test_a_delete_compare_and_sets(store: Store) -> None:
    rows = GroupStore(store)
    group_id = make_group(store, {"a": running("a")})
    stale = rows.get(group_id)
    rows.update(stale, status_reason="moved on")
    with pytest.raises(exceptions.ConcurrentUpdate):
        rows.delete(group_id, version=stale.version)
    assert rows.get(group_id).status_reason == "moved on"
    assert rows.delete(group_id, version=stale.version + 1)
    assert not rows.delete(group_id)


def test_a_member_whose_launch_met_an_outage_is_launched_again_not_failed(
    store: Store,
    driver: tuple[group_driver.GroupDriver, Launched],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The database goes away as a member is started (its config cannot
    be read): the member is not failed, which an outage never is; the
    next pass launches it again, and the group completes."""
    import sqlalchemy.exc

    drive, launched = driver
    members = {"a": groups._member("s-a", "deploy", model.new_id())}
    group_id = make_group(store, members, max_errors=0)
    started = launched.__call__
    tries: list[str] = []

    def once_unreachable(sw: Any, record: Any, name: str, member: Any) -> Any:
        tries.append(name)
        if len(tries) == 1:
            raise sqlalchemy.exc.OperationalError(
                "SELECT", {}, ConnectionRefusedError("connection refused")
            )
        return started(sw, record, name, member)

    monkeypatch.setattr(group_driver, "launch", once_unreachable)
    drive.tick()
    found = GroupStore(store).get(group_id)
    assert found.status == states.IN_PROGRESS
    assert found.operation["members"]["a"]["state"] == rollout.RUNNING
    assert launched.names == []
    drive.tick()  # unlaunched: started again
    assert launched.names == ["a"]
    member = GroupStore(store).get(group_id).operation["members"]["a"]
    assert member["state"] == rollout.RUNNING and member["launches"] == 2
    deployment(store, member, states.COMPLETE)  # its flow ended
    for row in launched.registry.find(deployment_id=member["deployment_id"]):
        launched.registry.remove(row.id)
    drive.tick()
    assert GroupStore(store).get(group_id).status == states.COMPLETE
