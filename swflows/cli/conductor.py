"""``swflows conductor``: claim flows' jobs from the jobboard and drive them;
``swflows conductor list``: who holds what."""

from __future__ import annotations

import argparse
from typing import Any

from swflows.cli import base, parsing

COLUMNS = ("name", "host", "pid", "flows", "stale loops")


class Conductor(base.Command):
    """Claim jobs from the jobboard and drive their flows until SIGTERM or
    SIGINT (``[jobboard] enabled`` must be true); the flows it holds are
    given back to the board when it stops."""

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        from swflows.engine import conductor

        stop = base.stop_on_signals()
        sw = self.app.swflows(resume=True)
        if not sw.conf.jobboard.enabled:
            raise parsing.BadInput(
                "[jobboard] enabled", "a conductor needs a jobboard: set it to true"
            )
        running = conductor.Conductor(sw).start()
        self.app.stdout.write(
            f"conductor {running.name} running ({running.board.kind} board)\n"
        )
        self.app.stdout.flush()
        while not stop.wait(3600):
            pass
        self.app.stdout.write("conductor stopping\n")
        self.app.stdout.flush()
        running.close()
        self.app.close_swflows()
        self.app.stdout.write("conductor stopped\n")
        return 0


class ListConductors(base.Lister):
    """Live conductors, the flows each holds and its background loops that
    stopped or are stale (``stale loops``: its claims' upkeep, claiming,
    leases, watcher, sweeper, election, groups); the active signal watcher
    and the jobs waiting on the board follow the table (on stderr)."""

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        from swflows import signals
        from swflows.engine import conductor, jobboard
        from swflows.persistence import flow_registry as flow_rows

        sw = self.sw
        if not sw.conf.jobboard.enabled:
            raise parsing.BadInput("[jobboard] enabled", "no jobboard is configured")
        board = jobboard.Board.from_conf(sw.conf).connect()
        try:
            found = conductor.status(
                board, flow_rows.FlowRegistry(sw.store), sw.conf, sw.store
            )
        finally:
            board.close()
        rows = [
            (
                name,
                info.get("host"),
                info.get("pid"),
                " ".join(info["flows"]),
                " ".join(info["stale"]),
            )
            for name, info in sorted(found["conductors"].items())
        ]
        self.app.stderr.write(
            f"active watcher: {found['watcher']}\n"
            f"jobs waiting: {len(found['waiting'])}"
            + (f" ({' '.join(found['waiting'])})" if found["waiting"] else "")
            + "\n"
            f"parked flows (no job): {found['parked']}\n"
        )
        ended = flow_rows.reconciled(
            flow_rows.FlowRegistry(sw.store),
            {
                "orphaned": signals.ORPHANED_PREFIX,
                "flow_broken": signals.FLOW_BROKEN_PREFIX,
            },
        )
        self.app.stderr.write(
            "deployments ended with no flow to end them: "
            f"{ended['orphaned']} orphaned, {ended['flow_broken']} flow_broken\n"
        )
        for flow_id, owner in sorted(found["held_by_gone"].items()):
            self.app.stderr.write(f"flow {flow_id} held by gone conductor {owner}\n")
        return COLUMNS, rows
