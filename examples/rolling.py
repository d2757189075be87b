"""Run one action on N servers, one at a time, stopping at the first failure.

Each deployment of ``deployment_ids`` gets its own trigger (``server-0``,
``server-1``, ...), in order; a trigger runs only if the one before it
ended COMPLETE.  At the first FAILED (or timed-out, or cancelled) action
the servers after it are left untouched: no deployment is made for them
and their agents see nothing.  The servers already done are **not**
reverted: their action ran and its outcome is kept (a FAILED signal is a
result, not an error).  The flow ends SUCCESS either way; its result holds
``server-<i>`` for each server that ran; :func:`stopped_at` says where it
stopped (None when every server completed).
"""

from __future__ import annotations

from typing import Any

from taskflow.patterns import graph_flow

from swflows import link_if_complete, trigger_subflow


def make_flow(
    deployment_ids: list[str],
    action: str = "UPGRADE",
    input_values: dict[str, Any] | None = None,
) -> Any:
    flow = graph_flow.Flow("examples.rolling")
    previous = None
    for index, deployment_id in enumerate(deployment_ids):
        step = trigger_subflow(
            f"server-{index}",
            deployment_id=deployment_id,
            action=action,
            input_values=input_values,
        )
        flow.add(step)
        if previous is not None:
            link_if_complete(flow, previous, step, f"server-{index - 1}")
        previous = step
    return flow


def stopped_at(result: dict[str, Any], count: int) -> int | None:
    """Where a finished rolling flow stopped: the first server whose
    action did not complete, or None."""
    for index in range(count):
        done = result.get(f"server-{index}")
        if done is None or done["status"] != "COMPLETE":
            return index
    return None
