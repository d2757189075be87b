"""StackUsers against the real Keystone of the dev cloud.

Every test names what it makes with its own uuid prefix, so tests can run in
parallel, and checks that nothing with that prefix is left behind.
"""

from __future__ import annotations

import concurrent.futures
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import tenacity
from keystoneauth1 import session as ks_session

from swflows.clients import StackUsers, derive_password
from swflows.exceptions import CloudError, ValidationError

SECRET = b"functional-test-secret-0123456789"


@pytest.fixture(scope="module")
def users(devcloud: dict[str, Any]) -> StackUsers:
    ks = devcloud["keystone"]
    return StackUsers.from_password(
        ks["auth_url"],
        domain_id=ks["stack_user_domain_id"],
        username=ks["stack_domain_admin"],
        password=ks["stack_domain_admin_password"],
        role_name=ks["stack_user_role"],
    )


@pytest.fixture
def prefix(users: StackUsers) -> Iterator[str]:
    """A unique name prefix; the test must leave no user or project with it."""
    tag = f"swft-{uuid.uuid4().hex[:12]}"
    yield tag
    left_users = [u for u in users.list_users() if u.name.startswith(tag)]
    left_projects = [p for p in users.list_projects() if p.name.startswith(tag)]
    for user in left_users:
        users.delete_user(user.id)
    for project in left_projects:
        users.delete_project(project.id)
    assert left_users == [] and left_projects == []


def token_for(auth_url: str, user_id: str, password: str, project_id: str) -> Any:
    """Authenticate as a stack user: (token, token body) or None on 401."""
    body = {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {"user": {"id": user_id, "password": password}},
            },
            "scope": {"project": {"id": project_id}},
        }
    }
    resp = requests.post(f"{auth_url}/auth/tokens", json=body, timeout=30)
    if resp.status_code == 401:
        return None
    assert resp.status_code == 201, resp.text
    return resp.headers["X-Subject-Token"], resp.json()["token"]


def token_valid(auth_url: str, token: str) -> bool:
    """The token checks itself, as its holder would."""
    resp = requests.get(
        f"{auth_url}/auth/tokens",
        headers={"X-Auth-Token": token, "X-Subject-Token": token},
        timeout=30,
    )
    assert resp.status_code in (200, 401, 404), resp.text
    return resp.status_code == 200


def fresh_valid_token(
    auth_url: str, user_id: str, password: str, project_id: str
) -> str:
    """A token that validates.

    Keystone's revocation events have one-second resolution: a token issued
    in the same second as a password change is refused, so ask again.
    """
    for attempt in tenacity.Retrying(
        stop=tenacity.stop_after_delay(5), wait=tenacity.wait_fixed(0.25), reraise=True
    ):
        with attempt:
            token, _ = token_for(auth_url, user_id, password, project_id)
            assert token_valid(auth_url, token)
    return str(token)


def test_user_lifecycle_converges_and_cleans_up(
    devcloud: dict[str, Any], users: StackUsers, prefix: str
) -> None:
    auth_url = devcloud["keystone"]["auth_url"]
    name = f"{prefix}-d1"

    project_id = users.ensure_project(name, "deployment d1")
    assert users.ensure_project(name, "deployment d1") == project_id
    found_project = users.find_project(name)
    assert found_project is not None and found_project.id == project_id
    assert found_project.domain_id == users.domain_id

    password = derive_password(SECRET, name, "0")
    user_id = users.ensure_user(name, project_id, password)
    user = users.find_user(name)
    assert user is not None
    assert (user.id, user.default_project_id, user.domain_id) == (
        user_id,
        project_id,
        users.domain_id,
    )
    assert users.user_token_works(user_id, password, project_id)
    assert not users.user_token_works(user_id, password + "x", project_id)

    # The token is scoped to the project with the stack user role only.
    token, body = token_for(auth_url, user_id, password, project_id)
    assert [r["name"] for r in body["roles"]] == [users.role_name]
    assert body["project"]["id"] == project_id
    assert token_valid(auth_url, token)

    # A re-run after a crash with the same (re-derived) password finds the
    # user and leaves the tokens it holds alone.
    assert users.ensure_user(name, project_id, password) == user_id
    assert token_valid(auth_url, token)

    # A new password is set; Keystone then revokes the user's tokens.
    new_password = derive_password(SECRET, name, "1")
    assert users.ensure_user(name, project_id, new_password) == user_id
    assert users.user_token_works(user_id, new_password, project_id)
    assert not users.user_token_works(user_id, password, project_id)
    assert not token_valid(auth_url, token)
    token = fresh_valid_token(auth_url, user_id, new_password, project_id)

    assert users.delete_user(user_id) is True
    assert users.delete_user(user_id) is False
    assert users.find_user(name) is None
    assert not users.user_token_works(user_id, new_password, project_id)
    assert not token_valid(auth_url, token)

    assert users.delete_project(project_id) is True
    assert users.delete_project(project_id) is False
    assert users.find_project(name) is None


def test_user_options_are_heats(
    devcloud: dict[str, Any], users: StackUsers, prefix: str
) -> None:
    project_id = users.ensure_project(prefix)
    user_id = users.ensure_user(prefix, project_id, derive_password(SECRET, prefix))
    try:
        url = f"{devcloud['keystone']['auth_url']}/users/{user_id}"
        shown = users.session.get(url).json()["user"]
        assert shown["options"] == {
            "ignore_change_password_upon_first_use": True,
            "ignore_password_expiry": True,
            "ignore_lockout_failure_attempts": True,
        }
        assert shown["enabled"] is True
    finally:
        users.delete_user(user_id)
        users.delete_project(project_id)


