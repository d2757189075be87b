"""The operator's view through the ``swflows`` executable: the servers
and when each was last seen, what a wait says while a deployment waits,
the stage a timeout stopped at, and each result said once."""

from __future__ import annotations

import json
import re
import subprocess
import uuid

from swflows import states
from swflows.api import Swflows
from swflows.cli.parsing import ExitCode
from tests.functional.test_agent import agent_server
from tests.functional.test_cli import Cli, setup, write
from tests.functional.test_runner import until

__all__ = ["setup"]

ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def script(cli: Cli, name: str, body: str) -> str:
    made = cli.json(
        "config",
        "create",
        name,
        "--group",
        "script",
        "--config-file",
        write(cli.folder / f"{name}.sh", body),
    )
    return str(made["id"])


def test_server_list_says_when_each_server_was_last_seen(
    setup: tuple[Cli, Swflows],
) -> None:
    cli, sw = setup
    config = script(cli, "hi", "#!/bin/sh\necho hi\n")
    nobody = str(uuid.uuid4())
    cli.json("server", "enroll", nobody)
    with agent_server(sw, cli.folder / "server") as server:
        dep = cli.json(
            "deployment", "create", "d", "--server", server.id, "--config", config,
            "--wait",
        )  # fmt: skip
        assert dep["status"] == states.COMPLETE, dep
        listed = {s["server_id"]: s for s in cli.json("server", "list")}
        shown = listed[server.id]
        assert shown["deployments"] == 1
        assert shown["config_transport"] == "POLL_TEMP_URL"
        assert shown["agent"] == "swflows"
        # its signal came: it was seen then
        assert ISO_Z.match(shown["last_seen"]), shown
        assert listed[nobody] == {
            "server_id": nobody,
            "config_transport": "POLL_TEMP_URL",
            "agent": "swflows",
            "enrolled": True,
            "deployments": 0,
            "last_seen": None,
        }
        table = cli("server", "list").stdout
        assert "last_seen" in table and server.id in table
        cli("deployment", "delete", dep["id"])
    cli("server", "unenroll", nobody)
    assert [s["server_id"] for s in cli.json("server", "list")] == [server.id]


def test_group_delete_says_it_once(setup: tuple[Cli, Swflows]) -> None:
    cli, sw = setup
    config = script(cli, "noop", "#!/bin/sh\n")
    servers = [str(uuid.uuid4()) for _ in range(2)]
    members = [f"--member=m{i}={s}" for i, s in enumerate(servers)]
    made = cli.json(
        "group", "create", "web", "--config", config, *members,
        "--signal-transport", "NO_SIGNAL", "--wait",
    )  # fmt: skip
    assert made["status"] == states.COMPLETE, made
    gone = cli("group", "delete", "web")
    assert gone.stdout == "group web deleted\n"
    assert "deleted" not in gone.stderr, gone.stderr
    assert sw.list_deployments() == []


def test_a_timeout_says_how_far_the_deployment_got(
    setup: tuple[Cli, Swflows],
) -> None:
    """A server that never picked its deployment up, and one whose hook
    outlives the timeout, time out at different stages; the wait says
    every few seconds what it waits for."""
    cli, sw = setup
    short = cli.folder / "short.conf"
    short.write_text("[DEFAULT]\ndeployment_timeout = 8\ndelivery_timeout = 0\n")
    layered = [cli.conf, short]
    config = script(cli, "slow", "#!/bin/sh\nsleep 14\n")
    nobody = str(uuid.uuid4())

    lost = cli(
        "deployment", "create", "lost", "--server", nobody, "--config", config,
        "--wait", "-f", "json", rc=ExitCode.TIMED_OUT, conf=layered,
    )  # fmt: skip
    shown = json.loads(lost.stdout)
    assert shown["reason"]["stage"] == "published", shown
    assert "stopped at: published" in shown["status_reason"]
    still = [line for line in lost.stderr.splitlines() if "still waiting" in line]
    assert still, lost.stderr
    assert re.search(r"still waiting: published \d+ s ago, not picked up yet", still[0])
    assert "FAILED (timeout)" in lost.stderr.splitlines()[-1]

    with agent_server(sw, cli.folder / "server") as server:
        hung = cli(
            "deployment", "create", "hung", "--server", server.id, "--config",
            config, "--wait", "-f", "json", rc=ExitCode.TIMED_OUT, conf=layered,
        )  # fmt: skip
        shown = json.loads(hung.stdout)
        assert shown["reason"]["stage"] == "started", (shown, hung.stderr)
        assert "the hook still runs, or hung" in shown["status_reason"]
        assert "started on the server" in hung.stderr
        until(lambda: "sleep 14" not in _processes(), 30, "the hook to end")
        cli("deployment", "delete", shown["id"])
    cli("deployment", "delete", *[d.id for d in sw.list_deployments()])
    for line in (lost.stderr + hung.stderr).splitlines():
        assert not ("COMPLETE" in line and "waiting" in line), line


def _processes() -> str:
    return subprocess.run(
        ["ps", "-eo", "args"], capture_output=True, text=True, check=True
    ).stdout
