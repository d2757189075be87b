"""The operator shell the README's quick start promises: after the dev cloud
is up, ``eval "$(tools/devcloud env)"`` gives a shell whose ``swflows`` and
``swflows-agent`` work against it with no hand-written file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.functional.conftest import BASE, DEVCLOUD

SHELL_PYTHON = BASE / "swflows" / "bin" / "python"


def fresh_shell(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in bash with a bare environment, as a new login would."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(cwd), "LANG": "C.UTF-8"}
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_env_makes_a_shell_whose_swflows_works(devcloud: Any, tmp_path: Path) -> None:
    (tmp_path / "hello.sh").write_text("#!/bin/sh\necho hello\n")
    done = fresh_shell(
        f'eval "$({sys.executable} {DEVCLOUD} env)"\n'
        "command -v swflows-agent >/dev/null\n"
        "id=$(swflows config create shell-check --group script "
        "--config-file hello.sh -f value -c id)\n"
        'swflows config show "$id" -f json > shown.json\n'
        'swflows config delete "$id"\n',
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads((tmp_path / "shown.json").read_text())
    assert (shown["name"], shown["group"]) == ("shell-check", "script")


def test_env_names_the_files_each_start_writes(devcloud: Any) -> None:
    done = subprocess.run(
        [sys.executable, str(DEVCLOUD), "env"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    exports = dict(
        line.removeprefix("export ").split("=", 1)
        for line in done.stdout.splitlines()
        if not line.startswith("export PATH=")
    )
    conf = Path(exports["SWFLOWS_CONFIG"])
    assert conf.stat().st_mode & 0o077 == 0  # passwords: the owner's only
    text = conf.read_text()
    # the cloud's current login, not one from an earlier start
    assert devcloud["keystone"]["auth_url"] in text
    assert devcloud["keystone"]["demo"]["password"] in text
    clouds = json.loads(Path(exports["OS_CLIENT_CONFIG_FILE"]).read_text())
    assert (
        clouds["clouds"]["devcloud"]["auth"]["auth_url"]
        == (devcloud["keystone"]["auth_url"])
    )


def test_booted_agents_run_with_a_python_that_has_their_requirements(
    devcloud: Any,
) -> None:
    records = json.loads((BASE / "state" / "servers.json").read_text())
    pid = records["nova"]["pid"]
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    agent_python = argv[argv.index("--agent-python") + 1]
    assert Path(agent_python) == SHELL_PYTHON
    check = subprocess.run(
        [agent_python, "-c", "import requests, tenacity, swflows.agent.agent"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr


@pytest.mark.parametrize("command", ["swflows", "swflows-agent"])
def test_the_shell_runs_this_tree(command: str) -> None:
    done = subprocess.run(
        [str(SHELL_PYTHON), "-c", "import swflows; print(swflows.__file__)"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    repo = Path(__file__).resolve().parents[2]
    assert Path(done.stdout.strip()).is_relative_to(repo / "swflows")
    assert (SHELL_PYTHON.parent / command).exists()


def walk_through() -> tuple[str, list[str]]:
    """The README's "First steps in the shell": its commands as one script,
    and the output lines it shows (those holding an elided id left out)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("### First steps in the shell", 1)[1]
    block = section.split("```console\n", 1)[1].split("```", 1)[0]
    commands, shown = [], []
    for line in block.splitlines():
        if line.startswith("$ "):
            commands.append(line[2:])
        elif "…" not in line:
            shown.append(line)
    return "\n".join(commands) + "\n", shown


def test_the_readme_walk_through_runs_in_a_new_shell(devcloud: Any) -> None:
    script, shown = walk_through()
    assert "swflows deployment cancel" in script and shown
    repo = Path(__file__).resolve().parents[2]
    # the user's PATH without this test run's virtualenv: swflows must come
    # from what the walk-through's first line sets up
    venv_bin = str(Path(sys.executable).parent)
    path = ":".join(p for p in os.environ["PATH"].split(":") if p != venv_bin)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=repo,
        env={"PATH": path, "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    printed = done.stdout.splitlines()
    at = 0
    for line in shown:  # in order, each where the README shows it
        assert line in printed[at:], (line, done.stdout)
        at = printed.index(line, at) + 1