def test_concurrent_ensures_make_one_user(users: StackUsers, prefix: str) -> None:
    project_id = users.ensure_project(prefix)
    password = derive_password(SECRET, prefix)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        ids = set(
            pool.map(
                lambda _: users.ensure_user(prefix, project_id, password), range(4)
            )
        )
    assert len(ids) == 1
    [user_id] = ids
    assert [u.id for u in users.list_users() if u.name == prefix] == [user_id]
    assert users.user_token_works(user_id, password, project_id)
    users.delete_user(user_id)
    users.delete_project(project_id)


def test_a_listing_by_prefix_names_only_what_starts_with_it(
    users: StackUsers, prefix: str
) -> None:
    made = {}
    for name in (f"{prefix}-a", f"{prefix}-b", f"{prefix}x"):
        project_id = users.ensure_project(name)
        made[name] = (
            project_id,
            users.ensure_user(name, project_id, derive_password(SECRET, name)),
        )
    mine = sorted(made)[:2]
    assert sorted(u.name for u in users.list_users(f"{prefix}-")) == mine
    assert sorted(p.name for p in users.list_projects(f"{prefix}-")) == mine
    assert f"{prefix}x" in {u.name for u in users.list_users(prefix)}
    for project_id, user_id in made.values():
        users.delete_user(user_id)
        users.delete_project(project_id)


def test_missing_role_is_refused_before_any_user_exists(
    users: StackUsers, prefix: str
) -> None:
    project_id = users.ensure_project(prefix)
    role = f"{prefix}-no-such-role"
    no_role = StackUsers(users.session, users.domain_id, role_name=role)
    with pytest.raises(CloudError, match=f"role {role} not found") as caught:
        no_role.ensure_user(prefix, project_id, derive_password(SECRET, prefix))
    assert caught.value.service == "identity"
    assert users.find_user(prefix) is None
    users.delete_project(project_id)


def test_ec2_credential(
    devcloud: dict[str, Any], users: StackUsers, prefix: str
) -> None:
    project_id = users.ensure_project(prefix)
    user_id = users.ensure_user(prefix, project_id, derive_password(SECRET, prefix))
    cred = users.create_ec2_credential(user_id, project_id)
    try:
        assert cred.secret not in repr(cred)
        url = f"{devcloud['keystone']['auth_url']}/credentials/{cred.credential_id}"
        shown = users.session.get(url).json()["credential"]
        assert (shown["type"], shown["user_id"], shown["project_id"]) == (
            "ec2",
            user_id,
            project_id,
        )
        assert cred.access in shown["blob"] and cred.secret in shown["blob"]
        # A retried create of the same keypair (Keystone: 409) is not an error.
        assert users._store_ec2(user_id, project_id, cred.access, cred.secret) == (
            cred.credential_id
        )
    finally:
        assert users.delete_credential(cred.credential_id) is True
    assert users.delete_credential(cred.credential_id) is False
    assert users.session.get(url, raise_exc=False).status_code == 404
    users.delete_user(user_id)
    users.delete_project(project_id)


def test_nothing_outside_the_stack_domain_is_deleted(
    devcloud: dict[str, Any], keystone_admin_session: ks_session.Session
) -> None:
    # Even with a cloud admin's session, only the stack domain is touched.
    ks = devcloud["keystone"]
    admin_users = StackUsers(keystone_admin_session, ks["stack_user_domain_id"])
    demo_project = keystone_admin_session.get(
        f"{ks['auth_url']}/projects", params={"name": "demo"}
    ).json()["projects"][0]
    demo_user = keystone_admin_session.get(
        f"{ks['auth_url']}/users", params={"name": "demo"}
    ).json()["users"][0]
    with pytest.raises(ValidationError, match="not in the stack user domain"):
        admin_users.delete_user(demo_user["id"])
    with pytest.raises(ValidationError, match="not in the stack user domain"):
        admin_users.delete_project(demo_project["id"])
    assert (
        keystone_admin_session.get(
            f"{ks['auth_url']}/users/{demo_user['id']}", raise_exc=False
        ).status_code
        == 200
    )


def test_errors_carry_no_secret(
    devcloud: dict[str, Any], users: StackUsers, prefix: str
) -> None:
    ks = devcloud["keystone"]
    wrong = "Wrong-Admin-Password-42"
    bad = StackUsers.from_password(
        ks["auth_url"],
        domain_id=ks["stack_user_domain_id"],
        username=ks["stack_domain_admin"],
        password=wrong,
    )
    with pytest.raises(CloudError) as caught:
        bad.list_users()
    assert (caught.value.service, caught.value.status) == ("identity", 401)
    assert not caught.value.retryable
    assert wrong not in str(caught.value)

    # A user for an unknown project is refused before it is created.
    password = derive_password(SECRET, "never-created")
    with pytest.raises(CloudError, match="not found") as caught:
        users.ensure_user(prefix, uuid.uuid4().hex, password)
    assert caught.value.status == 404
    assert password not in str(caught.value)
    assert users.find_user(prefix) is None


def test_names_are_checked_before_any_call(users: StackUsers) -> None:
    with pytest.raises(ValidationError):
        users.ensure_project("p" * 65)
    with pytest.raises(ValidationError):
        users.ensure_user("u" * 256, "project", "password")
    with pytest.raises(ValidationError):
        users.ensure_user("u", "project", "")
