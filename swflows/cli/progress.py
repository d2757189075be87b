"""Following a deployment until no flow works on it: ``--wait`` and ``watch``.

On a terminal one status line is rewritten in place; otherwise a plain line
is printed each time something other than the elapsed time changes, and a
"still waiting" line every few seconds while the deployment is parked.  A
parked deployment's line names the stage it reached on its server.
"""

from __future__ import annotations

import time
from typing import IO, TYPE_CHECKING, Any

from swflows import exceptions, model, signals

if TYPE_CHECKING:
    from swflows.api import Swflows

#: seconds between two looks at the flows table
INTERVAL = 0.5
#: seconds between two "still waiting" lines while a deployment is parked
#: (off a terminal; a line is printed at once whenever its state changes)
HEARTBEAT = 5.0
#: a parked flow's stage, as its state line says it
_STAGE_WORDS = {
    signals.PUBLISHED: "not picked up yet",
    signals.PICKED_UP: "picked up",
    signals.STARTED: "started on the server",
}


def describe(
    deployment: model.Deployment | None,
    rows: list[Any],
    step: str | None = None,
    now: float | None = None,
) -> str:
    """What is happening now, without the elapsed time.

    ``step`` is the task a running flow is at, when known.  With ``now``
    (the time), a parked flow's stage says how long ago it was reached
    (:func:`waited`).
    """
    if not rows:
        if deployment is None:
            return "removed"
        return f"{deployment.status}: {deployment.status_reason}".rstrip(": ")
    flow = rows[0]
    head = "" if deployment is None else f"{deployment.action} {deployment.status}, "
    if flow.state == "BROKEN":
        return f"{head}{flow.kind} set aside: {flow.note}"
    if deployment is not None and deployment.is_terminal:
        # the outcome is in: its flow winds down, nothing waits any more
        return f"{head}{flow.kind} finishing"
    if flow.state == "PARKED":
        waiting = flow.waiting or {}
        return (
            f"{head}{flow.kind} parked, waiting for the server's signal "
            f"({waiting.get('transport', '?')}): "
            + (
                _STAGE_WORDS[signals.stage_of(waiting)]
                if now is None
                else waited(waiting, now)
            )
        )
    if step:
        return f"{head}{flow.kind} running, step {step}"
    return f"{head}{flow.kind} running"


def waited(waiting: dict[str, Any], now: float) -> str:
    """How long a parked flow has been at its stage, and when it times out:
    ``published 35 s ago, not picked up yet; times out in 85 s``."""

    def ago(at: Any) -> str:
        return "" if at is None else f" {max(0.0, now - float(at)):.0f} s ago"

    stage = signals.stage_of(waiting)
    if stage == signals.STARTED:
        text = f"started on the server{ago(waiting.get('started_at'))}, "
        text += "no final signal yet"
    elif stage == signals.PICKED_UP:
        text = f"picked up{ago(waiting.get('picked_up_at'))}, no signal yet"
    else:
        # the action started, then published at once
        published = None
        if "deadline" in waiting and "timeout" in waiting:
            published = float(waiting["deadline"]) - float(waiting["timeout"])
        text = f"published{ago(published)}, not picked up yet"
    if "deadline" in waiting:
        text += f"; times out in {max(0.0, float(waiting['deadline']) - now):.0f} s"
    return text


def follow(
    sw: Swflows,
    deployment_id: str,
    out: IO[str],
    *,
    timeout: float | None = None,
    interval: float = INTERVAL,
    heartbeat: float = HEARTBEAT,
) -> model.Deployment | None:
    """Print progress until no flow works on the deployment; return it.

    While it is parked, a terminal's line says how long it has waited at
    its stage; elsewhere a "still waiting" line comes every ``heartbeat``
    seconds.  None when the deployment was removed (an undeploy).  A flow
    set aside as BROKEN raises FlowError; ``timeout`` seconds raise
    WaitTimeout.
    """
    tty = out.isatty()
    started = time.monotonic()
    shown = None
    printed = started
    width = 0
    while True:
        rows = sw.list_flows(deployment_id=deployment_id)
        try:
            deployment: model.Deployment | None = sw.show(deployment_id)
        except exceptions.DeploymentNotFound:
            deployment = None
        step = None
        if rows and rows[0].state == "RUNNING":
            step = sw.current_step(rows[0].id)
        state = describe(deployment, rows, step)
        clock = time.monotonic()
        elapsed = clock - started
        parked = (
            bool(rows)
            and rows[0].state == "PARKED"
            and deployment is not None
            and not deployment.is_terminal
        )
        if tty:
            now = time.time()
            line = f"[{elapsed:5.0f}s] {describe(deployment, rows, step, now)}"
            out.write("\r" + line.ljust(width))
            width = len(line)
        elif state != shown:
            out.write(f"[{elapsed:5.1f}s] {state}\n")
            printed = clock
        elif parked and clock - printed >= heartbeat:
            waiting = waited(rows[0].waiting or {}, time.time())
            out.write(f"[{elapsed:5.1f}s] still waiting: {waiting}\n")
            printed = clock
        shown = state
        out.flush()
        if not rows:
            if tty:
                out.write("\n")
            return deployment
        if any(r.state == "BROKEN" for r in rows):
            if tty:
                out.write("\n")
            raise exceptions.FlowError(rows[0].id, rows[0].note or "set aside")
        if timeout is not None and elapsed >= timeout:
            if tty:
                out.write("\n")
            raise exceptions.WaitTimeout(deployment_id, timeout)
        time.sleep(interval)
