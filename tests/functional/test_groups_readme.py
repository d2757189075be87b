"""The README's deployment group example runs, against the dev cloud."""

from __future__ import annotations

import contextlib
import re
import uuid
from pathlib import Path

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
