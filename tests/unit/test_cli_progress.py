"""The progress line of ``--wait`` and ``watch``."""

from __future__ import annotations

import dataclasses
import io
import re
import time
import types
from typing import Any

import pytest

from swflows import model, states
from swflows.cli import group as cli_group
from swflows.cli.progress import describe, follow
from swflows.cli.progress_bar import ERASE


def row(state: str, **kw: object) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        kind=kw.get("kind", "deploy"),
        state=state,
        waiting=kw.get("waiting"),
        note=kw.get("note"),
    )


def deployment(status: str = states.IN_PROGRESS) -> model.Deployment:
    return model.Deployment(
        id="d",
        server_id="s",
        config_id=None,
        source_config_id=None,
        action="CREATE",
        status=status,
        status_reason="Outputs received" if status == states.COMPLETE else "",
    )


def test_a_running_flow_names_its_step() -> None:
    line = describe(deployment(), [row("RUNNING")], "PublishMetadata")
    assert line == "CREATE IN_PROGRESS, deploy running, step PublishMetadata"
    assert describe(deployment(), [row("RUNNING")]) == (
        "CREATE IN_PROGRESS, deploy running"
    )


def test_a_parked_flow_says_whether_it_was_picked_up() -> None:
    waiting = {"transport": "TEMP_URL_SIGNAL", "picked_up": True}
    assert describe(deployment(), [row("PARKED", waiting=waiting)]).endswith(
        "waiting for the server's signal (TEMP_URL_SIGNAL): picked up"
    )


def test_the_end() -> None:
    assert describe(deployment(states.COMPLETE), []) == "COMPLETE: Outputs received"
    assert describe(None, []) == "removed"
    assert describe(deployment(), [row("BROKEN", note="why")]).endswith(
        "set aside: why"
    )


#: a flow parked at 1000.0 with 120 s to wait
PARKED_AT = {"transport": "TEMP_URL_SIGNAL", "deadline": 1120.0, "timeout": 120}


@pytest.mark.parametrize(
    ("seen", "words", "since"),
    [
        ({}, "not picked up yet", "published 35 s ago, not picked up yet"),
        (
            {"picked_up": True, "picked_up_at": 1010.0},
            "picked up",
            "picked up 25 s ago, no signal yet",
        ),
        (
            {"picked_up": True, "picked_up_at": 1010.0, "started_at": 1020.0},
            "started on the server",
            "started on the server 15 s ago, no final signal yet",
        ),
    ],
)
def test_a_parked_flow_names_its_stage_and_since_when(
    seen: dict[str, Any], words: str, since: str
) -> None:
    flows = [row("PARKED", waiting={**PARKED_AT, **seen})]
    assert describe(deployment(), flows) == (
        "CREATE IN_PROGRESS, deploy parked, waiting for the server's signal "
        f"(TEMP_URL_SIGNAL): {words}"
    )
    assert describe(deployment(), flows, now=1035.0).endswith(
        f"(TEMP_URL_SIGNAL): {since}; times out in 85 s"
    )


def test_an_outcome_in_is_not_waited_for_any_more() -> None:
    """Its flow, still parked until the watcher resumes it, no longer
    waits: no "COMPLETE ... waiting ... not picked up yet"."""
    done = dataclasses.replace(deployment(states.COMPLETE), action="BACKUP")
    line = describe(done, [row("PARKED", waiting=PARKED_AT, kind="trigger")])
    assert line == "BACKUP COMPLETE, trigger finishing"


class Parked:
    """A Swflows whose deployment stays parked for ``looks`` looks, then
    ends COMPLETE."""

    def __init__(self, looks: int, waiting: dict[str, Any]) -> None:
        self.looks = looks
        self.waiting = waiting

    def list_flows(self, deployment_id: str) -> list[Any]:
        self.looks -= 1
        return [row("PARKED", waiting=self.waiting)] if self.looks > 0 else []

    def show(self, deployment_id: str) -> model.Deployment:
        return deployment(states.IN_PROGRESS if self.looks > 0 else states.COMPLETE)


