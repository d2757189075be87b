"""The sweep of signal stores in projects' own accounts, through their
trusts (a fake object store per account, SQLite)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swflows import conf as sw_conf
from swflows import exceptions, projects, states, trusts
from swflows.clients.cloud import Clients
from swflows.clients.object_store import ObjectInfo
from swflows.engine import sweeper
from swflows.persistence import Store
from swflows.persistence import flow_registry as flow_rows
from swflows.services import Services
from tests.unit.test_persistence_store import deployment
from tests.unit.test_trusts import _Trustee

CONTAINER = "swflows-signals"


class Account:
    """One Swift account's signal container."""

    def __init__(self, *names: str, broken: bool = False) -> None:
        self.names = set(names)
        self.broken = broken

    def list_objects(self, container: str) -> list[ObjectInfo]:
        assert container == CONTAINER
        if self.broken:
            raise exceptions.TransportError("TEMP_URL_SIGNAL", "account unreachable")
        return [
            ObjectInfo(name, "etag", "2026-01-01T00:00:00.000000", 1)
            for name in sorted(self.names)
        ]

    def delete_object(self, container: str, name: str) -> bool:
        assert container == CONTAINER
        found = name in self.names
        self.names.discard(name)
        return found


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as made:
        yield made


def owned(store: Store, kind: str, ident: str, project: str, trust: str) -> None:
    store.set_owner(kind, ident, projects.Owner(project, "u"))
    store.set_trust(kind, ident, trust)


def test_only_projects_holding_a_trust_are_trusting(store: Store) -> None:
    owned(store, projects.DEPLOYMENT, "d1", "p1", "t1")
    owned(store, projects.DEPLOYMENT, "d2", "p1", "t2")
    owned(store, projects.GROUP, "g2", "p2", "tg")
    owned(store, projects.DEPLOYMENT, "m2", "p2", trusts.group_ref("g2"))
    owned(store, projects.DEPLOYMENT, "m3", "p3", trusts.group_ref("gone"))
    owned(store, trusts.CALLBACK, "x4", "p4", "callback-trust")
    store.set_owner(projects.DEPLOYMENT, "plain", projects.Owner("p5", "u"))
    kinds = (projects.DEPLOYMENT, projects.GROUP)
    assert store.trusting_projects(kinds) == ["p1", "p2", "p3"]
    assert store.trusting_projects(()) == []
    # p3 holds only a reference to a group gone: no trust to act through
    found = trusts.trusting_projects(store)
    assert set(found) == {"p1", "p2"}
    assert found["p1"] in ("t1", "t2") and found["p2"] == "tg"


def test_strays_are_removed_from_each_projects_account_through_its_trust(
    store: Store,
) -> None:
    ended = store.create_deployment(deployment(id="ended", status=states.COMPLETE))
    waiting = store.create_deployment(deployment(id="waiting", generation=1))
    store.create_deployment(deployment(id="other-one", status=states.COMPLETE))
    for ident, project, trust in (
        (ended.id, "p1", "t1"),
        (waiting.id, "p1", "t1"),
        ("other-one", "p3", "t3"),
    ):
        owned(store, projects.DEPLOYMENT, ident, project, trust)
    owned(store, projects.DEPLOYMENT, "in-p2", "p2", "t2")
    registry = flow_rows.FlowRegistry(store)
    registry.add(
        "f1",
        kind="deploy",
        deployment_id=waiting.id,
        server_id="srv",
        owner=None,
        lease_until=0.0,
    )
    accounts = {
        None: Account("ended/0"),  # swflows' own
        "t1": Account("ended/0", "waiting/1", "unknown/1", "not-a-store"),
        "t2": Account(broken=True),
        "t3": Account("other-one/0"),
    }
    logins: list[Any] = []

    def acting(login: Any) -> dict[str, Any]:
        logins.append(login)
        return {"object_store": lambda: accounts[login], "messaging": None}

    clients = Clients(
        object_store=lambda: accounts[None],  # type: ignore[arg-type,return-value]
        trustee=_Trustee(),
        acting=acting,
    )
    conf = sw_conf.get_conf(config_files=[])
    contained: list[tuple[str, BaseException]] = []
    sweep = sweeper.Sweeper(
        Services(store, conf, clients, secret=b"k" * 32),
        registry,
        conf,
        lambda step, exc: contained.append((step, exc)),
    )
    removed = sweep.sweep()
    assert sorted(removed) == ["ended/0", "ended/0", "other-one/0"]
    assert accounts[None].names == set()
    # a waiting deployment's store, another installation's, stay
    assert accounts["t1"].names == {"waiting/1", "unknown/1", "not-a-store"}
    assert accounts["t3"].names == set()  # p2's failure left p3 swept
    assert sorted(logins) == ["t1", "t2", "t3"]  # one trust per project
    [(step, error)] = contained
    assert "p2" in step and "unreachable" in str(error)


