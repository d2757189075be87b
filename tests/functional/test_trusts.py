"""Deferred work through a Keystone trust, on PostgreSQL with the dev cloud.

A deployment made with the token of project demo2's user gets a trust
from that user to swflows' trustee; its signal store lives in demo2's
Swift account.  The token is then revoked: a new engine still resumes
the parked flows, one deployment times out, another completes on its
signal, and both are undeployed through the trust, which is deleted with
them, leaving no trust, user, object or queue behind.
"""

from __future__ import annotations

import contextlib
import functools
import json
import queue
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import sqlalchemy as sa
from keystoneauth1 import session as ksa_session
from keystoneauth1.identity import v3
from oslo_context import context as oslo_context

from swflows import conf as sw_conf
from swflows import exceptions, projects, states, trusts
from swflows.api import Swflows
from swflows.clients.messaging import SignedUrlClient
from swflows.clients.object_store import ObjectStore
from swflows.embedding import mistral
from tests.functional import flowkit
from tests.functional import test_embedding_mistral as mistral_tests
from tests.functional.db_fixtures import *  # noqa: F403 (fixtures)
from tests.functional.db_fixtures import SECRET_KEY, unique_prefix
from tests.functional.fakeserver import FakeServer
from tests.functional.flowkit import keystone as devcloud_keystone
from tests.functional.test_flows import SCRIPT
from tests.functional.test_runner import (
    FINAL,
    STARTED,
    parked,
    put_signal,
    signal_inputs,
    until,
)

#: one after the other on one worker: each counts the trusts demo2's user
#: made in Keystone, which the others would add to
pytestmark = pytest.mark.xdist_group("trusts")

#: the Mistral actions' descriptors, as a fixture of that name
mistral_descriptors = mistral_tests.descriptors


def login(cloud: dict[str, Any], who: str) -> tuple[str, dict[str, Any]]:
    """A project-scoped token of ``who`` (admin, demo2), and its body."""
    ks = cloud["keystone"]
    user = ks[who]
    resp = requests.post(
        ks["auth_url"] + "/auth/tokens",
        json={
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {
                        "user": {
                            "name": user["username"],
                            "password": user["password"],
                            "domain": {"id": user["user_domain_id"]},
                        }
                    },
                },
                "scope": {
                    "project": {
                        "name": user["project_name"],
                        "domain": {"id": user["project_domain_id"]},
                    }
                },
            }
        },
        timeout=30,
    )
    resp.raise_for_status()
    return resp.headers["X-Subject-Token"], resp.json()["token"]


def trusts_of(cloud: dict[str, Any], trustor_id: str) -> set[str]:
    """The ids of the trusts ``trustor_id`` made, as the admin lists them."""
    token, _ = login(cloud, "admin")
    resp = requests.get(
        cloud["keystone"]["auth_url"] + "/OS-TRUST/trusts",
        params={"trustor_user_id": trustor_id},
        headers={"X-Auth-Token": token},
        timeout=30,
    )
    resp.raise_for_status()
    return {t["id"] for t in resp.json()["trusts"]}


def revoke(cloud: dict[str, Any], token: str) -> None:
    admin, _ = login(cloud, "admin")
    url = cloud["keystone"]["auth_url"] + "/auth/tokens"
    headers = {"X-Auth-Token": admin, "X-Subject-Token": token}
    assert requests.delete(url, headers=headers, timeout=30).status_code == 204
    assert requests.get(url, headers=headers, timeout=30).status_code == 404


def project_objects(cloud: dict[str, Any], who: str, *ids: str) -> list[str]:
    """Objects naming one of ``ids`` in the Swift account of ``who``'s project."""
    ks = cloud["keystone"]
    user = ks[who]
    swift = ObjectStore.from_session(
        ksa_session.Session(
            auth=v3.Password(
                auth_url=ks["auth_url"],
                username=user["username"],
                password=user["password"],
                user_domain_id=user["user_domain_id"],
                project_name=user["project_name"],
                project_domain_id=user["project_domain_id"],
            )
        )
    )
    return [
        f"{container}/{o.name}"
        for container in swift.list_containers()
        for o in swift.list_objects(container)
        if any(i in o.name for i in ids)
    ]


