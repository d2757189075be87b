"""The README's agent section: its configuration examples load, and its
option table names the agent's real options."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from swflows.agent import config

README = Path(__file__).resolve().parents[2] / "README.md"


def section() -> str:
    text = README.read_text()
    assert "## The agent" in text, "README has no 'The agent' section"
    return text.split("## The agent", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("kind", ["json", "ini"])
def test_configuration_examples_load(kind: str, tmp_path: Path) -> None:
    blocks = re.findall(rf"```{kind}\n(.*?)```", section(), re.S)
    assert blocks, f"no {kind} example"
    for i, block in enumerate(blocks):
        path = tmp_path / f"example-{i}.{kind}"
        path.write_text(block)
        loaded = config.load([path])
        assert loaded.collector()[0] in ("request", "zaqar")
        assert loaded.state_dir == Path("/var/lib/swflows-agent")


def test_option_table_matches_the_code() -> None:
    rows = re.findall(r"^\| (`[a-z_]+`(?:, `[a-z_]+`)*) \|", section(), re.M)
    named = {n for row in rows for n in re.findall(r"`([a-z_]+)`", row)}
    fields = set(config.AgentConfig.__dataclass_fields__)
    assert named, "no option table"
    assert named <= fields, f"documented but unknown: {sorted(named - fields)}"
    undocumented = fields - named - {"collectors", "request", "zaqar", "jitter"}
    assert undocumented == set(), f"undocumented options: {sorted(undocumented)}"