def test_no_trustee_lists_swflows_own_account_only(store: Store) -> None:
    store.create_deployment(deployment(id="ended", status=states.COMPLETE))
    owned(store, projects.DEPLOYMENT, "ended", "p1", "t1")
    own = Account("ended/0")
    clients = Clients(object_store=lambda: own)  # type: ignore[arg-type,return-value]
    conf = sw_conf.get_conf(config_files=[])
    contained: list[tuple[str, BaseException]] = []
    sweep = sweeper.Sweeper(
        Services(store, conf, clients, secret=b"k" * 32),
        flow_rows.FlowRegistry(store),
        conf,
        lambda step, exc: contained.append((step, exc)),
    )
    assert sweep.sweep() == ["ended/0"]
    assert own.names == set() and contained == []


def test_a_store_a_late_signal_brings_back_after_the_delete_is_swept(
    store: Store,
) -> None:
    # an agent's signal sent again (its first POST went through, its answer
    # was lost) arrives after the undeploy removed the store and the row
    store.create_deployment(deployment(id="gone", generation=3, timeout=60))
    store.delete_deployment("gone", remember=10.0)
    assert store.deleted_generation("gone") == 3
    own = Account("gone/3", "never-here/1")
    clients = Clients(object_store=lambda: own)  # type: ignore[arg-type,return-value]
    conf = sw_conf.get_conf(config_files=[])
    contained: list[tuple[str, BaseException]] = []
    sweep = sweeper.Sweeper(
        Services(store, conf, clients, secret=b"k" * 32),
        flow_rows.FlowRegistry(store),
        conf,
        lambda step, exc: contained.append((step, exc)),
    )
    assert sweep.sweep() == ["gone/3"]
    # a deployment this store never held may be another installation's
    assert own.names == {"never-here/1"} and contained == []


def test_a_deleted_deployment_is_remembered_a_day_past_its_timeout(
    store: Store,
) -> None:
    store.create_deployment(deployment(id="d1", generation=2, timeout=600))
    store.create_deployment(deployment(id="d2", generation=1))
    before = time.time()
    store.delete_deployment("d1", remember=10.0)  # less than the day
    store.delete_deployment("d2", remember=2 * 86400.0)
    # a caller-given id made again and deleted again: remembered once
    store.create_deployment(deployment(id="d1", generation=5, timeout=600))
    store.delete_deployment("d1")
    assert store.deleted_generation("d1") == 5
    assert store.forget_deleted(before + 600 + 86400 - 1) == 0
    assert store.forget_deleted(time.time() + 600 + 86400 + 1) == 1
    assert store.deleted_generation("d1") is None
    assert store.deleted_generation("d2") == 1
    assert store.forget_deleted(time.time() + 2 * 86400 + 1) == 1
    # a delete that finds nothing remembers nothing
    store.delete_deployment("never", missing_ok=True)
    assert store.deleted_generation("never") is None
