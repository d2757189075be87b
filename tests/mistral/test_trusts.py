"""An asynchronous action of a swflows whose deferred work acts through
trusts (``deferred_auth_method = trusts``), picked by the workflow's
``config_file``: it acts as its caller, in its project, and its result
reaches mistral-api through a trust after the caller's token was revoked.

Mistral goes on with the workflow in the context of that result's PUT: the
next action gets the trust's token, not the caller's."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3
from oslo_context import context as oslo_context

from swflows import conf as sw_conf
from swflows import projects, states, trusts
from swflows.api import Swflows
from tests.mistral.conftest import DEPLOY, HELLO, MistralApi, wait_for_status


@pytest.fixture(scope="module")
def caller(devcloud: dict[str, Any]) -> oslo_context.RequestContext:
    """The demo user, as swflows' API takes a caller: token, user,
    project, roles."""
    ks = devcloud["keystone"]
    session = ks_session.Session(
        auth=v3.Password(auth_url=ks["auth_url"], **ks["demo"])
    )
    access = session.auth.get_access(session)  # type: ignore[union-attr]
    return oslo_context.RequestContext(
        auth_token=access.auth_token,
        user_id=access.user_id,
        project_id=access.project_id,
        roles=list(access.role_names),
    )


@pytest.fixture(scope="module")
def sw_trusts(mistral: dict[str, Any]) -> Iterator[Swflows]:
    """The swflows the workflow picks (its tables, its trusts), no runner."""
    conf = sw_conf.get_conf(config_files=[mistral["swflows_trusts_conf"]])
    made = Swflows.from_conf(conf, start=False)
    yield made
    made.close()


@pytest.fixture(scope="module")
def own_server(
    sw_trusts: Swflows, caller: oslo_context.RequestContext
) -> Iterator[str]:
    """A server booted as the demo user, its project's."""
    made = sw_trusts.create_server(
        "mistral-trusted", "cirros", "m1.tiny", context=caller
    )
    yield str(made["server_id"])
    sw_trusts.delete_server(made["server_id"], context=caller)


def revoke(devcloud: dict[str, Any], token: str) -> None:
    ks = devcloud["keystone"]
    admin = ks_session.Session(auth=v3.Password(auth_url=ks["auth_url"], **ks["admin"]))
    resp = admin.delete(
        ks["auth_url"] + "/auth/tokens", headers={"X-Subject-Token": token}
    )
    assert resp.status_code == 204, resp.text


#: only the deploy: what follows it runs with the trust's token (below)
DEPLOY_ONLY = DEPLOY[: DEPLOY.index("      on-success: show")].replace(
    "    shown: <% $.shown %>\n", ""
)


@pytest.fixture(scope="module")
def hello_of_caller(sw_trusts: Swflows, caller: oslo_context.RequestContext) -> str:
    config = sw_trusts.create_config(
        "hello",
        HELLO,
        group="script",
        inputs=[{"name": "name"}, {"name": "pause", "default": "0"}],
        outputs=[{"name": "result"}],
        context=caller,
    )
    return config.id


def test_the_result_reaches_mistral_through_a_trust_after_the_token_is_revoked(
    devcloud: dict[str, Any],
    mistral: dict[str, Any],
    mistral_api: MistralApi,
    workflow: Any,
    sw_trusts: Swflows,
    caller: oslo_context.RequestContext,
    own_server: str,
    hello_of_caller: str,
) -> None:
    name = workflow("deploy_wf", DEPLOY_ONLY)
    # a login of its own starts the execution: its token is revoked below
    starter = MistralApi(devcloud)
    token = starter.session.get_token()
    assert token is not None
    deployment_id = str(uuid.uuid4())
    run = starter.start(
        name,
        server_id=own_server,
        config_id=hello_of_caller,
        name="trusted",
        wait=False,
        pause=6,
        deployment_id=deployment_id,
        config_file=mistral["swflows_trusts_conf"],
    )
    assert wait_for_status(sw_trusts, deployment_id) == states.IN_PROGRESS
    # the action acted as its caller: the deployment is the demo project's
    owner = sw_trusts.store.get_owner(projects.DEPLOYMENT, deployment_id)
    assert owner == projects.Owner(str(caller.project_id), str(caller.user_id))
    # and its result waits under a trust of the caller's, kept under the
    # deployment once the action returned (under none before)
    deadline = time.monotonic() + 30
    while True:
        [pending] = sw_trusts.store.owned_ids(trusts.CALLBACK)
        if trusts.callback_deployment(pending) == deployment_id:
            break
        assert time.monotonic() < deadline, pending
        time.sleep(0.2)
    assert sw_trusts.store.get_trust(trusts.CALLBACK, pending) is not None
    revoke(devcloud, token)
    ended = mistral_api.wait(run)
    assert ended["state"] == "SUCCESS", (ended["state_info"], mistral_api.tasks(run))
    deployment = ended["output"]["deployment"]
    assert deployment["id"] == deployment_id
    assert deployment["status"] == states.COMPLETE, deployment
    assert deployment["output_values"]["result"] == "hello trusted"
    assert sw_trusts.store.owned_ids(trusts.CALLBACK) == []  # the trust is gone
    sw_trusts.undeploy(deployment_id, wait=True, context=caller)


def test_the_next_action_gets_the_trusts_token_and_fails(
    mistral: dict[str, Any],
    mistral_api: MistralApi,
    workflow: Any,
    sw_trusts: Swflows,
    caller: oslo_context.RequestContext,
    own_server: str,
    hello_of_caller: str,
) -> None:
    """A defect, pinned: the swflows action after a result reported
    through a trust fails.  Mistral runs it with the token of the PUT that
    reported (the trust's), which Keystone does not let read itself, as
    swflows does to learn its caller (and which dies with the trust)."""
    name = workflow("deploy_wf", DEPLOY)  # deploy, then show
    deployment_id = str(uuid.uuid4())
    run = mistral_api.start(
        name,
        server_id=own_server,
        config_id=hello_of_caller,
        name="then",
        wait=False,
        deployment_id=deployment_id,
        config_file=mistral["swflows_trusts_conf"],
    )
    try:
        ended = mistral_api.wait(run)
        tasks = mistral_api.tasks(run)
        assert tasks["deploy"]["state"] == "SUCCESS", tasks["deploy"]
        assert tasks["deploy"]["result"]["status"] == states.COMPLETE
        assert ended["state"] == "ERROR", ended
        [action] = mistral_api.action_executions(tasks["show"]["id"])
        assert action["output"]["result"] == {
            "kind": "cloud_error",
            "message": "identity: validate token failed: HTTP 403: FORBIDDEN",
        }
    finally:
        sw_trusts.undeploy(deployment_id, wait=True, context=caller)
