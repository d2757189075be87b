"""Flows and helpers for the jobboard tests: steps that record who ran them.

Each step appends one JSON line ``{"flow", "step", "phase", "pid"}`` to
the file its flow was given, so a test counts how often, and in which
conductor process, every step began and ended.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from taskflow import task
from taskflow.patterns import linear_flow

from swflows.flows import compose


def note(record: str, flow_id: str, step: str, phase: str) -> None:
    line = json.dumps(
        {"flow": flow_id, "step": step, "phase": phase, "pid": os.getpid()}
    )
    with open(record, "a") as out:
        out.write(line + "\n")


class Step(task.Task):  # type: ignore[misc]
    def __init__(self, name: str, record: str, seconds: float) -> None:
        super().__init__(
            name=f"jobkit.{name}",
            requires=[compose.FLOW_ID_KEY],
            provides=f"{name}_done",
        )
        self.step = name
        self.record = record
        self.seconds = seconds

    def execute(self, flow_id: str) -> str:
        note(self.record, flow_id, self.step, "start")
        time.sleep(self.seconds)
        note(self.record, flow_id, self.step, "end")
        return f"{self.step} ok"


def steps(record: str, seconds: float = 0.0) -> Any:
    """Three steps; the middle one takes ``seconds``."""
    return linear_flow.Flow("jobkit-steps").add(
        Step("a", record, 0.0), Step("b", record, seconds), Step("c", record, 0.0)
    )


class Fatal(task.Task):  # type: ignore[misc]
    def __init__(self, record: str) -> None:
        super().__init__(name="jobkit.fatal", requires=[compose.FLOW_ID_KEY])
        self.record = record

    def execute(self, flow_id: str) -> None:
        note(self.record, flow_id, "fatal", "start")
        # stops the run as a crash would: no failure recorded, no revert
        raise SystemExit("this step stops whoever runs it")


def poison(record: str) -> Any:
    """A flow whose step stops the run on every conductor."""
    return linear_flow.Flow("jobkit-poison").add(Fatal(record))


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]
