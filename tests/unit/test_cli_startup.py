"""What a short command loads: reading the store starts no runner, loads no
TaskFlow pattern, no alembic for a migrated database, and no novaclient
(the start-up time itself is in ``bench``)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

PROGRAM = """
import json, sys, threading
from swflows.cli.main import main
code = main(sys.argv[1:])
print(json.dumps({
    "code": code,
    "modules": sorted(sys.modules),
    "threads": sorted(t.name for t in threading.enumerate()),
}), file=sys.stderr)
"""

#: what ``deployment list`` and ``config list`` must not load
HEAVY = ("alembic", "networkx", "novaclient", "swflows.engine", "taskflow.patterns")


def run(conf: pathlib.Path, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, "--config-file", str(conf), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report: dict[str, object] = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    return report


def test_reading_commands_load_neither_taskflow_flows_nor_migrations(
    tmp_path: pathlib.Path,
) -> None:
    conf = tmp_path / "swflows.conf"
    conf.write_text(f"[database]\nconnection = sqlite:///{tmp_path}/s.sqlite\n")
    run(conf, "config", "list")  # creates and migrates the database
    for command in (("deployment", "list"), ("config", "list")):
        report = run(conf, *command)
        modules = report["modules"]
        assert isinstance(modules, list)
        loaded = [m for m in modules if m.startswith(HEAVY)]
        assert loaded == [], command
        assert not [t for t in report["threads"] if t.startswith("swflows-")]  # type: ignore[attr-defined]