@pytest.fixture(scope="module")
def trustee(devcloud: dict[str, Any]) -> dict[str, str]:
    """swflows' trustee user, made on a cloud started before it existed."""
    ks = devcloud["keystone"]
    found: dict[str, str] = devcloud_keystone.ensure_trustee(
        ks["auth_url"], ks["admin"]["password"]
    )
    return found


@contextlib.contextmanager
def engine(
    cloud: dict[str, Any],
    trustee: dict[str, str],
    folder: Path,
    database: str,
    prefix: str,
) -> Iterator[Swflows]:
    """A Swflows whose deferred work acts through trusts."""
    path = write_engine_conf(cloud, trustee, folder, database, prefix)
    made = Swflows.from_conf(sw_conf.get_conf(config_files=[str(path)]))
    try:
        yield made
    finally:
        made.close()
        made.store.close()


def write_engine_conf(
    cloud: dict[str, Any],
    trustee: dict[str, str],
    folder: Path,
    database: str,
    prefix: str,
) -> Path:
    """The configuration of a Swflows whose deferred work acts through
    trusts, on ``database`` under table ``prefix``."""
    path = folder / "swflows.conf"
    path.touch(mode=0o600)
    path.write_text(
        flowkit.swflowsconf.conf_text(
            cloud,
            database=database,
            extra={
                "DEFAULT": ["deferred_auth_method = trusts"],
                "database": [
                    f"table_prefix = {prefix}",
                    f"secret_key = {SECRET_KEY.decode()}",
                ],
                "watcher": [
                    f"poll_interval = {flowkit.POLL_INTERVAL}",
                    f"max_poll_interval = {flowkit.MAX_POLL_INTERVAL}",
                ],
                "trustee": [
                    "auth_type = password",
                    *(f"{key} = {value}" for key, value in trustee.items()),
                ],
            },
        )
    )
    return path


def demo2_caller(devcloud: dict[str, Any]) -> tuple[str, Any]:
    """A token of demo2's user, and the request context it makes."""
    token, body = login(devcloud, "demo2")
    return token, oslo_context.RequestContext(
        auth_token=token,
        user_id=body["user"]["id"],
        project_id=body["project"]["id"],
        roles=[r["name"] for r in body["roles"]],
    )


def test_deferred_work_goes_on_through_the_trust_after_the_token_is_revoked(
    devcloud: dict[str, Any],
    trustee: dict[str, str],
    pg_url: str,
    tmp_path: Path,
) -> None:
    token, caller = demo2_caller(devcloud)
    trustor = str(caller.user_id)
    before = trusts_of(devcloud, trustor)
    prefix = unique_prefix()
    with engine(devcloud, trustee, tmp_path, pg_url, prefix) as first:
        config = first.create_config(
            "app",
            SCRIPT,
            group="script",
            outputs=[{"name": "result"}],
            context=caller,
        )
        late = first.deploy(
            str(uuid.uuid4()), config.id, timeout=8, wait=False, context=caller
        )
        answered = first.deploy(
            str(uuid.uuid4()), config.id, timeout=120, wait=False, context=caller
        )
        for dep_id in (late.id, answered.id):
            until(functools.partial(parked, first, dep_id), what="the flow to park")
        made = {
            first.store.get_trust(projects.DEPLOYMENT, d.id) for d in (late, answered)
        }
        assert None not in made and len(made) == 2
        assert made <= trusts_of(devcloud, trustor) - before
        # sealed at rest: the id is nowhere in clear
        with first.store.engine.connect() as conn:
            owners = sa.table(f"{prefix}owners", sa.column("trust"))
            stored = conn.execute(
                sa.select(owners.c.trust).where(owners.c.trust.is_not(None))
            ).all()
        assert len(stored) == 2
        assert not any(t in str(row) for row in stored for t in made if t)
        # the signal stores live in the caller's project, not swflows' own:
        # an agent's "started" lands there (late's 8 s may be over on a
        # loaded machine: its store is gone then)
        put_signal(first, answered.id, STARTED)
        held = project_objects(devcloud, "demo2", late.id, answered.id)
        assert [o for o in held if answered.id in o] != []
        if not [o for o in held if late.id in o]:
            until(
                lambda: first.show(late.id).status != states.IN_PROGRESS,
                what="late's store gone with its timeout",
            )
        assert flowkit.leftovers(first, late.id, answered.id) == {}
    revoke(devcloud, token)

    # a new engine: the caller's token is gone, the trust is not
    with engine(devcloud, trustee, tmp_path, pg_url, prefix) as second:
        assert parked(second, answered.id) is not None
        put_signal(second, answered.id, FINAL)
        done = second.wait(answered.id, timeout=60)
        assert done.status == states.COMPLETE
        assert done.output_values["result"] == "r"
        timed_out = second.wait(late.id, timeout=60)
        assert timed_out.status == states.FAILED
        assert (timed_out.reason or {})["kind"] == states.ReasonKind.TIMEOUT.value
        assert second.list_flows() == []

        for dep in (late, answered):
            second.undeploy(dep.id)
            with pytest.raises(exceptions.DeploymentNotFound):
                second.show(dep.id)
        assert flowkit.leftovers(second, late.id, answered.id) == {}
    assert project_objects(devcloud, "demo2", late.id, answered.id) == []
    assert not made & trusts_of(devcloud, trustor)


