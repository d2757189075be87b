"""The groups table: rows, compare-and-set updates, claims (SQLite)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from swflows import exceptions
from swflows.persistence import Store
from swflows.persistence import groups as group_rows

NOW = 1_000_000.0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as made:
        yield made


@pytest.fixture
def rows(store: Store) -> group_rows.GroupStore:
    return group_rows.GroupStore(store)


def record(**kw: object) -> group_rows.GroupRecord:
    values: dict[str, object] = {
        "id": "g1",
        "name": "web",
        "config_id": "c1",
        "servers": {"a": "s1", "b": "s2"},
        "input_values": {"port": 80, "deploy_password": "hunter2"},
        "member_values": {"a": {"port": 81}},
        "signal_transport": "TEMP_URL_SIGNAL",
        "timeout": 60,
        "policy": {"max_concurrency": 1},
        "deployments": {},
        "operation": {},
        "action": "CREATE",
        "status": "IN_PROGRESS",
        "status_reason": "",
    }
    values.update(kw)
    return group_rows.GroupRecord(**values)  # type: ignore[arg-type]


def test_create_get_by_id_or_name_and_member_inputs(
    rows: group_rows.GroupStore,
) -> None:
    rows.create(record())
    found = rows.get("web")
    assert found == rows.get("g1")
    assert found.version == 1
    assert found.member_inputs("a")["port"] == 81
    assert found.member_inputs("b")["port"] == 80
    assert [g.name for g in rows.find()] == ["web"]
    with pytest.raises(exceptions.GroupNotFound, match="group nope not found"):
        rows.get("nope")


def test_a_taken_name_is_refused(rows: group_rows.GroupStore) -> None:
    rows.create(record())
    with pytest.raises(exceptions.ValidationError, match="name: a group named 'web'"):
        rows.create(record(id="g2"))


def test_secret_inputs_are_not_stored_in_clear(
    rows: group_rows.GroupStore, store: Store
) -> None:
    rows.create(record())
    with store.engine.connect() as conn:
        raw = conn.execute(sa.text("SELECT input_values FROM swflows_groups")).scalar()
    assert "hunter2" not in json.dumps(raw)
    assert rows.get("web").input_values["deploy_password"] == "hunter2"


def test_updates_are_compare_and_set(rows: group_rows.GroupStore) -> None:
    first = rows.create(record())
    second = rows.update(first, status="COMPLETE", status_reason="done")
    assert second.version == 2
    with pytest.raises(exceptions.ConcurrentUpdate):
        rows.update(first, status="FAILED")
    with pytest.raises(exceptions.ValidationError, match="name"):
        rows.update(second, name="other")
    rows.delete("g1")
    with pytest.raises(exceptions.GroupNotFound):
        rows.update(second, status="FAILED")


def test_claims_follow_the_lease(rows: group_rows.GroupStore) -> None:
    rows.create(record())
    assert rows.claim("g1", "a", lease_until=NOW + 30, now=NOW)
    assert not rows.claim("g1", "b", lease_until=NOW + 30, now=NOW + 1)
    assert rows.claim("g1", "b", lease_until=NOW + 30, now=NOW + 1, dead_owner="a")
    assert rows.claim("g1", "c", lease_until=NOW + 90, now=NOW + 31)
    assert rows.in_progress() == [("g1", "c", NOW + 90)]
    rows.release("g1", "c")
    assert rows.in_progress() == [("g1", None, None)]
