"""A failure injected after each task's side effect reverts the whole flow.

Every task of every flow (deploy, redeploy, undeploy with and without a
DELETE action, trigger) is made to fail right after its real work (the
worst moment: the side effect exists, the result is not recorded), per
signal transport (ZAQAR_SIGNAL in both its modes) where the task's work
depends on it, else on one transport in turn.  The flow must revert,
and then:

* the real Keystone, Swift and Zaqar hold nothing the flow made (no signal
  object or queue of its action, no stack user without its deployment);
* the deployment row tells the truth: gone, or terminal (never left
  IN_PROGRESS) pointing at a config that exists, which is exactly what the
  server reads through its config transport, with no other derived config
  of the deployment left in the store;
* undeploying what is left leaves nothing at all.
"""

from __future__ import annotations

import dataclasses
import functools
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from swflows import derive, flows, model, states
from swflows.api import Swflows
from swflows.flows import common
from swflows.tasks import base
from tests.functional import flowkit
from tests.functional.fakeserver import FakeServer
from tests.functional.flowkit import leftovers

sw = flowkit.sw

TIMEOUT = 60


class Injected(RuntimeError):
    """The failure the test injects."""


PLANS = {
    "TEMP_URL_SIGNAL": common.Plan("TEMP_URL_SIGNAL", "POLL_TEMP_URL"),
    "ZAQAR_SIGNAL": common.Plan("ZAQAR_SIGNAL", "POLL_TEMP_URL"),
    # the queue then lives in the stack user's project
    "ZAQAR_SIGNAL-credentials": common.Plan(
        "ZAQAR_SIGNAL",
        "POLL_TEMP_URL",
        signal_options={"auth": "credentials"},
        needs_stack_user=True,
    ),
    "HEAT_SIGNAL": common.Plan("HEAT_SIGNAL", "POLL_TEMP_URL", needs_stack_user=True),
}
#: flow kind of each operation, and its extra factory arguments
OPERATIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "deploy": ("deploy", {}),
    "redeploy": ("redeploy", {}),
    "undeploy": ("undeploy", {"run_delete_action": True}),
    "undeploy-no-delete": ("undeploy", {"run_delete_action": False}),
    "trigger": ("trigger", {}),
}


def atoms(operation: str, plan: common.Plan) -> list[tuple[str, type[base.Task]]]:
    """(atom name, task class) of every task of the operation's flow."""
    kind, extra = OPERATIONS[operation]
    flow = flows.FACTORIES[kind](**plan.to_kwargs(), **extra)
    return [(atom.name, type(atom)) for atom in flow]


#: the tasks whose work (and so whose revert) differs by signal transport:
#: a failure after one of them is tried on every transport
TRANSPORT_TASKS = frozenset(
    {
        "EnsureStackUser",
        "CreateSignalStore",
        "AwaitSignal",
        "DeleteSignalStore",
        "DeleteStackUser",
    }
)


def cases() -> list[tuple[str, str, str, type[base.Task]]]:
    """Every task of every operation, failing after its work.

    A task whose work depends on the signal transport fails on each
    transport; any other task fails on one transport, taken in turn, so
    every transport still sees failures after transport-blind tasks (and
    with them the reverts of the transport's own earlier tasks), and the
    matrix stays a cross of what differs, not of everything.
    """
    found = []
    turn = 0
    for operation in OPERATIONS:
        seen: set[str] = set()
        for transport, plan in PLANS.items():
            for name, cls in atoms(operation, plan):
                step = name.rsplit(".", 1)[-1]
                if step in TRANSPORT_TASKS:
                    found.append((operation, transport, name, cls))
                elif step not in seen:  # every plan has it
                    seen.add(step)
                    found.append((operation, list(PLANS)[turn % len(PLANS)], name, cls))
                    turn += 1
    return found


CASES = cases()


