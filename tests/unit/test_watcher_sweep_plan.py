"""Which metadata channels the sweep removes, and when (pure)."""

from __future__ import annotations

from collections.abc import Collection

from swflows.engine.sweeper import sweep_plan
from swflows.transports.base import FoundChannel

MINE = "mine"


def found(owner: str | None = MINE) -> FoundChannel:
    return FoundChannel({"queue": "q"}, owner)


def plan(
    existing: dict[str, FoundChannel],
    owned: Collection[str] = (),
    seen: dict[str, float] | None = None,
    now: float = 100.0,
    grace: float = 10.0,
    untagged: bool = False,
) -> tuple[list[str], dict[str, float]]:
    return sweep_plan(
        existing,
        set(owned),
        MINE,
        untagged=untagged,
        seen=seen or {},
        now=now,
        grace=grace,
    )


def test_an_orphan_is_remembered_then_removed_after_the_grace_period() -> None:
    existing = {"a": found()}
    assert plan(existing) == ([], {"a": 100.0})
    assert plan(existing, seen={"a": 100.0}, now=105.0) == ([], {"a": 100.0})
    assert plan(existing, seen={"a": 100.0}, now=110.0) == (["a"], {})


def test_no_grace_removes_at_first_sight() -> None:
    assert plan({"a": found()}, grace=0.0) == (["a"], {})


def test_an_owned_channel_stays_and_is_forgotten() -> None:
    """Recorded by an enrollment between two looks: its clock starts over
    if it is ever orphaned again."""
    assert plan({"a": found()}, owned={"a"}, seen={"a": 0.0}) == ([], {})
    assert plan({"a": found()}, seen={}, now=200.0) == ([], {"a": 200.0})


def test_another_installations_channels_are_never_removed() -> None:
    existing = {"theirs": found("other"), "old": found(None)}
    assert plan(existing, grace=0.0) == ([], {})
    # untagged ones only when asked for; another tag never
    assert plan(existing, grace=0.0, untagged=True) == (["old"], {})


def test_a_channel_gone_meanwhile_is_forgotten() -> None:
    assert plan({}, seen={"a": 0.0}) == ([], {})
