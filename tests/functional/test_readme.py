"""The README's library example runs, against the dev cloud."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from swflows.api import Swflows
from tests.functional import flowkit
from tests.functional.fakeserver import FakeServer

sw = flowkit.sw
README = Path(__file__).resolve().parents[2] / "README.md"


def example() -> str:
    text = README.read_text()
    section = text.split("## Library example", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README has no python block under 'Library example'"
    return match.group(1)


def test_readme_library_example(sw: Swflows, capsys: object) -> None:
    server_id = str(uuid.uuid4())
    with FakeServer(sw, server_id) as fake:
        code = compile(example(), str(README), "exec")
        exec(code, {"sw": sw, "server_id": server_id})  # noqa: S102
    assert len(fake.handled) == 2
