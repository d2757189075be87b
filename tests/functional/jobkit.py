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
    line = json.dumps({"flow": flow_id, "step": step, "phase": phase, "pid": os.getpid()})
    with open(record, "a") as out:
        out.write(line + "\n")


class Step(task.Task):  # type: ignore[misc]
    def __init__(self, name: str, record: str, seconds: float) -> None:
        super().__init__(
            name=f"jobkit.{name}", requires=[compose.FLOW_ID_KEY], provides=f"{name}_done"
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


class Unstorable(task.Task):  # type: ignore[misc]
    def execute(self) -> Any:
        return object()  # no JSON form: storing it fails on every run


def poison() -> Any:
    """A flow whose step's result cannot be stored: it fails on every conductor."""
    return linear_flow.Flow("jobkit-poison").add(
        Unstorable(name="jobkit.unstorable", provides="x")
    )


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]
