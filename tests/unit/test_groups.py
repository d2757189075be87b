"""Deployment groups' pure parts: members, operations, what a member's
deployment says, and the command line's policy options."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from swflows import exceptions, rollout
from swflows.api import group_driver, groups
from swflows.cli import group as cli_group
from swflows.cli import parsing
from swflows.persistence.groups import MemberState


def test_members_are_checked() -> None:
    members, own = groups.check_members({"0": "s0", "web-1": "s1"}, {"0": {"a": 1}})
    assert members == {"0": "s0", "web-1": "s1"}
    assert own == {"0": {"a": 1}}
    for servers, values, words in (
        ({}, None, "non-empty mapping"),
        ([("a", "b")], None, "non-empty mapping"),
        ({"-a": "s"}, None, "member name '-a'"),
        ({"a b": "s"}, None, "member name 'a b'"),
        ({"a": ""}, None, "member a: server id ''"),
        ({"a": "s"}, {"b": {}}, "'b' is not a member"),
        ({"a": "s"}, {"a": "x"}, "a: must be a mapping"),
    ):
        with pytest.raises(exceptions.ValidationError, match=words):
            groups.check_members(servers, values)


def test_an_operation_places_its_members_in_waves() -> None:
    members = {
        name: groups._member(f"s-{name}", "deploy", f"d-{name}") for name in "abcd"
    }
    policy = rollout.Policy.from_dict({"batches": [1, 2]})
    operation = groups.new_operation(groups.DEPLOY, "CREATE", members, policy)
    assert operation["order"] == ["a", "b", "c", "d"]
    assert [operation["members"][n]["batch"] for n in "abcd"] == [0, 1, 1, 2]
    assert operation["policy"]["batches"] == [1, 2]
    assert operation["cancel"] is None


@pytest.mark.parametrize(
    ("task", "found", "generation", "seen"),
    [
        ("deploy", None, 1, "unlaunched"),
        ("deploy", ("", 0, True), 1, "running"),  # its flow is there
        ("deploy", ("IN_PROGRESS", 1, False), 1, "running"),
        ("deploy", ("COMPLETE", 1, False), 1, "ended"),
        ("deploy", ("FAILED", 1, True), 1, "running"),
        ("redeploy", ("COMPLETE", 1, False), 2, "unlaunched"),
        ("redeploy", ("COMPLETE", 2, False), 2, "ended"),
        ("redeploy", ("IN_PROGRESS", 2, True), 2, "running"),
        ("undeploy", None, 2, "ended"),
        ("undeploy", ("COMPLETE", 1, False), 2, "unlaunched"),
        ("undeploy", ("IN_PROGRESS", 2, True), 2, "running"),
        ("trigger", ("FAILED", 1, False), 1, "ended"),
        # a flow set aside (BROKEN) is no flow at work: the member is not
        # waited on for ever, nor started again over it
        ("deploy", ("", 0, False, "taken over 5 times"), 1, "broken"),
        ("deploy", ("IN_PROGRESS", 1, False, "revert failed"), 1, "broken"),
        ("deploy", ("FAILED", 1, False, "revert failed"), 1, "ended"),
        ("deploy", ("IN_PROGRESS", 1, True, "an older one"), 1, "running"),
        ("redeploy", ("COMPLETE", 1, False, "revert failed"), 2, "broken"),
        ("undeploy", ("FAILED", 1, False, "revert failed"), 2, "broken"),
        ("undeploy", ("", 0, False, "revert failed"), 2, "ended"),
    ],
)
def test_what_a_running_members_deployment_says(
    task: str, found: tuple[Any, ...] | None, generation: int, seen: str
) -> None:
    member = groups._member("s", task, "d", generation=generation)
    state = None if found is None else MemberState(*found)
    assert group_driver._ended(member, state) == seen


def parsed(**given: object) -> argparse.Namespace:
    values: dict[str, object] = dict.fromkeys(
        (
            "max_concurrency",
            "max_errors",
            "max_batch_size",
            "batches",
            "pause_time",
            "min_in_service",
        )
    )
    values.update(given)
    return argparse.Namespace(**values)


def test_policy_options_merge_into_the_groups() -> None:
    assert cli_group.policy_of(parsed()) is None
    given = cli_group.policy_of(
        parsed(max_concurrency="10%", batches="1, 5,25%", pause_time=2.0)
    )
    assert given == {
        "max_concurrency": "10%",
        "batches": ["1", "5", "25%"],
        "pause_time": 2.0,
    }
    assert rollout.Policy.from_dict(given).batch_sizes(40) == [1, 5, 10, 10, 10, 4]
    merged = cli_group.policy_of(
        parsed(max_batch_size="2"), {"max_errors": 1, "batches": [1, 5]}
    )
    assert merged == {"max_errors": 1, "max_batch_size": "2"}


def test_member_options() -> None:
    assert cli_group.parse_members(["a=s1", "b = s2"]) == {"a": "s1", "b": "s2"}
    assert cli_group.parse_member_inputs(["a:x=1", "a:y=", "b:x=a=b"]) == {
        "a": {"x": "1", "y": ""},
        "b": {"x": "a=b"},
    }
    for bad in (["a"], ["=s"], ["a="], ["a=s", "a=t"]):
        with pytest.raises(parsing.BadInput, match="--member"):
            cli_group.parse_members(bad)
    for bad in (["a=1"], ["a:x"], [":x=1"]):
        with pytest.raises(parsing.BadInput, match="--member-input"):
            cli_group.parse_member_inputs(bad)
