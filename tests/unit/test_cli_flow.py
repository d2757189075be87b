"""``flow list``: a parked flow's stage, in ``--wait``'s words."""

from __future__ import annotations

import datetime

import pytest

from swflows.cli import flow
from swflows.persistence.flow_registry import FlowRow
from tests.unit.test_cli_progress import PARKED_AT


def parked_row(waiting: dict[str, object], state: str = "PARKED") -> FlowRow:
    return FlowRow(
        id="f1",
        kind="deploy",
        deployment_id="d1",
        server_id="s1",
        state=state,
        owner="runner-1",
        lease_until=None,
        waiting=waiting,
        takeovers=0,
        note=None,
        created_at=datetime.datetime.fromtimestamp(990.0, datetime.UTC).replace(
            tzinfo=None
        ),
    )


@pytest.mark.parametrize(
    ("seen", "stage"),
    [
        ({}, "published 35 s ago, not picked up yet; times out in 85 s"),
        (
            {"picked_up": True, "picked_up_at": 1010.0},
            "picked up 25 s ago, no signal yet; times out in 85 s",
        ),
        (
            {"picked_up": True, "picked_up_at": 1010.0, "started_at": 1020.0},
            "started on the server 15 s ago, no final signal yet; times out in 85 s",
        ),
    ],
)
def test_flow_list_says_how_far_a_parked_flow_got(
    seen: dict[str, object], stage: str
) -> None:
    shown = flow.flow_row(parked_row({**PARKED_AT, **seen}), now=1035.0)
    assert shown["stage"] == stage
    assert shown["elapsed"] == 45.0
    assert "stage" in flow.COLUMNS


def test_flow_list_has_no_stage_for_a_running_flow() -> None:
    shown = flow.flow_row(parked_row({}, state="RUNNING"), now=1035.0)
    assert shown["stage"] is None and shown["picked_up"] is None
