"""Groups with test servers: the README example, trigger and cancel."""

from __future__ import annotations

import contextlib
import re
import uuid
from pathlib import Path

import pytest

from swflows import exceptions
from swflows.api import Swflows
from tests.functional import flowkit
from tests.functional.fakeserver import FakeServer

sw = flowkit.sw
README = Path(__file__).resolve().parents[2] / "README.md"


def example() -> str:
    section = README.read_text().split("## Deployment groups", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README has no python block under 'Deployment groups'"
    return match.group(1)


def test_readme_group_example(sw: Swflows, capsys: object) -> None:
    servers = {f"web-{i}": str(uuid.uuid4()) for i in range(4)}
    with contextlib.ExitStack() as stack:
        fakes = {
            name: stack.enter_context(FakeServer(sw, server_id))
            for name, server_id in servers.items()
        }
        code = compile(example(), str(README), "exec")
        exec(code, {"sw": sw, "servers": servers})  # noqa: S102
    # CREATE and UPDATE; when web-3 left the others were left alone
    assert {name: len(fake.handled) for name, fake in fakes.items()} == {
        "web-0": 2,
        "web-1": 2,
        "web-2": 2,
        "web-3": 2,
    }
    assert not any(fake.errors for fake in fakes.values())
    assert sw.list_deployments() == []
    try:
        sw.show_group("web")
    except exceptions.GroupNotFound:
        pass
    else:
        raise AssertionError("the group is still there")


def test_trigger_and_cancel(sw: Swflows) -> None:
    """An action on every member; a cancel stops an operation midway."""
    from swflows import states
    from tests.functional.test_runner import until

    servers = {f"g-{i}": str(uuid.uuid4()) for i in range(4)}
    config = sw.create_config(
        "app", "#!/bin/sh\n", group="script", inputs=[{"name": "foo"}],
        outputs=[{"name": "result"}],
    )  # fmt: skip
    with contextlib.ExitStack() as stack:
        fakes = [stack.enter_context(FakeServer(sw, s)) for s in servers.values()]
        made = sw.create_group(
            "g", config.id, servers, input_values={"foo": "a"},
            actions=["CREATE", "UPDATE", "CHECK"], wait_timeout=120,
        )  # fmt: skip
        assert made["status"] == states.COMPLETE, made["status_reason"]

        checked = sw.trigger_group(
            "g", "CHECK", input_values={"foo": "chk"}, policy={"max_concurrency": 2}
        )
        assert checked["status"] == states.COMPLETE, checked["status_reason"]
        assert checked["action"] == "CHECK"
        for name, member in checked["operation"]["members"].items():
            assert member["task"] == "trigger" and member["state"] == "COMPLETE"
            done = sw.show(member["deployment_id"])
            assert done.output_values["result"] == "out-chk"
            assert done.parent_id == made["members"][name]["deployment_id"]
        assert {m["action"] for m in checked["members"].values()} == {"CREATE"}
        with pytest.raises(exceptions.ValidationError, match="action"):
            sw.trigger_group("g", "BACKUP")

        for fake in fakes:
            fake.pause()
        sw.redeploy_group(
            "g", input_values={"foo": "b"}, policy={"max_concurrency": 2}, wait=False
        )
        until(lambda: sw.show_group("g")["operation"]["running"] == 2, 60, "2 running")
        with pytest.raises(exceptions.GroupBusy, match="IN_PROGRESS"):
            sw.trigger_group("g", "CHECK")
        sw.cancel_group("g", "stop")
        ended = sw.wait_group("g", 60)
        assert ended["status"] == states.FAILED
        assert (
            ended["status_reason"] == "redeploy FAILED: cancelled: stop; 2 not started"
        )
        assert ended["operation"]["failed"] == 2
        cancelled = [m for m in ended["members"].values() if m["status"] == "FAILED"]
        assert len(cancelled) == 2
        assert all("cancelled" in m["status_reason"].lower() for m in cancelled)
        with pytest.raises(exceptions.InvalidTransition):
            sw.cancel_group("g")
        for fake in fakes:
            fake.resume()
        assert sw.delete_group("g", wait_timeout=120) is None
    assert sw.list_deployments() == []


def test_mistral_group_actions(sw: Swflows) -> None:
    """swflows.group_deploy creates, then redeploys (running it again
    changes nothing); group_show; group_delete."""
    from mistral_lib.actions import context as ml_context
    from mistral_lib.actions import types

    from swflows.embedding import mistral

    def run(action: object) -> types.Result:
        made = action.run(ml_context.ActionContext())  # type: ignore[attr-defined]
        assert isinstance(made, types.Result)
        return made

    servers = {f"m-{i}": str(uuid.uuid4()) for i in range(3)}
    config = sw.create_config(
        "app", "#!/bin/sh\n", group="script", inputs=[{"name": "foo"}],
        outputs=[{"name": "result"}],
    )  # fmt: skip
    mistral.use(sw)
    try:
        with contextlib.ExitStack() as stack:
            fakes = [stack.enter_context(FakeServer(sw, s)) for s in servers.values()]
            inputs = {
                "name": "mg",
                "config_id": config.id,
                "servers": servers,
                "input_values": {"foo": "a"},
                "policy": {"max_concurrency": 2},
                "wait_timeout": 120,
            }
            made = run(mistral.GroupDeployAction(**inputs))  # type: ignore[arg-type]
            assert not made.is_error(), made.error
            assert made.data["status"] == "COMPLETE"
            assert made.data["outputs"]["result"] == dict.fromkeys(servers, "out-a")
            again = run(mistral.GroupDeployAction(**inputs))  # type: ignore[arg-type]
            assert again.data["operation"]["kind"] == "redeploy"
            assert again.data["operation"]["members"] == {}  # nothing changed
            assert sum(len(f.handled) for f in fakes) == 3
            bad = run(mistral.GroupDeployAction(**{**inputs, "servers": ["x"]}))  # type: ignore[arg-type]
            assert bad.error["kind"] == "invalid_input"
            assert bad.error["field"] == "servers"
            shown = run(mistral.GroupShowAction("mg"))
            assert shown.data["members"].keys() == servers.keys()
            assert run(mistral.GroupShowAction("nope")).error["kind"] == "not_found"
            gone = run(mistral.GroupDeleteAction("mg", wait_timeout=120))
            assert gone.data == {"name": "mg", "deleted": True}
    finally:
        mistral.use(None)
