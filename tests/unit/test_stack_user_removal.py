"""A deployment's stack user and project are removed however long Keystone
stays unreachable within a revert's patience, and a removal that cannot be
done is raised, never dropped with a warning: nothing else would ever
remove them (the soak found them left when Keystone went away)."""

from __future__ import annotations

import types
from typing import Any, cast

import pytest

from swflows import exceptions, failpoints
from swflows.services import Services
from swflows.tasks import base, identity


class Users:
    """Keystone's stack users and projects, unreachable ``down`` calls."""

    def __init__(self, down: int) -> None:
        self.down = down
        self.users = {"swflows-dep-1": "u1"}
        self.projects = {"swflows-dep-1": "p1"}
        self.calls = 0

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
    monkeypatch.setattr(identity, "purge_queues", lambda *args: None)


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
    assert users.users == {"swflows-dep-1": "u1"}  # still there, and said so
    assert users.calls > 2  # tried again meanwhile
    # once Keystone answers, the same removal finishes
    identity.delete_stack_user(services_with(users), "dep-1")
    assert users.users == {} and users.projects == {}