def test_waiting_off_a_terminal_says_still_waiting_every_few_seconds() -> None:
    waiting = {**PARKED_AT, "deadline": time.time() + 100, "timeout": 130}
    out = io.StringIO()
    sw: Any = Parked(40, waiting)
    final = follow(sw, "d", out, interval=0.01, heartbeat=0.1)
    assert final is not None and final.status == states.COMPLETE
    lines = out.getvalue().splitlines()
    assert "deploy parked" in lines[0] and lines[0].endswith("not picked up yet")
    still = [line for line in lines if "still waiting" in line]
    assert 2 <= len(still) <= 6, lines
    assert re.search(r"still waiting: published 3\d s ago, not picked up yet; "
                     r"times out in \d+ s$", still[0]), still  # fmt: skip
    assert lines[-1].endswith("COMPLETE: Outputs received")


class Group:
    """A Swflows whose group stays IN_PROGRESS for ``looks`` looks."""

    runner = None

    def __init__(self, looks: int) -> None:
        self.looks = looks

    def show_group(self, name: str) -> dict[str, Any]:
        self.looks -= 1
        going = self.looks > 0
        return {
            "name": name,
            "status": states.IN_PROGRESS if going else states.COMPLETE,
            "operation": {
                "kind": "deploy",
                "done": 0 if going else 2,
                "running": 2 if going else 0,
                "failed": 0,
                "left": 0,
            },
        }


def test_a_group_waited_for_says_still_waiting_every_few_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cli_group, "INTERVAL", 0.01)
    out = io.StringIO()
    sw: Any = Group(40)
    final = cli_group.follow(sw, "web", out, heartbeat=0.1)
    assert final is not None and final["status"] == states.COMPLETE
    lines = out.getvalue().splitlines()
    assert lines[0].endswith("group web deploy IN_PROGRESS: 0 done, 2 running, "
                             "0 failed, 0 left")  # fmt: skip
    still = [line for line in lines if "still waiting" in line]
    assert 2 <= len(still) <= 6, lines
    assert still[0].endswith("] still waiting: " + lines[0].split("] ", 1)[1])
    assert lines[-1].endswith("group web deploy COMPLETE: 2 done, 0 running, "
                              "0 failed, 0 left")  # fmt: skip
    assert "\r" not in out.getvalue() and ERASE not in out.getvalue()


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_group_waited_for_on_a_terminal_is_a_bar_rewritten_in_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cli_group, "INTERVAL", 0.01)
    monkeypatch.setenv("COLUMNS", "100")
    out = Terminal()
    sw: Any = Group(40)
    final = cli_group.follow(sw, "web", out, heartbeat=0.1)
    assert final is not None and final["status"] == states.COMPLETE
    text = out.getvalue()
    assert text.endswith("\n") and text.count("\n") == 1, text
    frames = [f.removesuffix(ERASE) for f in text.rstrip("\n").split("\r")[1:]]
    assert len(frames) == 40
    assert all(len(f) < 100 and "still waiting" not in f for f in frames)
    assert frames[0].startswith("group web deploy IN_PROGRESS [>>>")
    # the elapsed time is the machine's (a loaded one takes over 0.5 s)
    assert re.search(
        r"0 done, 2 running, 0 failed, 0 left, \d+s elapsed, ETA \?$", frames[0]
    )
    assert frames[-1].startswith("group web deploy COMPLETE [###")
    assert re.search(r"2 done, 0 running, 0 failed, 0 left, \d+s elapsed$", frames[-1])


def test_a_watch_counts_elapsed_time_from_when_the_operation_started() -> None:
    """``group watch`` comes late: its elapsed time and the rate of its ETA
    count from the operation's start, not from the first look."""
    begun = model.isotime(time.time() - 60)
    assert cli_group.ran_before({"started_at": begun}) == pytest.approx(60, abs=1.5)
    assert cli_group.ran_before({"started_at": None}) == 0.0
    later = model.isotime(time.time() + 3600)
    assert cli_group.ran_before({"started_at": later}) == 0.0