def test_the_sweep_removes_late_signals_stores_in_the_callers_project(
    devcloud: dict[str, Any],
    trustee: dict[str, str],
    pg_url: str,
    tmp_path: Path,
) -> None:
    """A late signal recreates an ended deployment's store in demo2's
    account (a TempURL object) and project (a queue): the watcher's sweep
    removes both through demo2's trust, and leaves a waiting one's."""
    _, caller = demo2_caller(devcloud)
    trustor, project = str(caller.user_id), str(caller.project_id)
    before = trusts_of(devcloud, trustor)
    with engine(devcloud, trustee, tmp_path, pg_url, unique_prefix()) as sw:
        # sweeps only when the test asks for one
        sw.conf.set_override("sweep_interval", 3600.0, "watcher")
        config = sw.create_config("app", SCRIPT, group="script", context=caller)
        deps = {
            (name, transport): sw.deploy(
                str(uuid.uuid4()),
                config.id,
                timeout=120,
                wait=False,
                signal_transport=transport,
                context=caller,
            ).id
            for name, transport in (
                ("ended", "TEMP_URL_SIGNAL"),
                ("waiting", "TEMP_URL_SIGNAL"),
                ("ended", "ZAQAR_SIGNAL"),
            )
        }
        for dep_id in deps.values():
            until(functools.partial(parked, sw, dep_id), what="the flows to park")
        ended_url, waiting_url = (
            deps[("ended", "TEMP_URL_SIGNAL")],
            deps[("waiting", "TEMP_URL_SIGNAL")],
        )
        ended_queue = deps[("ended", "ZAQAR_SIGNAL")]
        put_signal(sw, waiting_url, STARTED)  # its store: an object, in demo2's
        signed = signal_inputs(sw, ended_queue)["deploy_queue_signed_url"]
        if isinstance(signed, str):
            signed = json.loads(signed)
        queue_name = f"sws-{ended_queue}-1"
        messaging = sw.services.for_deployment(ended_queue).project_clients.messaging
        assert messaging.queue_exists(queue_name)  # in demo2's project
        put_signal(sw, ended_url, FINAL)
        SignedUrlClient(signed).post(FINAL, ttl=600)
        for dep_id in (ended_url, ended_queue):
            assert sw.wait(dep_id, timeout=60).status == states.COMPLETE
        assert project_objects(devcloud, "demo2", ended_url) == []
        assert not messaging.queue_exists(queue_name)

        # late signals, as agents retrying would send them
        put_signal(sw, ended_url, FINAL)
        SignedUrlClient(signed).post(FINAL, ttl=600)
        assert len(project_objects(devcloud, "demo2", ended_url)) == 1
        assert messaging.queue_exists(queue_name)
        # in demo2's account and project, none in swflows' own
        assert flowkit.zaqar_queues(ended_queue) == [f"{project}/{queue_name}"]
        assert flowkit.leftovers(sw, ended_url) == {}
        removed = sw.runner.watcher.sweeper.sweep()
        assert sorted(removed) == sorted([f"{ended_url}/1", f"{ended_queue}/1"])
        assert project_objects(devcloud, "demo2", ended_url) == []
        assert not messaging.queue_exists(queue_name)
        assert len(project_objects(devcloud, "demo2", waiting_url)) == 1
        assert sw.runner.watcher.failures == {}

        put_signal(sw, waiting_url, FINAL)
        assert sw.wait(waiting_url, timeout=60).status == states.COMPLETE
        for dep_id in deps.values():
            sw.undeploy(dep_id)
        assert flowkit.leftovers(sw, *deps.values()) == {}
    assert project_objects(devcloud, "demo2", *deps.values()) == []
    assert not trusts_of(devcloud, trustor) - before