def case_id(operation: str, transport: str, name: str, cls: type[base.Task]) -> str:
    return f"{operation}-{transport}-{name.rsplit('.', 1)[-1]}"


def fail_after(
    monkeypatch: pytest.MonkeyPatch,
    cls: type[base.Task],
    atom: str,
    fake: FakeServer,
) -> None:
    """Make the atom named ``atom`` (of class ``cls``) fail after its work.

    The server is paused first, so its answers never race the revert: what
    is checked afterwards is what the flow itself left (a signal sent late
    by an agent, after its store was removed, is the watcher's to sweep).
    """
    real = cls.execute

    @functools.wraps(real)  # keeps the signature TaskFlow reads requirements from
    def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = real(self, *args, **kwargs)
        if self.name == atom:
            fake.pause()
            raise Injected(f"injected after {atom}")
        return result

    monkeypatch.setattr(cls, "execute", execute)


def component_config(sw: Swflows) -> model.Config:
    return sw.create_config(
        "db",
        {
            "configs": [
                {"actions": ["CREATE", "UPDATE"], "config": "up", "tool": "script"},
                {"actions": ["BACKUP"], "config": "backup", "tool": "script"},
                {"actions": ["DELETE"], "config": "remove", "tool": "script"},
            ]
        },
        group="component",
        inputs=[{"name": "foo", "default": "a"}],
        outputs=[{"name": "result"}],
    )


@dataclasses.dataclass
class Target:
    """The deployment an operation acts on, and how to run the operation."""

    deployment_id: str
    run: Callable[[], Any]
    #: the row existed before the operation (it must not vanish on revert,
    #: except where the operation itself removes it)
    existed: bool


