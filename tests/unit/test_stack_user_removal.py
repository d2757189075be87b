"""A deployment's stack user and project are removed however long Keystone
stays unreachable within a revert's patience, and a removal that cannot be
done is raised, never dropped with a warning: nothing else would ever
remove them (the soak found them left when Keystone went away)."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any, cast

import pytest

from swflows import conf as sw_conf
from swflows import exceptions, failpoints, stack_users, states
from swflows.clients.cloud import Clients
from swflows.engine import sweeper
from swflows.persistence import Store
from swflows.persistence import flow_registry as flow_rows
from swflows.services import Services
from swflows.tasks import base, identity
from tests.unit.test_persistence_store import deployment


class Users:
    """Keystone's stack users and projects, unreachable ``down`` calls."""

    def __init__(self, down: int, *deployments: str) -> None:
        self.down = down
        self.users = {f"swflows-{d}": f"u-{d}" for d in deployments or ["dep-1"]}
        self.projects = {f"swflows-{d}": f"p-{d}" for d in deployments or ["dep-1"]}
        self.calls = 0

    def list_users(self, prefix: str = "") -> list[Any]:
        return [
            types.SimpleNamespace(name=n) for n in self.users if n.startswith(prefix)
        ]

    def list_projects(self, prefix: str = "") -> list[Any]:
        return [
            types.SimpleNamespace(name=n) for n in self.projects if n.startswith(prefix)
        ]

    def _call(self, what: str) -> None:
        self.calls += 1
        if self.down:
            self.down -= 1
            raise exceptions.CloudError("identity", f"{what} failed: unreachable")

    def find_user(self, name: str) -> Any:
        self._call("find user")
        found = self.users.get(name)
        return types.SimpleNamespace(id=found) if found else None

    def find_project(self, name: str) -> Any:
        self._call("find project")
        found = self.projects.get(name)
        return types.SimpleNamespace(id=found) if found else None

    def delete_user(self, user_id: str) -> None:
        self._call("delete user")
        self.users = {k: v for k, v in self.users.items() if v != user_id}

    def delete_project(self, project_id: str) -> None:
        self._call("delete project")
        self.projects = {k: v for k, v in self.projects.items() if v != project_id}


def services_with(users: Users) -> Services:
    clients = types.SimpleNamespace(stack_users=users, messaging=None)
    made = types.SimpleNamespace(clients=clients, check_fence=lambda: None)
    return cast(Services, made)


@pytest.fixture(autouse=True)
def no_queues(monkeypatch: pytest.MonkeyPatch) -> None:
    # the stack project's queues: not what these tests are about
    monkeypatch.setattr(stack_users, "purge_queues", lambda *args: None)


def test_keystone_unreachable_for_a_while_still_loses_the_user(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(base, "REVERT_PATIENCE", 30.0)
    users = Users(down=3)
    identity.delete_stack_user(services_with(users), "dep-1")
    assert users.users == {} and users.projects == {}


def test_a_removal_that_keeps_failing_is_raised_not_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(base, "REVERT_PATIENCE", 0.5)
    users = Users(down=0)
    with failpoints.armed("identity.delete", failpoints.fail()):
        with pytest.raises(failpoints.FailpointError):
            identity.delete_stack_user(services_with(users), "dep-1")
    assert users.users == {"swflows-dep-1": "u-dep-1"}  # still there, and said so
    assert users.calls > 2  # tried again meanwhile
    # once Keystone answers, the same removal finishes
    identity.delete_stack_user(services_with(users), "dep-1")
    assert users.users == {} and users.projects == {}


def test_a_sweep_removes_the_users_of_deployments_deleted_here_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sweeper, "CHUNK", 2)  # rows looked for a few at a time
    # a step paused between its fence check and Keystone made "gone"'s
    # user again after the undeploy; "lost"'s project is all it made
    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as store:
        for ident in ("gone", "lost", "again", "flowing", "kept", "broken"):
            store.create_deployment(deployment(id=ident, status=states.COMPLETE))
        for ident in ("gone", "lost", "again", "flowing", "broken"):
            store.delete_deployment(ident)
        # a caller-given id made again: its row is back
        store.create_deployment(deployment(id="again", status=states.COMPLETE))
        registry = flow_rows.FlowRegistry(store)
        # deleted, and made again under its caller-given id: a flow runs
        registry.add(
            "f1",
            kind="deploy",
            deployment_id="flowing",
            server_id="srv",
            owner=None,
            lease_until=0.0,
        )
        users = Users(0, "gone", "again", "flowing", "kept", "broken", "stranger")
        users.projects["swflows-lost"] = "p-lost"
        users.users["heat-stack-user"] = "u-heat"
        failing = users.delete_user

        def delete_user(user_id: str) -> None:
            if user_id == "u-broken":
                raise exceptions.CloudError("identity", "delete user failed: 503")
            failing(user_id)

        users.delete_user = delete_user  # type: ignore[method-assign]
        conf = sw_conf.get_conf(config_files=[])
        contained: list[tuple[str, BaseException]] = []
        clients = Clients(stack_users=lambda: users)  # type: ignore[arg-type,return-value]
        sweep = sweeper.Sweeper(
            Services(store, conf, clients, secret=b"k" * 32),
            registry,
            conf,
            lambda step, exc: contained.append((step, exc)),
        )
        assert sweep.sweep_stack_users() == ["gone", "lost"]
        assert sorted(users.users) == [
            "heat-stack-user",
            "swflows-again",
            "swflows-broken",
            "swflows-flowing",
            "swflows-kept",
            "swflows-stranger",
        ]
        assert "swflows-gone" not in users.projects
        assert "swflows-lost" not in users.projects
        [(step, error)] = contained
        assert "broken" in step and "503" in str(error)
