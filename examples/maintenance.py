"""A step of one's own, with its own revert, around a swflows trigger.

``OpenTicket`` opens a change ticket (here a JSON file in ``ticket_dir``,
standing for any system of record) before the action runs, and
``CloseTicket`` closes it with the action's outcome.  The ticket is named
after the flow's id (``flow_id``, a value every custom flow holds), so a
step run again after a crash finds the ticket the first run opened.  If
the flow fails (the config has no such action, the signal store cannot be
made...), TaskFlow reverts it: the trigger's steps remove what they made,
and ``OpenTicket.revert`` withdraws the ticket.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from taskflow import task
from taskflow.patterns import linear_flow

from swflows import trigger_subflow


def ticket_path(ticket_dir: str, flow_id: str) -> Path:
    return Path(ticket_dir) / f"{flow_id}.json"


class OpenTicket(task.Task):  # type: ignore[misc]
    """Open the flow's ticket (once: an open ticket is kept as it is)."""

    def __init__(self, ticket_dir: str) -> None:
        super().__init__(name="examples.maintenance.OpenTicket", provides="ticket")
        self.ticket_dir = ticket_dir

    def execute(self, flow_id: str) -> str:
        path = ticket_path(self.ticket_dir, flow_id)
        if not path.exists():
            path.write_text(json.dumps({"flow": flow_id, "state": "open"}))
        return str(path)

    def revert(self, result: Any, flow_id: str, **kwargs: Any) -> None:
        # keyed by the flow, not by the result: found even if never recorded
        ticket_path(self.ticket_dir, flow_id).unlink(missing_ok=True)


class CloseTicket(task.Task):  # type: ignore[misc]
    """Close the ticket with the action's outcome (writing it twice is the
    same as once)."""

    def execute(self, ticket: str, change: dict[str, Any]) -> str:
        body = json.loads(Path(ticket).read_text())
        body.update(state="closed", outcome=change["status"])
        Path(ticket).write_text(json.dumps(body))
        return str(change["status"])


def make_flow(
    deployment_id: str,
    ticket_dir: str,
    action: str = "UPGRADE",
    input_values: dict[str, Any] | None = None,
) -> Any:
    flow = linear_flow.Flow("examples.maintenance")
    flow.add(
        OpenTicket(ticket_dir),
        trigger_subflow(
            "change",
            deployment_id=deployment_id,
            action=action,
            input_values=input_values,
        ),
        CloseTicket(name="examples.maintenance.CloseTicket", provides="closed"),
    )
    return flow
