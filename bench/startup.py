"""Command-line start-up: ``swflows deployment list`` with a configuration
file, against the interpreter alone and against importing the libraries no
command can do without (SQLAlchemy, oslo.config, cliff), in the same run.

Every command runs in a new process, as an operator's shell runs it, with
bytecode written once by a warm-up run (an installed package ships it).
The database is a SQLite file holding ``rows`` deployments, migrated by the
warm-up, so the figure is the start-up and one read, not a migration.
"""

from __future__ import annotations

import pathlib
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

from bench import cloud as bcloud
from swflows import model, states
from swflows.persistence import Store

#: what no swflows command can start without
FLOOR_IMPORTS = "import sqlalchemy, oslo_config.cfg, cliff.app, keystoneauth1.session"


def _time(argv: list[str], runs: int) -> list[float]:
    env = bcloud.process_env()
    subprocess.run(argv, env=env, check=True, capture_output=True)  # warm-up
    took = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True)
        took.append(time.perf_counter() - started)
    return took


def _fill(url: str, rows: int) -> None:
    with Store(url) as store:
        config = store.create_config(model.Config.create("bench", "true"))
        for i in range(rows):
            derived = model.Config.create(f"bench-{i}", "true")
            store.create_config(derived, derived=True)
            store.create_deployment(
                model.Deployment(
                    id=str(uuid.uuid4()),
                    server_id=str(uuid.uuid4()),
                    config_id=derived.id,
                    source_config_id=config.id,
                    action="CREATE",
                    status=states.IN_PROGRESS,
                )
            )


def _summary(took: list[float]) -> dict[str, Any]:
    return {
        "runs": len(took),
        "median_s": statistics.median(took),
        "min_s": min(took),
    }


def run(folder: pathlib.Path, runs: int = 10, rows: int = 20) -> dict[str, Any]:
    """The three start-ups, ``runs`` times each: medians of new processes."""
    url = f"sqlite:///{folder / 'startup.sqlite'}"
    conf = folder / "startup.conf"
    conf.write_text(f"[database]\nconnection = {url}\n")
    _fill(url, rows)
    command = [
        sys.executable,
        "-c",
        "import sys; from swflows.cli.main import main; sys.exit(main())",
        "--config-file",
        str(conf),
        "deployment",
        "list",
    ]
    ours = _summary(_time(command, runs))
    bare = _summary(_time([sys.executable, "-c", "pass"], runs))
    floor = _summary(_time([sys.executable, "-c", FLOOR_IMPORTS], runs))
    return {
        "rows": rows,
        "swflows": ours,
        "interpreter": bare,
        "libraries": floor,
        "over_libraries_s": ours["median_s"] - floor["median_s"],
        "ratio_libraries": ours["median_s"] / floor["median_s"],
    }
