"""``swflows engine``: the long-running runner and signal watcher."""

from __future__ import annotations

import argparse
from typing import Any

from swflows.cli import base


class Engine(base.Command):
    """Run flows and watch for signals until SIGTERM or SIGINT.

    It takes over interrupted flows when it starts (``[runner]
    resume_on_start``) and those of runners that die while it runs.
    """

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        stop = base.stop_on_signals()
        sw = self.app.swflows(resume=True)
        self.app.stdout.write(
            f"engine {sw.runner.owner} running; "
            f"{len(sw.list_flows())} unfinished flows\n"
        )
        self.app.stdout.flush()
        while not stop.wait(3600):
            pass
        self.app.stdout.write("engine stopping\n")
        self.app.stdout.flush()
        self.app.close_swflows()
        self.app.stdout.write("engine stopped\n")
        return 0
