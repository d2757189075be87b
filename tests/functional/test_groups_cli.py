"""``swflows group …`` against the dev cloud, with real agent processes."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

from swflows.api import Swflows
from swflows.cli.parsing import ExitCode
from tests.functional.test_agent import agent_server, script_config
from tests.functional.test_cli import Cli, setup  # noqa: F401

SCRIPT = (
    '#!/bin/sh\nprintf "%s on %s" "$foo" "$deploy_action" > $heat_outputs_path.result\n'
)


def test_group_commands(setup: tuple[Cli, Swflows], tmp_path: Path) -> None:  # noqa: F811
    cli, sw = setup
    config = script_config(sw, SCRIPT)
    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(agent_server(sw, tmp_path / f"s{i}")) for i in range(3)
        ]
        members = [f"--member=m{i}={s.id}" for i, s in enumerate(servers)]
        done = cli(
            "group", "create", "web", "--config", config.id, *members,
            "--input-value", "foo=all", "--member-input", "m0:foo=zero",
            "--max-concurrency", "2", "--max-errors", "0", "--wait", "-f", "json",
        )  # fmt: skip
        shown: dict[str, Any] = json.loads(done.stdout)
        assert shown["status"] == "COMPLETE", shown
        assert shown["outputs"]["result"] == {
            "m0": "zero on CREATE",
            "m1": "all on CREATE",
            "m2": "all on CREATE",
        }
        assert shown["policy"]["max_concurrency"] == 2
        lines = done.stderr.splitlines()
        counts = [
            tuple(
                int(n) for n in re.findall(r"(\d+) (?:done|running|failed|left)", line)
            )
            for line in lines
        ]
        assert len(counts) >= 2 and all(len(c) == 4 for c in counts), done.stderr
        assert counts[-1] == (3, 0, 0, 0), done.stderr
        assert all(c[1] <= 2 and sum(c) == 3 for c in counts), done.stderr
        assert "group web deploy COMPLETE" in lines[-1]

        listed = cli.json("group", "list")
        assert [(g["name"], g["members"], g["status"]) for g in listed] == [
            ("web", 3, "COMPLETE")
        ]
        assert cli.json("group", "show", "web")["id"] == shown["id"]

        # bad input: one line, exit 2
        for args in (
            ("group", "show", "nope"),
            ("group", "create", "w2", "--config", config.id, "--member", "m0"),
            ("group", "create", "w2", "--config", config.id, *members,
             "--max-concurrency", "0"),
            ("group", "create", "web", "--config", config.id, *members),
            ("group", "create", "w2", "--config", config.id, *members,
             "--member-input", "m9:foo=x"),
        ):  # fmt: skip
            failed = cli(*args, rc=ExitCode.BAD_INPUT)
            assert failed.stdout == ""
        assert "max_concurrency: 0 is less than 1" in cli(
            "group", "create", "w2", "--config", config.id, *members,
            "--max-concurrency", "0", rc=ExitCode.BAD_INPUT,
        ).stderr  # fmt: skip

        updated = cli.json(
            "group", "redeploy", "web", "--input-value", "foo=two",
            "--min-in-service", "2", "--wait",
        )  # fmt: skip
        assert updated["status"] == "COMPLETE", updated
        assert updated["outputs"]["result"]["m1"] == "two on UPDATE"
        assert updated["outputs"]["result"]["m0"] == "zero on UPDATE"
        assert updated["policy"]["min_in_service"] == 2
        assert updated["policy"]["max_concurrency"] == 2  # kept

        gone = cli("group", "delete", "web")
        assert gone.stdout == "group web deleted\n"
        cli("group", "show", "web", rc=ExitCode.BAD_INPUT)
        assert sw.list_deployments() == []