def test_a_reverted_deployment_lets_go_of_its_trust_last(
    devcloud: dict[str, Any],
    trustee: dict[str, str],
    pg_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its signal store, in the caller's project, is reverted through the
    trust; the deployment is kept FAILED with its trust, which goes after
    it is deleted, with its owner row."""
    from swflows.tasks import metadata as metadata_tasks

    _, caller = demo2_caller(devcloud)
    trustor = str(caller.user_id)
    before = trusts_of(devcloud, trustor)
    dep_id = str(uuid.uuid4())

    def unpublishable(self: Any, *args: Any, **kwargs: Any) -> None:
        raise exceptions.SwflowsError("the metadata could not be published")

    with engine(devcloud, trustee, tmp_path, pg_url, unique_prefix()) as sw:
        trustee_client = sw.services.clients.trustee
        assert trustee_client is not None
        deleted = trustee_client.delete
        left_when_deleted: list[list[str]] = []

        def delete(trust_id: str) -> bool:
            left_when_deleted.append(project_objects(devcloud, "demo2", dep_id))
            return deleted(trust_id)

        monkeypatch.setattr(trustee_client, "delete", delete)
        monkeypatch.setattr(metadata_tasks.PublishMetadata, "execute", unpublishable)
        config = sw.create_config("app", SCRIPT, group="script", context=caller)
        with pytest.raises(Exception, match="could not be published"):
            sw.deploy(
                str(uuid.uuid4()),
                config.id,
                deployment_id=dep_id,
                timeout=60,
                context=caller,
            )
        # its record is kept FAILED, naming the step, with its owner row
        # and trust, until it is deleted; its signal store is gone already
        row = sw.show(dep_id)
        assert row.status == "FAILED"
        assert row.reason is not None
        assert row.reason["step"] == "PublishMetadata", row.reason
        assert flowkit.leftovers(sw, dep_id) == {}
        assert left_when_deleted == []
        sw.undeploy(dep_id, context=caller)  # runs no DELETE, publishes no task
        with pytest.raises(exceptions.DeploymentNotFound):
            sw.show(dep_id)
        assert sw.store.get_owner(projects.DEPLOYMENT, dep_id) is None
        assert flowkit.leftovers(sw, dep_id) == {}
    assert left_when_deleted == [[]]  # the store was gone when the trust went
    assert project_objects(devcloud, "demo2", dep_id) == []
    assert trusts_of(devcloud, trustor) - before == set()


def test_a_mistral_result_goes_back_through_a_trust_after_the_token_is_revoked(
    devcloud: dict[str, Any],
    trustee: dict[str, str],
    pg_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mistral_descriptors: dict[str, Any],
) -> None:
    token, body = login(devcloud, "demo2")
    trustor: str = body["user"]["id"]
    before = trusts_of(devcloud, trustor)
    prefix = unique_prefix()
    path = write_engine_conf(devcloud, trustee, tmp_path, pg_url, prefix)
    monkeypatch.setenv(mistral.CONFIG_DIRS_ENV, str(tmp_path))
    admin, _ = login(devcloud, "admin")
    seen: list[dict[str, Any]] = []

    def validate(put: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        """What Keystone says of the token Mistral is sent, while it is sent
        (the trust, and so its tokens, are deleted once it was)."""
        found = requests.get(
            devcloud["keystone"]["auth_url"] + "/auth/tokens",
            headers={"X-Auth-Token": admin, "X-Subject-Token": put["token"] or ""},
            timeout=30,
        )
        seen.append(found.json()["token"] if found.status_code == 200 else {})
        received.put(put)

    try:
        sw = mistral.instance(str(path))[0]
        caller = oslo_context.RequestContext(
            user_id=trustor, project_id=body["project"]["id"], roles=["member"]
        )
        config = sw.create_config("app", SCRIPT, group="script", context=caller)
        deployment_id = str(uuid.uuid4())
        with mistral_tests.Receiver() as receiver:
            received: queue.Queue[dict[str, Any]] = queue.Queue()
            setattr(receiver.received, "put", validate)  # noqa: B010
            action_id = str(uuid.uuid4())
            ctx = receiver.context(action_id)
            ctx.security.auth_token = token
            _, started = mistral_tests.run(
                mistral_descriptors,
                "swflows.deploy",
                {
                    "server_id": str(uuid.uuid4()),
                    "config_id": config.id,
                    "timeout": 5,
                    "wait": False,
                    "deployment_id": deployment_id,
                    "config_file": str(path),
                },
                ctx,
            )
            assert started is None  # asynchronous
            # the action acts as its caller: the deployment is demo2's, with
            # a trust of its own beside the one the result goes back through
            owner = sw.store.get_owner(projects.DEPLOYMENT, deployment_id)
            assert owner == projects.Owner(body["project"]["id"], trustor)
            own = sw.store.get_trust(projects.DEPLOYMENT, deployment_id)
            [held] = trusts_of(devcloud, trustor) - before - {own}
            # kept under the deployment it waits for (the sweeper lets go of
            # it once that ended, should this process die before reporting)
            [pending] = sw.store.owned_ids(trusts.CALLBACK)
            assert trusts.callback_deployment(pending) == deployment_id
            assert sw.store.get_trust(trusts.CALLBACK, pending) == held
            revoke(devcloud, token)
            put = received.get(timeout=90)
        assert put["path"] == f"/v2/action_executions/{action_id}"
        assert put["body"]["state"] == "ERROR"  # it timed out
        assert put["token"] not in (None, token)
        # the token Mistral got acted as the caller, through the trust
        [acting] = seen
        assert acting["user"]["id"] == trustor
        assert acting["OS-TRUST:trust"]["id"] == held
        # kept while the next action may act through it ([trustee]
        # result_trust_keep), then deleted by the sweep with the result's row
        outbox = sw.runner.watcher.sweeper.outbox
        assert outbox.forget_expired() == 0
        assert held in trusts_of(devcloud, trustor)
        [sent] = sw.store.results_of(deployment_id)
        sw.store.result_sent(sent.id, "delivered", -1.0)  # its keep is over
        assert outbox.forget_expired() == 1
        assert held not in trusts_of(devcloud, trustor)
        assert own in trusts_of(devcloud, trustor)  # until it is undeployed
        sw.undeploy(deployment_id)
        assert not trusts_of(devcloud, trustor) - before
        with sw.store.engine.connect() as conn:
            owners = sa.table(f"{prefix}owners", sa.column("kind"))
            kept = conn.execute(
                sa.select(owners.c.kind).where(owners.c.kind == trusts.CALLBACK)
            ).all()
        assert kept == []  # nor its sealed record
    finally:
        mistral.close_all()


def test_a_groups_later_batches_go_on_through_its_trust_after_a_restart(
    devcloud: dict[str, Any],
    trustee: dict[str, str],
    pg_url: str,
    tmp_path: Path,
) -> None:
    token, caller = demo2_caller(devcloud)
    trustor = str(caller.user_id)
    before = trusts_of(devcloud, trustor)
    prefix = unique_prefix()
    servers = {f"m{i}": str(uuid.uuid4()) for i in range(3)}
    with engine(devcloud, trustee, tmp_path, pg_url, prefix) as first:
        config = first.create_config(
            "app", SCRIPT, group="script", outputs=[{"name": "result"}], context=caller
        )
        shown = first.create_group(
            "batched",
            config.id,
            servers,
            policy={"max_concurrency": 1},
            timeout=120,
            wait=False,
            context=caller,
        )
        group_id = shown["id"]
        [held] = trusts_of(devcloud, trustor) - before
        assert first.store.get_trust(projects.GROUP, group_id) == held
    revoke(devcloud, token)

    # a new engine answers the servers: every batch after the first starts
    # there, through the group's trust
    with engine(devcloud, trustee, tmp_path, pg_url, prefix) as second:
        fakes = [FakeServer(second, server) for server in servers.values()]
        with contextlib.ExitStack() as stack:
            for fake in fakes:
                stack.enter_context(fake)
            shown = second.wait_group(group_id, 120)
        assert shown["status"] == states.COMPLETE, shown["status_reason"]
        assert all(len(fake.handled) == 1 for fake in fakes)
        ids = [m["deployment_id"] for m in shown["members"].values()]
        assert trusts.acting_trusts(second.store, ids) == dict.fromkeys(ids, held)
        assert second.delete_group(group_id, wait_timeout=120) is None
        assert flowkit.leftovers(second, *ids) == {}
    assert project_objects(devcloud, "demo2", *ids) == []
    until(
        lambda: held not in trusts_of(devcloud, trustor),
        what="the group's trust to be deleted",
    )


# -- Nova's view of a project's server ------------------------------------------


def standin_server(devcloud: dict[str, Any], project_id: str) -> str:
    """A server of ``project_id`` in the Nova stand-in (no agent runs on it)."""
    server_id = str(uuid.uuid4())
    requests.put(
        f"{devcloud['nova']['control_url']}/servers/{server_id}",
        json={"name": "app-" + server_id[:8], "tenant_id": project_id},
        timeout=30,
    ).raise_for_status()
    return server_id


def delete_in_nova(devcloud: dict[str, Any], *server_ids: str) -> None:
    for server_id in server_ids:
        resp = requests.delete(
            f"{devcloud['nova']['control_url']}/servers/{server_id}", timeout=30
        )
        assert resp.status_code in (200, 204, 404), resp.text


def test_a_projects_server_is_watched_through_its_trust_after_the_token_is_revoked(
    devcloud: dict[str, Any],
    trustee: dict[str, str],
    pg_url: str,
    tmp_path: Path,
) -> None:
    token, caller = demo2_caller(devcloud)
    trustor, project = str(caller.user_id), str(caller.project_id)
    before = trusts_of(devcloud, trustor)
    server_id = standin_server(devcloud, project)
    try:
        with engine(devcloud, trustee, tmp_path, pg_url, unique_prefix()) as sw:
            own = sw.services.clients.compute
            assert own.get_server(server_id) is None  # swflows' user cannot see it
            assert server_id not in own.list_servers()
            shown = sw.enroll_server(server_id, context=caller)
            assert shown["in_compute"] is True
            assert shown["compute_project"] == project
            config = sw.create_config("app", SCRIPT, group="script", context=caller)
            dep = sw.deploy(
                server_id, config.id, timeout=600, wait=False, context=caller
            )
            until(functools.partial(parked, sw, dep.id), what="the flow to park")
            held = sw.store.get_trust(projects.DEPLOYMENT, dep.id)
            assert held is not None and held in trusts_of(devcloud, trustor) - before
            revoke(devcloud, token)
            # its console log is read through the trust too (swflows' own
            # login would be told it does not exist: None); no agent wrote
            assert sw.show_server(server_id, console_lines=3)["console"] == ""
            assert own.console_output(server_id, 3) is None

            delete_in_nova(devcloud, server_id)
            done = sw.wait(dep.id, timeout=60)
            assert done.status == states.FAILED
            assert done.reason == {
                "kind": states.ReasonKind.SERVER_GONE.value,
                "server_id": server_id,
                "detail": "server deleted",
            }
            sw.undeploy(dep.id)
            assert held not in trusts_of(devcloud, trustor)
            assert sw.unenroll_server(server_id)
            assert flowkit.leftovers(sw, dep.id) == {}
    finally:
        delete_in_nova(devcloud, server_id)
    assert not trusts_of(devcloud, trustor) - before


def test_a_projects_server_is_never_judged_by_another_listing(
    devcloud: dict[str, Any],
    trustee: dict[str, str],
    pg_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """demo2's servers, one enrolled without a token (Nova's view: none),
    one with demo2's token but no trust of demo2 to read its listing
    through, are deleted in Nova: their deployments go on waiting while
    swflows' own listing is read again and again (it judges a server of
    its own project, whose deployment fails)."""
    _, caller = demo2_caller(devcloud)
    _, demo = login(devcloud, "demo")
    project = str(caller.project_id)
    untold, untrusted = (standin_server(devcloud, project) for _ in range(2))
    mine = standin_server(devcloud, demo["project"]["id"])
    try:
        with engine(devcloud, trustee, tmp_path, pg_url, unique_prefix()) as sw:
            compute = sw.services.clients.compute
            listings: list[float] = []
            real = compute.list_servers

            def counted() -> dict[str, str]:
                listings.append(time.monotonic())
                return real()

            monkeypatch.setattr(compute, "list_servers", counted)
            shown = sw.enroll_server(untold)  # no token: swflows' own view
            assert (shown["in_compute"], shown["compute_project"]) == (False, None)
            shown = sw.enroll_server(untrusted, context=caller)
            assert (shown["in_compute"], shown["compute_project"]) == (True, project)
            shown = sw.enroll_server(mine)
            assert (shown["in_compute"], shown["compute_project"]) == (True, None)
            config = sw.create_config("app", SCRIPT, group="script")
            deps = {
                s: sw.deploy(s, config.id, timeout=600, wait=False).id
                for s in (untold, untrusted, mine)
            }
            for dep_id in deps.values():
                until(functools.partial(parked, sw, dep_id), what="the flows to park")
            assert sw.store.get_trust(projects.DEPLOYMENT, deps[untrusted]) is None

            delete_in_nova(devcloud, untold, untrusted)
            deleted = time.monotonic()
            until(
                lambda: sum(t > deleted for t in listings) >= 2,
                timeout=60,
                what="swflows' own listing to be read again",
            )
            for server_id in (untold, untrusted):
                assert sw.show(deps[server_id]).status == states.IN_PROGRESS
                assert parked(sw, deps[server_id]) is not None
            delete_in_nova(devcloud, mine)
            done = sw.wait(deps[mine], timeout=60)
            assert (done.reason or {}).get("detail") == "server deleted"
            for server_id, dep_id in deps.items():
                with contextlib.suppress(exceptions.InvalidTransition):
                    sw.cancel(dep_id, "test over")
                sw.wait(dep_id, timeout=60)
                sw.undeploy(dep_id)
                assert sw.unenroll_server(server_id)
    finally:
        delete_in_nova(devcloud, untold, untrusted, mine)


def test_a_server_booted_as_a_caller_is_its_projects_and_deleted_as_it(
    devcloud: dict[str, Any],
    trustee: dict[str, str],
    pg_url: str,
    tmp_path: Path,
) -> None:
    _, caller = demo2_caller(devcloud)
    project = str(caller.project_id)
    _, demo = login(devcloud, "demo")
    other = oslo_context.RequestContext(
        user_id=demo["user"]["id"], project_id=demo["project"]["id"], roles=["member"]
    )
    with engine(devcloud, trustee, tmp_path, pg_url, unique_prefix()) as sw:
        shown = sw.create_server("booted", "cirros", "m1.tiny", context=caller)
        server_id = shown["server_id"]
        try:
            assert (shown["in_compute"], shown["compute_project"]) == (True, project)
            own = sw.services.clients.compute
            assert own.get_server(server_id) is None  # in demo2's project
            assert sw.store.get_owner(projects.SERVER, server_id) == projects.Owner(
                project, str(caller.user_id)
            )
            # another project does not see it; swflows' own login, with no
            # trust of demo2's to act through, cannot delete it: nothing done
            with pytest.raises(exceptions.ServerNotFound):
                sw.delete_server(server_id, context=other)
            with pytest.raises(exceptions.NotSupported, match=project):
                sw.delete_server(server_id)
            assert sw.show_server(server_id)["enrolled"]
            sw.delete_server(server_id, context=caller)
            with pytest.raises(exceptions.ServerNotFound):
                sw.show_server(server_id)
            assert sw.store.get_owner(projects.SERVER, server_id) is None
            status = requests.get(
                f"{devcloud['nova']['control_url']}/servers/{server_id}", timeout=30
            )
            assert status.status_code == 404
        finally:
            delete_in_nova(devcloud, server_id)
