"""Keystone as swflows uses it: the stack domain admin manages stack users."""

import uuid
from typing import Any

import pytest
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3


def test_stack_domain_admin_creates_and_deletes_a_stack_user(
    devcloud: dict[str, Any],
    stack_domain_admin: ks_session.Session,
    keystone_admin_session: ks_session.Session,
) -> None:
    ks = devcloud["keystone"]
    auth_url, domain = ks["auth_url"], ks["stack_user_domain_id"]
    auth = stack_domain_admin.auth
    assert isinstance(auth, v3.Password)
    access = auth.get_access(stack_domain_admin)
    assert access.domain_id == domain and not access.project_scoped

    project = stack_domain_admin.post(
        auth_url + "/projects",
        json={"project": {"name": "smoke-" + uuid.uuid4().hex, "domain_id": domain}},
    ).json()["project"]
    try:
        password = uuid.uuid4().hex
        user = stack_domain_admin.post(
            auth_url + "/users",
            json={
                "user": {
                    "name": "smoke-" + uuid.uuid4().hex,
                    "password": password,
                    "domain_id": domain,
                    "default_project_id": project["id"],
                }
            },
        ).json()["user"]
        roles = stack_domain_admin.get(
            auth_url + "/roles", params={"name": ks["stack_user_role"]}
        ).json()["roles"]
        assert len(roles) == 1
        stack_domain_admin.put(
            "{}/projects/{}/users/{}/roles/{}".format(
                auth_url, project["id"], user["id"], roles[0]["id"]
            )
        )

        user_auth = v3.Password(
            auth_url=auth_url,
            user_id=user["id"],
            password=password,
            project_id=project["id"],
        )
        user_session = ks_session.Session(auth=user_auth)
        user_access = user_auth.get_access(user_session)
        assert user_access.project_id == project["id"]
        assert ks["stack_user_role"] in (user_access.role_names or [])
        token = user_access.auth_token
        check = {"X-Subject-Token": token}
        assert (
            keystone_admin_session.get(
                auth_url + "/auth/tokens", headers=check
            ).status_code
            == 200
        )

        stack_domain_admin.delete(auth_url + "/users/" + user["id"])

        with pytest.raises(ks_exc.NotFound):
            keystone_admin_session.get(auth_url + "/auth/tokens", headers=check)
        with pytest.raises(ks_exc.Unauthorized):
            ks_session.Session(
                auth=v3.Password(
                    auth_url=auth_url,
                    user_id=user["id"],
                    password=password,
                    project_id=project["id"],
                )
            ).get_token()
    finally:
        stack_domain_admin.delete(auth_url + "/projects/" + project["id"])
    with pytest.raises(ks_exc.NotFound):
        keystone_admin_session.get(auth_url + "/projects/" + project["id"])


def test_wrong_password_is_refused(devcloud: dict[str, Any]) -> None:
    ks = devcloud["keystone"]
    auth = v3.Password(
        auth_url=ks["auth_url"], **dict(ks["demo"], password="not-the-password")
    )
    with pytest.raises(ks_exc.Unauthorized) as err:
        ks_session.Session(auth=auth).get_token()
    assert err.value.http_status == 401
