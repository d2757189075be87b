"""The groups table on SQLite and PostgreSQL: rows, compare-and-set, claims,
and the members' deployment states read in one pass."""

from __future__ import annotations

import pytest

from swflows import exceptions, model, states
from swflows.persistence import Store
from swflows.persistence import flow_registry as flow_rows
from swflows.persistence import groups as group_rows
from tests.functional.db_fixtures import *  # noqa: F403 (fixtures)
from tests.unit.test_persistence_groups import NOW, record


def test_groups_on_every_backend(store: Store) -> None:
    rows = group_rows.GroupStore(store)
    first = rows.create(record(operation={"input_values": {"deploy_password": "p"}}))
    assert rows.get("web").operation["input_values"] == {"deploy_password": "p"}
    with pytest.raises(exceptions.ValidationError, match="name"):
        rows.create(record(id="g2"))
    second = rows.update(first, status=states.COMPLETE, status_reason="ok")
    with pytest.raises(exceptions.ConcurrentUpdate):
        rows.update(first, status=states.FAILED)
    rows.update(second, status=states.IN_PROGRESS)
    assert rows.claim("g1", "a", lease_until=NOW + 30, now=NOW)
    assert not rows.claim("g1", "b", lease_until=NOW + 30, now=NOW + 1)
    assert rows.claim("g1", "b", lease_until=NOW + 30, now=NOW + 31)
    assert rows.in_progress() == [("g1", "b", NOW + 30)]


def test_member_states_in_one_pass(store: Store) -> None:
    rows = group_rows.GroupStore(store)
    ids = {f"m{i}": model.new_id() for i in range(1200)}  # past one IN (...) chunk
    done = model.Deployment(
        id=ids["m0"],
        server_id="s0",
        config_id=None,
        source_config_id=None,
        action="CREATE",
        status=states.IN_PROGRESS,
        generation=1,
    )
    store.create_deployment(done)
    store.update_deployment(done.id, status=states.COMPLETE)
    registry = flow_rows.FlowRegistry(store)
    registry.add(
        "f1",
        kind="deploy",
        deployment_id=ids["m1100"],
        server_id="s",
        owner="o",
        lease_until=NOW,
    )
    registry.add(
        "f2",
        kind="deploy",
        deployment_id=ids["m7"],
        server_id="s",
        owner="o",
        lease_until=NOW,
    )
    registry.break_flow("f2", "taken over 5 times")
    found = rows.deployment_states(ids)
    assert found == {
        "m0": (states.COMPLETE, 1, False, None),
        "m1100": ("", 0, True, None),
        # set aside: no flow at work on it, and the note says why
        "m7": ("", 0, False, "taken over 5 times"),
    }
