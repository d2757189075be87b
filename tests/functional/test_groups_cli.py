"""``swflows group …`` against the dev cloud, with real agent processes."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import select
import struct
import subprocess
import termios
import time
import tty
from pathlib import Path
from typing import Any

from swflows.api import Swflows
from swflows.cli.parsing import ExitCode
from swflows.cli.progress_bar import ERASE
from tests.functional.test_agent import agent_server, script_config
from tests.functional.test_cli import Cli, command, setup  # noqa: F401

SCRIPT = (
    '#!/bin/sh\nprintf "%s on %s" "$foo" "$deploy_action" > $heat_outputs_path.result\n'
)
#: a second's work, failed when told to
SLOW = '#!/bin/sh\nsleep 1\n[ "$foo" = fail ] && exit 3\n' + SCRIPT.split("\n", 1)[1]
#: the bar's text: title, counts, elapsed and (while it runs) the ETA
BAR = re.compile(
    r"group (?P<name>\S+) (?P<kind>\w+) (?P<status>\w+) \[[#!>.]+\] "
    r"(?P<done>\d+) done, (?P<running>\d+) running, (?P<failed>\d+) failed, "
    r"(?P<left>\d+) left, (?P<elapsed>\w+) elapsed(, ETA (?P<eta>\S+))?"
)
COLUMNS = 120


def agent_members(
    stack: contextlib.ExitStack, sw: Swflows, folder: Path, count: int
) -> list[str]:
    """``count`` servers running swflows' agent (stopped with ``stack``),
    as ``--member=mI=SERVER`` arguments."""
    servers = [
        stack.enter_context(agent_server(sw, folder / f"s{i}")) for i in range(count)
    ]
    return [f"--member=m{i}={s.id}" for i, s in enumerate(servers)]


def test_group_commands(setup: tuple[Cli, Swflows], tmp_path: Path) -> None:  # noqa: F811
    cli, sw = setup
    config = script_config(sw, SCRIPT)
    with contextlib.ExitStack() as stack:
        members = agent_members(stack, sw, tmp_path, 3)
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


def on_terminal(cli: Cli, *args: str) -> tuple[int, str, str]:
    """``swflows ARGS`` with its stderr on a pseudo-terminal ``COLUMNS``
    wide (stdout stays a file): its exit status, stdout, and what the
    terminal received."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, COLUMNS, 0, 0))
    tty.setraw(slave)  # no newline turned into CR LF: every CR is the command's
    stdout = cli.folder / "terminal.out"
    try:
        with stdout.open("w") as out:
            process = subprocess.Popen(
                [*command(), "--config-file", str(cli.conf), *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=slave,
                env=cli.env,
            )
    finally:
        os.close(slave)
    seen = bytearray()
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            if not select.select([master], [], [], 1.0)[0]:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the command's end is closed
                break
            if not chunk:
                break
            seen += chunk
        else:
            process.kill()
        code = process.wait(timeout=30)
    finally:
        os.close(master)
    return code, stdout.read_text(), seen.decode()


def bars(seen: str) -> list[dict[str, Any]]:
    """Each state of the bar the terminal was shown, in order."""
    frames = re.split(r"[\r\n]", seen.replace(ERASE, ""))
    found = [BAR.fullmatch(frame) for frame in frames]
    return [
        {
            **match.groupdict(),
            **{k: int(match[k]) for k in ("done", "running", "failed", "left")},
        }
        for match in found
        if match
    ]


def test_a_group_followed_on_a_terminal_is_a_live_progress_bar(
    setup: tuple[Cli, Swflows],  # noqa: F811
    tmp_path: Path,
) -> None:
    cli, sw = setup
    config = script_config(sw, SLOW)
    with contextlib.ExitStack() as stack:
        members = agent_members(stack, sw, tmp_path, 4)
        code, out, seen = on_terminal(
            cli, "group", "create", "web", "--config", config.id, *members,
            "--input-value", "foo=ok", "--max-concurrency", "2", "--wait",
            "-f", "json",
        )  # fmt: skip
        assert code == ExitCode.OK, seen
        assert json.loads(out)["status"] == "COMPLETE", out
        # one line, rewritten in place: each state after a CR, erased to
        # the end of the line, then a newline once the group ended
        line, _, rest = seen.partition("\n")
        assert rest == "", seen
        assert line.startswith("\r") and line.endswith(ERASE), seen
        shown = bars(line)
        assert len(shown) == line.count("\r") >= 3, seen
        assert all(len(f) < COLUMNS for f in line.replace(ERASE, "").split("\r"))
        assert all(b["name"] == "web" and b["kind"] == "deploy" for b in shown)
        assert all(
            sum(b[k] for k in ("done", "running", "failed", "left")) == 4
            and b["running"] <= 2
            for b in shown
        ), seen
        done = [b["done"] for b in shown]
        assert done == sorted(done) and done[0] < 4, seen
        assert shown[0]["eta"] == "?", seen
        assert any(
            0 < b["done"] < 4 and re.fullmatch(r"\d+s", b["eta"] or "") for b in shown
        ), seen
        final = shown[-1]
        assert (final["status"], final["done"], final["failed"]) == (
            "COMPLETE",
            4,
            0,
        ), seen
        assert final["eta"] is None, seen
        # rewritten every second or two at least
        minutes, _, secs = final["elapsed"].rstrip("s").rpartition("m")
        assert len(shown) >= (int(minutes or 0) * 60 + int(secs)) / 2, seen

        # a failing redeploy left to run, followed from another process
        cli("group", "redeploy", "web", "--input-value", "foo=fail")
        code, out, seen = on_terminal(cli, "group", "watch", "web", "-f", "json")
        assert code == ExitCode.FAILED, seen
        assert json.loads(out)["status"] == "FAILED", out
        final = bars(seen)[-1]
        assert (final["kind"], final["status"]) == ("redeploy", "FAILED"), seen
        assert final["failed"] >= 1 and final["done"] == 0, seen
        assert f"{ERASE}\nswflows: group web FAILED: " in seen, seen

        cli("group", "delete", "web")
