"""The operator's view through the ``swflows`` executable: the servers
and when each was last seen, what a wait says while a deployment waits,
the stage a timeout stopped at, and each result said once."""

from __future__ import annotations

import re
import uuid

from swflows import states
from swflows.api import Swflows
from tests.functional.test_agent import agent_server
from tests.functional.test_cli import Cli, setup, write

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
