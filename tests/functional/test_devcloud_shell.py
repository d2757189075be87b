"""The operator shell the README's quick start promises: after the dev cloud
is up, ``eval "$(tools/devcloud env)"`` gives a shell whose ``swflows`` and
``swflows-agent`` work against it with no hand-written file."""

from __future__ import annotations

import json
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
