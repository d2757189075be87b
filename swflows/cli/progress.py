"""Following a deployment until no flow works on it: ``--wait`` and ``watch``.

On a terminal one status line is rewritten in place; otherwise a plain line
is printed each time something other than the elapsed time changes.
"""

from __future__ import annotations

import time
from typing import IO, TYPE_CHECKING, Any

from swflows import exceptions, model

if TYPE_CHECKING:
    from swflows.api import Swflows

#: seconds between two looks at the flows table
INTERVAL = 0.5


def describe(
    deployment: model.Deployment | None, rows: list[Any], step: str | None = None
) -> str:
    """What is happening now, without the elapsed time.

    ``step`` is the task a running flow is at, when known.
    """
    if not rows:
        if deployment is None:
            return "removed"
        return f"{deployment.status}: {deployment.status_reason}".rstrip(": ")
    flow = rows[0]
    parts = [f"{flow.kind} {flow.state.lower()}"]
    if deployment is not None:
        parts.insert(0, f"{deployment.action} {deployment.status}")
    waiting = flow.waiting or {}
    if flow.state == "PARKED":
        picked = waiting.get("picked_up")
        parts.append(
            f"waiting for the server's signal ({waiting.get('transport', '?')}), "
            + ("picked up" if picked else "not picked up yet")
        )
    elif flow.state == "BROKEN":
        parts.append(f"set aside: {flow.note}")
    elif step:
        parts.append(f"step {step}")
    return ", ".join(parts)


def follow(
    sw: Swflows,
    deployment_id: str,
    out: IO[str],
    *,
    timeout: float | None = None,
    interval: float = INTERVAL,
) -> model.Deployment | None:
    """Print progress until no flow works on the deployment; return it.

    None when the deployment was removed (an undeploy).  A flow set aside
    as BROKEN raises FlowError; ``timeout`` seconds raise WaitTimeout.
    """
    tty = out.isatty()
    started = time.monotonic()
    shown = None
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
        elapsed = time.monotonic() - started
        if tty:
            line = f"[{elapsed:5.0f}s] {state}"
            out.write("\r" + line.ljust(width))
            width = len(line)
        elif state != shown:
            out.write(f"[{elapsed:5.1f}s] {state}\n")
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
