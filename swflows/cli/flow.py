"""``swflows flow list|resume``: unfinished flows, and taking them over."""

from __future__ import annotations

import argparse
import datetime
import time
from typing import Any

import tenacity

from swflows.cli import base, parsing, progress

COLUMNS = (
    "id",
    "kind",
    "deployment_id",
    "state",
    "owner",
    "elapsed",
    "picked_up",
    "stage",
)
LONG_COLUMNS = (*COLUMNS, "server_id", "takeovers", "note")


def flow_row(row: Any, now: float | None = None) -> dict[str, Any]:
    """A flow as ``flow list`` shows it; a parked one's ``stage`` says, as
    ``--wait`` does, how far its deployment got on its server and since
    when (``published 35 s ago, not picked up yet; times out in 85 s``)."""
    now = time.time() if now is None else now
    data: dict[str, Any] = row.to_dict()
    waiting = row.waiting or {}
    parked = row.state == "PARKED"
    # the store's times are naive UTC
    created = row.created_at.replace(tzinfo=datetime.UTC).timestamp()
    data["elapsed"] = round(now - created, 1)
    data["picked_up"] = waiting.get("picked_up") if parked else None
    data["stage"] = progress.waited(waiting, now) if parked else None
    return data


class ListFlows(base.Lister):
    """Unfinished flows: running, parked (waiting for a signal) or broken."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument(
            "--interrupted",
            action="store_true",
            help="only those no live runner drives (their runner died, or BROKEN)",
        )
        parser.add_argument("--deployment", metavar="ID")
        parser.add_argument("--long", action="store_true", help="more columns")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        if parsed_args.interrupted:
            rows = self.sw.list_interrupted()
            if parsed_args.deployment:
                rows = [r for r in rows if r.deployment_id == parsed_args.deployment]
        else:
            rows = self.sw.list_flows(deployment_id=parsed_args.deployment)
        names = LONG_COLUMNS if parsed_args.long else COLUMNS
        return names, [base.row(flow_row(r), names) for r in rows]


class ResumeFlows(base.Command):
    """Take over interrupted flows now and drive them to their next wait."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("id", metavar="ID", nargs="?")
        parser.add_argument("--all", action="store_true", help="every one")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        if bool(parsed_args.id) == bool(parsed_args.all):
            raise parsing.BadInput("ID", "give a flow id or --all")
        sw = self.sw
        if parsed_args.id and parsed_args.id not in {r.id for r in sw.list_flows()}:
            raise parsing.BadInput("ID", f"no unfinished flow {parsed_args.id}")
        resumed = sw.resume(parsed_args.id)
        for flow_id in resumed:
            # drive it until it parks or ends before this process exits
            tenacity.Retrying(
                retry=tenacity.retry_if_result(bool),
                wait=tenacity.wait_fixed(0.1),
            )(_running, sw, flow_id)
            self.app.stdout.write(f"flow {flow_id} resumed\n")
        if parsed_args.id and not resumed:
            raise parsing.BadInput(
                "ID", f"flow {parsed_args.id} is not interrupted (a live runner has it)"
            )
        if not resumed:
            self.app.stdout.write("no interrupted flow\n")


def _running(sw: Any, flow_id: str) -> bool:
    return any(r.id == flow_id and r.state == "RUNNING" for r in sw.list_flows())
