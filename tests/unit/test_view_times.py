"""Every time a view shows is ISO 8601 in UTC with ``Z``, whole seconds."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest

from swflows import model
from swflows.api import Swflows, groups
from swflows.persistence.flow_registry import FlowRow
from swflows.persistence.groups import GroupRecord

ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
#: 2026-11-28T13:40:10Z
EPOCH = 1795873210.25
NAIVE = dt.datetime(2026, 11, 28, 13, 40, 10, 250000)


@pytest.mark.parametrize(
    "value",
    [
        NAIVE,
        NAIVE.replace(tzinfo=dt.UTC),
        NAIVE.replace(tzinfo=dt.timezone(dt.timedelta(hours=2), "x")).replace(hour=15),
        EPOCH,
        int(EPOCH),
    ],
)
def test_one_format_from_every_kind_of_time(value: Any) -> None:
    assert model.isotime(value) == "2026-11-28T13:40:10Z"


def test_no_time_is_none() -> None:
    assert model.isotime(None) is None


def test_a_servers_times(sw: Swflows) -> None:
    shown = sw.enroll_server("web-1")
    assert ISO_Z.match(shown["enrolled_at"]), shown["enrolled_at"]
    changed = sw.set_deploy_policy("web-1", {"mode": "any"})
    assert ISO_Z.match(changed["changed_at"]), changed["changed_at"]


def test_a_flows_times() -> None:
    row = FlowRow(
        id="f",
        kind="deploy",
        deployment_id="d",
        server_id="s",
        state="PARKED",
        owner=None,
        lease_until=EPOCH,
        waiting=None,
        takeovers=0,
        note=None,
        created_at=NAIVE,
    )
    shown = row.to_dict()
    assert shown["created_at"] == "2026-11-28T13:40:10Z"
    assert shown["lease_until"] == "2026-11-28T13:40:10Z"


def test_a_groups_times(sw: Swflows) -> None:
    record = GroupRecord(
        id="g",
        name="web",
        config_id="c",
        servers={},
        input_values={},
        member_values={},
        signal_transport="NO_SIGNAL",
        timeout=None,
        policy={},
        deployments={},
        operation={"kind": "deploy", "started_at": EPOCH, "ended_at": EPOCH + 5},
        action="CREATE",
        status="COMPLETE",
        status_reason="",
        created_at=NAIVE,
        updated_at=NAIVE,
    )
    shown = groups.describe(sw, record)
    assert shown["creation_time"] == shown["updated_time"] == "2026-11-28T13:40:10Z"
    assert shown["operation"]["started_at"] == "2026-11-28T13:40:10Z"
    assert shown["operation"]["ended_at"] == "2026-11-28T13:40:15Z"
