"""An asynchronous action of a swflows whose deferred work acts through
trusts (``deferred_auth_method = trusts``), picked by the workflow's
``config_file``: it acts as its caller, in its project, and its result
reaches mistral-api through a trust after the caller's token was revoked.

Mistral goes on with the workflow in the context of that result's PUT: the
next action gets a token of the trust, not the caller's.  swflows reads it
as its trustee, acts through that same trust, and keeps it for
``[trustee] result_trust_keep`` seconds (the dev cloud's: 30) or while a
deployment acts through it; then Keystone holds none of them."""

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
from tests.functional.test_trusts import revoke, trusts_of
from tests.mistral.conftest import DEPLOY, MistralApi, make_hello, wait_for_status


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


#: only the deploy: what follows it runs with the trust's token (below)
DEPLOY_ONLY = DEPLOY[: DEPLOY.index("      on-success: show")].replace(
    "    shown: <% $.shown %>\n", ""
)


@pytest.fixture(scope="module")
def hello_of_caller(sw_trusts: Swflows, caller: oslo_context.RequestContext) -> str:
    return make_hello(sw_trusts, caller)


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
    before = trusts_of(devcloud, str(caller.user_id))
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
        kept = sw_trusts.store.owned_ids(trusts.CALLBACK)
        named = [k for k in kept if trusts.callback_deployment(k) == deployment_id]
        if named:
            [pending] = named
            break
        assert time.monotonic() < deadline, kept
        time.sleep(0.2)
    assert sw_trusts.store.get_trust(trusts.CALLBACK, pending) is not None
    revoke(devcloud, token)
    ended = mistral_api.wait(run)
    assert ended["state"] == "SUCCESS", (ended["state_info"], mistral_api.tasks(run))
    deployment = ended["output"]["deployment"]
    assert deployment["id"] == deployment_id
    assert deployment["status"] == states.COMPLETE, deployment
    assert deployment["output_values"]["result"] == "hello trusted"
    [sent] = sw_trusts.store.results_of(deployment_id)
    assert sent.outcome == "delivered" and sent.trust_key == pending
    sw_trusts.undeploy(deployment_id, wait=True, context=caller)
    # the trust outlives the result by [trustee] result_trust_keep, then goes
    until_no_trusts(devcloud, sw_trusts, str(caller.user_id), before)


#: an asynchronous deploy, then a synchronous show and an asynchronous
#: undeploy, each run by Mistral with a token of the trust the previous
#: result was sent through
CHAIN = """---
version: '2.0'
chain_wf:
  input:
    - server_id
    - config_id
    - name
    - config_file
    - deployment_id
  output:
    deployed: <% $.deployed %>
    shown: <% $.shown %>
    undeployed: <% $.undeployed %>
  tasks:
    deploy:
      action: swflows.deploy
      input:
        server_id: <% $.server_id %>
        config_id: <% $.config_id %>
        deployment_id: <% $.deployment_id %>
        input_values:
          name: <% $.name %>
        timeout: 120
        wait: false
        config_file: <% $.config_file %>
      timeout: 300
      publish:
        deployed: <% task().result %>
      on-success: show
    show:
      action: swflows.show
      input:
        deployment_id: <% $.deployed.id %>
        config_file: <% $.config_file %>
      publish:
        shown: <% task().result %>
      on-success: undeploy
    undeploy:
      action: swflows.undeploy
      input:
        deployment_id: <% $.deployed.id %>
        wait: false
        config_file: <% $.config_file %>
      timeout: 300
      publish:
        undeployed: <% task().result %>
"""


def test_the_actions_after_a_result_act_through_the_trust_it_was_sent_with(
    devcloud: dict[str, Any],
    mistral: dict[str, Any],
    mistral_api: MistralApi,
    workflow: Any,
    sw_trusts: Swflows,
    caller: oslo_context.RequestContext,
    own_server: str,
    hello_of_caller: str,
) -> None:
    """Mistral runs ``show`` and ``undeploy`` in the context of the PUT
    that sent the deploy's result, a token of that result's trust: swflows
    reads the token as its trustee (it may not read itself) and acts as
    the caller through that same trust (a token scoped by a trust cannot
    make another).  No trust outlives the chain."""
    name = workflow("chain_wf", CHAIN)
    before = trusts_of(devcloud, str(caller.user_id))
    deployment_id = str(uuid.uuid4())
    run = mistral_api.start(
        name,
        server_id=own_server,
        config_id=hello_of_caller,
        name="chained",
        deployment_id=deployment_id,
        config_file=mistral["swflows_trusts_conf"],
    )
    ended = mistral_api.wait(run)
    assert ended["state"] == "SUCCESS", (ended["state_info"], mistral_api.tasks(run))
    output = ended["output"]
    assert output["deployed"]["status"] == states.COMPLETE
    assert output["shown"]["id"] == deployment_id
    assert output["shown"]["output_values"]["result"] == "hello chained"
    assert output["undeployed"] == {"id": deployment_id, "undeployed": True}
    # the undeploy's result went through the deploy's trust, handed on
    # (while both rows are kept: the first goes result_trust_keep after it
    # was sent)
    rows = sw_trusts.store.results_of(deployment_id)
    assert {r.outcome for r in rows} <= {"delivered"} and rows, rows
    held = {sw_trusts.store.get_trust(trusts.CALLBACK, str(r.trust_key)) for r in rows}
    assert len(held - {None}) == 1, held
    until_no_trusts(devcloud, sw_trusts, str(caller.user_id), before)


def test_24_workflows_at_once_deploy_and_undeploy_through_trusts(
    devcloud: dict[str, Any],
    mistral: dict[str, Any],
    mistral_api: MistralApi,
    workflow: Any,
    sw_trusts: Swflows,
    caller: oslo_context.RequestContext,
    own_server: str,
    hello_of_caller: str,
) -> None:
    """24 chains at once, half of them with synchronous actions: 24 SUCCESS."""
    chain = workflow("chain_wf", CHAIN)
    sync = workflow("chain_wf", CHAIN.replace("wait: false", "wait: true"))
    before = trusts_of(devcloud, str(caller.user_id))
    runs = {}
    for index in range(24):
        deployment_id = str(uuid.uuid4())
        runs[deployment_id] = mistral_api.start(
            chain if index % 2 else sync,
            server_id=own_server,
            config_id=hello_of_caller,
            name=f"many-{index}",
            deployment_id=deployment_id,
            config_file=mistral["swflows_trusts_conf"],
        )
    states_seen = {}
    for deployment_id, run in runs.items():
        ended = mistral_api.wait(run, timeout=600)
        states_seen[deployment_id] = ended["state"]
        if ended["state"] == "SUCCESS":
            assert ended["output"]["undeployed"]["id"] == deployment_id
    assert list(states_seen.values()) == ["SUCCESS"] * 24, {
        d: mistral_api.tasks(runs[d]) for d, s in states_seen.items() if s != "SUCCESS"
    }
    until_no_trusts(devcloud, sw_trusts, str(caller.user_id), before, timeout=180)


def until_no_trusts(
    devcloud: dict[str, Any],
    sw: Swflows,
    trustor: str,
    before: set[str],
    timeout: float = 120,
) -> None:
    """Wait until Keystone holds no trust of ``trustor`` made since
    ``before`` and swflows keeps no result's trust."""
    deadline = time.monotonic() + timeout
    while True:
        left = trusts_of(devcloud, trustor) - before
        kept = sw.store.owned_ids(trusts.CALLBACK)
        if not left and not kept:
            return
        assert time.monotonic() < deadline, (left, kept)
        time.sleep(1)
