"""Projects and deployment policy, on PostgreSQL with the dev cloud.

Project A's servers, configs and deployments are "not found" for project
B (never "forbidden": nothing tells B they exist); a server's deployment
policy admitting B lets B deploy there and nothing more; an admin sees
every project; calls without a request context work as they always did.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from oslo_context import context as oslo_context

from swflows import exceptions, projects, states
from swflows.api import Swflows
from tests.functional import test_runner as runner_tests
from tests.functional.db_fixtures import *  # noqa: F403 (fixtures)
from tests.functional.db_fixtures import SECRET_KEY, unique_prefix

A = oslo_context.RequestContext(project_id="proj-a", user_id="user-a", roles=["member"])
B = oslo_context.RequestContext(project_id="proj-b", user_id="user-b", roles=["member"])
ADMIN = oslo_context.RequestContext(
    project_id="proj-admin", user_id="root", roles=["admin"]
)


@pytest.fixture(scope="module")
def sw(
    devcloud: dict[str, Any], pg_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Swflows]:
    with runner_tests.instance(
        devcloud,
        tmp_path_factory.mktemp("projects"),
        pg_url,
        database__table_prefix=unique_prefix(),
        database__secret_key=SECRET_KEY.decode(),
        default_project="proj-legacy",
    ) as made:
        yield made


def deploy(
    sw: Swflows, server: str, config_id: str, context: Any, **kwargs: Any
) -> Any:
    return sw.deploy(
        server, config_id, signal_transport="NO_SIGNAL", context=context, **kwargs
    )


@pytest.fixture(scope="module")
def a_side(sw: Swflows) -> dict[str, Any]:
    """Project A's config, enrolled server and deployment on it."""
    config = sw.create_config(
        "a-cfg", "#!/bin/sh\n", group="script", outputs=[{"name": "x"}], context=A
    )
    server = f"srv-a-{uuid.uuid4().hex[:8]}"
    sw.enroll_server(server, context=A)
    dep = deploy(sw, server, config.id, A)
    assert dep.status == states.COMPLETE
    return {"config": config, "server": server, "deployment": dep}


def same_not_found(call: Any, missing: Any, cls: type[Exception]) -> None:
    """``call`` fails exactly as ``missing`` (an id that does not exist)."""
    with pytest.raises(cls) as seen:
        call()
    with pytest.raises(cls) as unknown:
        missing()
    assert type(seen.value) is type(unknown.value)
    ident = getattr(seen.value, "ident", None)
    assert str(seen.value) == str(unknown.value).replace(
        str(getattr(unknown.value, "ident", "")), str(ident)
    )


def test_project_b_cannot_see_or_touch_project_a(
    sw: Swflows, a_side: dict[str, Any]
) -> None:
    dep_id = a_side["deployment"].id
    server = a_side["server"]
    config_id = a_side["config"].id
    nobody = str(uuid.uuid4())
    not_dep = exceptions.DeploymentNotFound
    for call, missing in (
        (lambda: sw.show(dep_id, context=B), lambda: sw.show(nobody, context=B)),
        (lambda: sw.outputs(dep_id, context=B), lambda: sw.outputs(nobody, context=B)),
        (
            lambda: sw.cancel(dep_id, context=B),
            lambda: sw.cancel(nobody, context=B),
        ),
        (
            lambda: sw.trigger(dep_id, "UPDATE", context=B),
            lambda: sw.trigger(nobody, "UPDATE", context=B),
        ),
        (
            lambda: sw.redeploy(dep_id, context=B),
            lambda: sw.redeploy(nobody, context=B),
        ),
        (
            lambda: sw.undeploy(dep_id, context=B),
            lambda: sw.undeploy(nobody, context=B),
        ),
    ):
        same_not_found(call, missing, not_dep)
    # a signal's sender is a stack user, in a project of its own: the rule
    # swflows:deployment:signal decides (any caller, by default), and this
    # deployment is not waiting
    assert sw.signal(dep_id, {}, context=B) is False
    same_not_found(
        lambda: sw.show_server(server, context=B),
        lambda: sw.show_server(nobody, context=B),
        exceptions.ServerNotFound,
    )
    same_not_found(
        lambda: sw.set_deploy_policy(server, {"mode": "any"}, context=B),
        lambda: sw.set_deploy_policy(nobody, {"mode": "any"}, context=B),
        exceptions.ServerNotFound,
    )
    same_not_found(
        lambda: sw.get_config(config_id, context=B),
        lambda: sw.get_config(nobody, context=B),
        exceptions.ConfigNotFound,
    )
    # A's config cannot be deployed by B, even to B's own server
    with pytest.raises(exceptions.ConfigNotFound):
        deploy(sw, f"srv-b-{uuid.uuid4().hex[:8]}", config_id, B)
    assert dep_id not in {d.id for d in sw.list_deployments(context=B)}
    assert config_id not in {c.id for c in sw.list_configs(context=B)}
    # and B's own config cannot go to A's server: the rule is named
    own = sw.create_config("b-cfg", "#!/bin/sh\n", group="script", context=B)
    with pytest.raises(exceptions.Forbidden) as refused:
        deploy(sw, server, own.id, B)
    assert refused.value.rule == projects.DEPLOY_RULE
    assert "its own project only (mode 'project')" in str(refused.value)
    assert "proj-b" in str(refused.value)
    with pytest.raises(exceptions.Forbidden):
        sw.create_group(
            f"g-{uuid.uuid4().hex[:6]}",
            own.id,
            {"one": server},
            signal_transport="NO_SIGNAL",
            context=B,
        )
    # A still sees all of it, unchanged
    assert sw.show(dep_id, context=A).status == states.COMPLETE
    assert sw.show_server(server, context=A)["deployments"] == [dep_id]
    assert dep_id in {d.id for d in sw.list_deployments(context=A)}