def prepare(
    sw: Swflows,
    operation: str,
    transport: str,
    server: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Target:
    if operation == "deploy":
        config = component_config(sw)
        new = str(uuid.uuid4())
        return Target(
            new,
            lambda: sw.deploy(
                server,
                config.id,
                signal_transport=transport,
                timeout=TIMEOUT,
                deployment_id=new,
            ),
            existed=False,
        )
    if operation == "undeploy-no-delete":
        config = sw.create_config("app", "#!/bin/sh\n", group="script")
    else:
        config = component_config(sw)
    dep = sw.deploy(server, config.id, signal_transport=transport, timeout=TIMEOUT)
    assert dep.status == states.COMPLETE, dep.status_reason
    if operation == "redeploy":
        return Target(
            dep.id, lambda: sw.redeploy(dep.id, input_values={"foo": "b"}), True
        )
    if operation.startswith("undeploy"):
        return Target(dep.id, lambda: sw.undeploy(dep.id), True)
    # trigger makes a new deployment: its id is fixed here so it can be traced
    triggered = str(uuid.uuid4())
    real_new_id = model.new_id
    ids = iter([triggered])
    monkeypatch.setattr(model, "new_id", lambda: next(ids, None) or real_new_id())

    def trigger() -> Any:
        return sw.trigger(dep.id, "BACKUP", input_values={"foo": "c"})

    return Target(triggered, trigger, existed=False)


def derived_configs_of(sw: Swflows, deployment_id: str) -> set[str]:
    """Ids of every derived config of the deployment still in the store."""
    mine = {derive.derived_config_id(deployment_id, g) for g in range(1, 5)}
    return {c.id for c in sw.list_configs(include_derived=True)} & mine


def assert_truthful(
    sw: Swflows, fake: FakeServer, target: Target, transport: str
) -> model.Deployment | None:
    """The row, the store, the published metadata and the cloud agree."""
    found = [d for d in sw.list_deployments() if d.id == target.deployment_id]
    row = found[0] if found else None
    left = leftovers(sw, target.deployment_id)
    users = left.pop("users", []), left.pop("projects", [])
    # no signal store of any action, no queue: only the row's stack user
    assert left == {}
    needs_user = PLANS[transport].needs_stack_user
    if row is None:
        assert users == ([], []), "a stack user outlived its deployment"
        assert derived_configs_of(sw, target.deployment_id) == set()
        return None
    assert row.status != states.IN_PROGRESS, row.status_reason
    if row.status == states.FAILED:
        assert row.reason is not None
    if row.config_id is None:
        # a new deployment whose action never started: kept FAILED, naming
        # the step that failed, and published to nobody
        assert row.status == states.FAILED, row.status_reason
        assert row.reason is not None
        assert row.reason["kind"] == states.ReasonKind.INFRASTRUCTURE.value
        assert row.reason["step"], row.reason
        assert "Injected" in row.reason["error"], row.reason
        assert row.reason["step"] in row.status_reason
        assert derived_configs_of(sw, target.deployment_id) == set()
        assert row.id not in str(fake.read_metadata())
        assert users == ([], []), "a stack user outlived its failed action"
        return row
    assert derived_configs_of(sw, target.deployment_id) == {row.config_id}
    assert row.config_id is not None
    assert sw.get_config(row.config_id).id == row.config_id
    published = [i["id"] for i in fake.read_metadata()["deployments"]]
    assert row.config_id in published
    if needs_user and row.status == states.COMPLETE:
        # a COMPLETE deployment's agent can still authenticate
        assert len(users[0]) == 1, "the stack user of a live deployment is gone"
    return row


@pytest.mark.parametrize(
    ("operation", "transport", "atom", "cls"),
    CASES,
    ids=[case_id(*case) for case in CASES],
)
def test_failure_reverts_leaving_nothing(
    sw: Swflows,
    monkeypatch: pytest.MonkeyPatch,
    operation: str,
    transport: str,
    atom: str,
    cls: type[base.Task],
) -> None:
    server = str(uuid.uuid4())
    auth = PLANS[transport].signal_options.get("auth")
    if auth:
        sw.conf.set_override("zaqar_signal_auth", auth)
    with FakeServer(sw, server) as fake:
        target = prepare(
            sw, operation, PLANS[transport].signal_transport, server, monkeypatch
        )
        before = sw.show(target.deployment_id) if target.existed else None
        fail_after(monkeypatch, cls, atom, fake)
        with pytest.raises(Injected):
            target.run()
        monkeypatch.undo()
        row = assert_truthful(sw, fake, target, transport)
        if row is not None:
            # the next action gets a config id the server never saw, and new
            # signal store names: the reverted action's generation is used up
            following = derive.derived_config_id(row.id, row.generation + 1)
            assert following not in fake.handled
        if before is not None and row is not None and row.status == states.COMPLETE:
            # still what it was, or the action that did complete
            assert row.generation in (before.generation, before.generation + 1)
        if operation in ("deploy", "trigger"):
            step = atom.rsplit(".", 1)[-1]
            names = [
                name.rsplit(".", 1)[-1]
                for name, _ in atoms(operation, PLANS[transport])
            ]
            if names.index(step) < names.index("CreateDeployment"):
                assert row is None, "a row appeared though none was made"
            else:
                # kept, never reverted away: FAILED naming the step, or
                # what its server's own signal made it
                assert row is not None, "a reverted new deployment lost its row"
                if row.status == states.FAILED:
                    assert row.reason is not None
                    assert row.reason["step"] == step, row.reason
        if operation == "redeploy":
            assert row is not None, "a reverted redeploy removed the deployment"
        # what is left can still be undeployed, the trigger's original too;
        # a deployment whose action never started runs no DELETE
        fake.resume()
        handled = set(fake.handled)
        for left in sw.list_deployments(server_id=server):
            sw.undeploy(left.id)
        if row is not None and row.config_id is None:
            assert not {derive.derived_config_id(row.id, g) for g in range(1, 5)} & (
                set(fake.handled) - handled
            )
    assert sw.list_deployments(server_id=server) == []
    assert leftovers(sw, target.deployment_id) == {}
    assert derived_configs_of(sw, target.deployment_id) == set()
