"""A failure injected after each task's side effect reverts the whole flow.

Every task of the deploy flow, and of trigger, is made to fail right after
its real work (the worst moment: the side effect exists, the result is not
recorded); the flow must revert and the real Keystone, Swift and Zaqar must
hold nothing it made, the store no deployment row and no derived config.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

import pytest

from swflows import flows
from swflows.api import Swflows
from swflows.flows import common
from tests.functional import flowkit
from tests.functional.fakeserver import FakeServer
from tests.functional.flowkit import leftovers

sw = flowkit.sw


class Injected(RuntimeError):
    """The failure the test injects."""


def task_classes(kind: str, plan: common.Plan) -> list[type]:
    flow = flows.FACTORIES[kind](**plan.to_kwargs())
    seen: list[type] = []
    for atom in flow:
        if type(atom) not in seen:
            seen.append(type(atom))
    return seen


PLANS = {
    "TEMP_URL_SIGNAL": common.Plan("TEMP_URL_SIGNAL", "POLL_TEMP_URL"),
    "ZAQAR_SIGNAL": common.Plan("ZAQAR_SIGNAL", "POLL_TEMP_URL"),
    "HEAT_SIGNAL": common.Plan("HEAT_SIGNAL", "POLL_TEMP_URL", needs_stack_user=True),
}
CASES = [
    (transport, cls)
    for transport, plan in PLANS.items()
    for cls in task_classes("deploy", plan)
]


def fail_after(monkeypatch: pytest.MonkeyPatch, cls: type) -> None:
    real = cls.execute

    @functools.wraps(real)  # keeps the signature TaskFlow reads requirements from
    def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        real(self, *args, **kwargs)
        raise Injected(f"injected after {cls.__name__}")

    monkeypatch.setattr(cls, "execute", execute)


@pytest.mark.parametrize(
    ("transport", "cls"), CASES, ids=[f"{t}-{c.__name__}" for t, c in CASES]
)
def test_deploy_reverts_leaving_nothing(
    sw: Swflows, monkeypatch: pytest.MonkeyPatch, transport: str, cls: type
) -> None:
    config = sw.create_config("app", "#!/bin/sh\n", group="script")
    server = str(uuid.uuid4())
    deployment_id = str(uuid.uuid4())
    fail_after(monkeypatch, cls)
    with FakeServer(sw, server), pytest.raises(Injected):
        sw.deploy(
            server,
            config.id,
            signal_transport=transport,
            timeout=30,
            deployment_id=deployment_id,
        )
    assert sw.list_deployments(server_id=server) == []
    assert [c.id for c in sw.list_configs(include_derived=True)] == [config.id]
    assert sw.server_metadata(server) == []
    assert leftovers(sw, deployment_id) == {}