def test_a_policy_admitting_b_lets_b_deploy_and_nothing_more(
    sw: Swflows,
) -> None:
    a_cfg = sw.create_config("a2", "#!/bin/sh\n", group="script", context=A)
    server = f"srv-a-{uuid.uuid4().hex[:8]}"
    b_cfg = sw.create_config("b1", "#!/bin/sh\n", group="script", context=B)
    b_other = sw.create_config("b2", "#!/bin/sh\n", group="script", context=B)
    sw.enroll_server(
        server,
        context=A,
        deploy_policy={"mode": "projects", "projects": ["proj-b"]},
    )
    a_dep = deploy(sw, server, a_cfg.id, A)
    shown = sw.deploy_policy(server, context=A)
    assert shown["project_id"] == "proj-a"
    assert shown["policy"]["mode"] == "projects"
    assert shown["changed_by"] == "user-a@proj-a"
    assert shown["changed_at"]

    b_dep = deploy(sw, server, b_cfg.id, B)
    assert b_dep.status == states.COMPLETE
    assert sw.show(b_dep.id, context=B).server_id == server
    # nothing more: not A's deployment, not the server, not its policy
    with pytest.raises(exceptions.DeploymentNotFound):
        sw.show(a_dep.id, context=B)
    with pytest.raises(exceptions.ServerNotFound):
        sw.show_server(server, context=B)
    with pytest.raises(exceptions.ServerNotFound):
        sw.set_deploy_policy(server, {"mode": "any"}, context=B)
    assert {d.id for d in sw.list_deployments(context=B, server_id=server)} == {
        b_dep.id
    }
    # a third project is still refused
    c = oslo_context.RequestContext(project_id="proj-c", user_id="c", roles=[])
    c_cfg = sw.create_config("c1", "#!/bin/sh\n", group="script", context=c)
    with pytest.raises(exceptions.Forbidden):
        deploy(sw, server, c_cfg.id, c)

    # only listed configs: B's other config is refused, naming the rule
    sw.set_deploy_policy(
        server,
        {"mode": "projects", "projects": ["proj-b"], "config_ids": [b_cfg.id]},
        context=A,
    )
    with pytest.raises(exceptions.Forbidden) as refused:
        deploy(sw, server, b_other.id, B)
    assert "config_ids" in str(refused.value)
    assert b_other.id in str(refused.value)

    # withdrawn: B's redeploy and trigger on its own deployment are refused
    sw.set_deploy_policy(server, {"mode": "project"}, context=A)
    with pytest.raises(exceptions.Forbidden) as refused:
        sw.redeploy(b_dep.id, input_values={"k": "v"}, context=B)
    assert refused.value.rule == projects.DEPLOY_RULE
    with pytest.raises(exceptions.Forbidden):
        sw.trigger(b_dep.id, "UPDATE", context=B)
    # but B may still remove what it made
    sw.undeploy(b_dep.id, context=B)
    with pytest.raises(exceptions.DeploymentNotFound):
        sw.show(b_dep.id, context=A)


def test_admin_sees_every_project(sw: Swflows, a_side: dict[str, Any]) -> None:
    dep_id = a_side["deployment"].id
    assert sw.show(dep_id, context=ADMIN).id == dep_id
    assert sw.outputs(dep_id, context=ADMIN) == sw.outputs(dep_id, context=A)
    assert sw.show_server(a_side["server"], context=ADMIN)["server_id"]
    everything = {d.id for d in sw.list_deployments(context=ADMIN, all_projects=True)}
    assert dep_id in everything
    # without all_projects an admin lists its own project
    assert dep_id not in {d.id for d in sw.list_deployments(context=ADMIN)}
    with pytest.raises(exceptions.Forbidden) as refused:
        sw.list_deployments(context=B, all_projects=True)
    assert refused.value.rule == "swflows:all_projects"
    # an admin may deploy anywhere
    cfg = sw.create_config("adm", "#!/bin/sh\n", group="script", context=ADMIN)
    made = deploy(sw, a_side["server"], cfg.id, ADMIN)
    assert made.status == states.COMPLETE
    sw.undeploy(made.id, context=ADMIN)


def test_without_a_context_nothing_changes(sw: Swflows, a_side: dict[str, Any]) -> None:
    # the embedded single owner sees and does everything, as before
    assert sw.show(a_side["deployment"].id).id == a_side["deployment"].id
    cfg = sw.create_config("legacy", "#!/bin/sh\n", group="script")
    server = f"srv-l-{uuid.uuid4().hex[:8]}"
    dep = deploy(sw, server, cfg.id, None)
    assert dep.status == states.COMPLETE
    # what it made is the default project's
    legacy = oslo_context.RequestContext(project_id="proj-legacy", roles=[])
    assert sw.show(dep.id, context=legacy).id == dep.id
    with pytest.raises(exceptions.DeploymentNotFound):
        sw.show(dep.id, context=A)
    # a deployment removed takes its owner row with it
    sw.undeploy(dep.id)
    assert sw.store.get_owner(projects.DEPLOYMENT, dep.id) is None


def test_a_scoped_listing_pages_full(sw: Swflows) -> None:
    """A project's listing is filtered in the query: with other projects'
    rows in between, a limited page still holds ``limit`` of its own, and a
    marker pages on through them; rows with no owner are the default
    project's."""
    tag = uuid.uuid4().hex[:8]
    made: dict[str, list[str]] = {"a": [], "b": [], "none": []}
    for _ in range(3):
        for side, context in (("a", A), ("b", B), ("b", B), ("none", None)):
            cfg = sw.create_config(
                f"page-{tag}-{side}", "#!/bin/sh\n", group="script", context=context
            )
            made[side].append(cfg.id)

    def of_a(ids: list[str]) -> bool:
        return all(
            (
                sw.store.get_owner(projects.CONFIG, i) or projects.Owner("", "")
            ).project_id
            == "proj-a"
            for i in ids
        )

    everything = [c.id for c in sw.list_configs(context=A)]
    assert set(made["a"]) <= set(everything) and of_a(everything)
    first = [c.id for c in sw.list_configs(context=A, limit=2)]
    assert first == everything[:2]
    rest = [c.id for c in sw.list_configs(context=A, marker=first[-1])]
    assert first + rest == everything
    legacy = oslo_context.RequestContext(project_id="proj-legacy", roles=[])
    mine = {c.id for c in sw.list_configs(context=legacy)}
    assert set(made["none"]) <= mine
    assert not mine & set(made["a"] + made["b"])
    # deployments on one server of B's whose policy admits A
    server = f"srv-p-{tag}"
    sw.enroll_server(server, context=B)
    sw.set_deploy_policy(
        server, {"mode": "projects", "projects": ["proj-a"]}, context=B
    )
    ids: dict[str, list[str]] = {"a": [], "b": []}
    for _ in range(3):
        for side, context in (("a", A), ("b", B), ("b", B)):
            ids[side].append(deploy(sw, server, made[side][0], context).id)
    page = sw.list_deployments(context=A, server_id=server, limit=3)
    assert {d.id for d in page} == set(ids["a"])
    page = sw.list_deployments(context=B, server_id=server, limit=5)
    assert len(page) == 5 and {d.id for d in page} <= set(ids["b"])


def test_groups_are_listed_by_project(sw: Swflows, a_side: dict[str, Any]) -> None:
    """A group is listed for its project (filtered in the query, as configs
    and deployments are), for an admin asking for all projects, and for no
    other project."""
    name = f"grp-{uuid.uuid4().hex[:8]}"
    made = sw.create_group(
        name,
        a_side["config"].id,
        {"m0": a_side["server"]},
        signal_transport="NO_SIGNAL",
        wait_timeout=60,
        context=A,
    )
    assert made["status"] == states.COMPLETE, made["status_reason"]
    try:
        assert name in {g["name"] for g in sw.list_groups(context=A)}
        assert name not in {g["name"] for g in sw.list_groups(context=B)}
        legacy = oslo_context.RequestContext(project_id="proj-legacy", roles=[])
        assert name not in {g["name"] for g in sw.list_groups(context=legacy)}
        listed = sw.list_groups(context=ADMIN, all_projects=True)
        assert name in {g["name"] for g in listed}
        assert name in {g["name"] for g in sw.list_groups()}
    finally:
        assert sw.delete_group(name, wait_timeout=60, context=A) is None
