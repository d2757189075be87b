"""The rollout policy of deployment groups: parsing and the scheduler."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swflows import exceptions, rollout
from swflows.rollout import COMPLETE, FAILED, PENDING, RUNNING, Member, Policy


# ----------------------------------------------------------------- parsing
def test_defaults_are_all_at_once_with_no_error_allowed() -> None:
    policy = Policy.from_dict(None)
    assert policy.concurrency(7) == 7
    assert policy.max_errors.exceeded_by(1, 7)
    assert not policy.max_errors.exceeded_by(0, 7)
    assert policy.batch_sizes(7) == [7]


@pytest.mark.parametrize(
    ("given", "total", "expected"),
    [(5, 20, 5), ("5", 20, 5), ("25%", 20, 5), ("10%", 5, 1), ("100%", 3, 3)],
)
def test_concurrency_count_or_percent(given: object, total: int, expected: int) -> None:
    assert Policy.from_dict({"max_concurrency": given}).concurrency(total) == expected


def test_error_budget_percent_is_compared_exactly() -> None:
    budget = Policy.from_dict({"max_errors": "10%"}).max_errors
    assert not budget.exceeded_by(2, 25)  # 8%
    assert budget.exceeded_by(3, 25)  # 12%
    assert not budget.exceeded_by(2, 20)  # 10% is not past 10%
    assert budget.exceeded_by(3, 20)
    zero = Policy.from_dict({"max_errors": "0%"}).max_errors
    assert zero.exceeded_by(1, 1000)


def test_ramp_repeats_its_last_size() -> None:
    policy = Policy.from_dict({"batches": [1, 5, "25%"]})
    assert policy.batch_sizes(20) == [1, 5, 5, 5, 4]
    assert policy.assign_batches(["a", "b", "c"]) == {"a": 0, "b": 1, "c": 1}
    assert Policy.from_dict({"max_batch_size": 3}).batch_sizes(7) == [3, 3, 1]


def test_policy_round_trips() -> None:
    given = {
        "max_concurrency": "50%",
        "max_errors": 2,
        "batches": [1, "25%"],
        "pause_time": 1.5,
        "min_in_service": 3,
    }
    policy = Policy.from_dict(given)
    assert Policy.from_dict(policy.to_dict()) == policy
    assert policy.to_dict()["max_concurrency"] == "50%"


@pytest.mark.parametrize(
    ("given", "field", "words"),
    [
        ({"max_concurency": 5}, "policy", "unknown key(s) max_concurency"),
        ({"max_concurrency": 0}, "max_concurrency", "less than 1"),
        ({"max_concurrency": "0%"}, "max_concurrency", "more than 0%"),
        ({"max_concurrency": "150%"}, "max_concurrency", "at most 100%"),
        ({"max_concurrency": True}, "max_concurrency", "not a number"),
        ({"max_concurrency": "lots"}, "max_concurrency", "not a count"),
        ({"max_errors": -1}, "max_errors", "less than 0"),
        ({"max_errors": "101%"}, "max_errors", "at most 100%"),
        ({"batches": []}, "batches", "non-empty list"),
        ({"batches": [1, 0]}, "batches[1]", "less than 1"),
        ({"batches": [1], "max_batch_size": 2}, "policy", "not both"),
        ({"pause_time": -1}, "pause_time", "not >= 0"),
        ({"pause_time": "soon"}, "pause_time", "seconds"),
        ({"min_in_service": -2}, "min_in_service", "count >= 0"),
        ("fast", "policy", "mapping"),
    ],
)
def test_bad_policy_is_refused_naming_the_field(
    given: object, field: str, words: str
) -> None:
    with pytest.raises(exceptions.ValidationError) as caught:
        Policy.from_dict(given)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert words in str(caught.value)


# ---------------------------------------------------------------- decide
def members(n: int, **kwargs: object) -> list[Member]:
    return [Member(f"m{i}", **kwargs) for i in range(n)]  # type: ignore[arg-type]


def test_starts_up_to_the_concurrency() -> None:
    policy = Policy.from_dict({"max_concurrency": 3})
    decision = rollout.decide(policy, members(10), now=0)
    assert decision.start == ("m0", "m1", "m2")
    assert decision.status == rollout.IN_PROGRESS
    assert (decision.running, decision.left) == (3, 7)


def test_past_the_budget_nothing_new_starts_and_running_ones_finish() -> None:
    policy = Policy.from_dict({"max_concurrency": 4, "max_errors": 2})
    state = [
        Member("a", FAILED),
        Member("b", FAILED),
        Member("c", FAILED),
        Member("d", RUNNING),
        Member("e"),
    ]
    decision = rollout.decide(policy, state, now=0)
    assert decision.start == ()
    assert decision.status == rollout.IN_PROGRESS
    state[3] = Member("d", COMPLETE)
    decision = rollout.decide(policy, state, now=0)
    assert decision.status == FAILED
    assert decision.reason == (
        "max_errors 2 exceeded: 3 of 5 members FAILED (a, b, c); 1 not started"
    )


def test_failures_within_the_budget_complete() -> None:
    policy = Policy.from_dict({"max_errors": "50%"})
    decision = rollout.decide(
        policy, [Member("a", FAILED), Member("b", COMPLETE)], now=0
    )
    assert decision.status == COMPLETE
    assert "1 FAILED (a), within max_errors 50%" in decision.reason


def test_cancel_stops_new_starts() -> None:
    decision = rollout.decide(
        Policy(), [Member("a", RUNNING), Member("b")], now=0, cancelled="no"
    )
    assert decision.start == () and decision.status == rollout.IN_PROGRESS
    decision = rollout.decide(
        Policy(), [Member("a", COMPLETE), Member("b")], now=0, cancelled="no"
    )
    assert decision.status == FAILED
    assert decision.reason == "cancelled: no; 1 not started"


def test_a_wave_waits_for_the_one_before_and_the_pause() -> None:
    policy = Policy.from_dict({"max_batch_size": 2, "pause_time": 10})
    state = [
        Member("a", COMPLETE, 0, ended_at=100),
        Member("b", RUNNING, 0),
        Member("c", PENDING, 1),
    ]
    assert rollout.decide(policy, state, now=100).start == ()
    state[1] = Member("b", COMPLETE, 0, ended_at=105)
    paused = rollout.decide(policy, state, now=106)
    assert paused.start == () and paused.wake_at == 115
    assert rollout.decide(policy, state, now=115).start == ("c",)


def test_min_in_service_holds_serving_members_back() -> None:
    policy = Policy.from_dict({"min_in_service": 3})
    state = [Member(f"s{i}", serving=True) for i in range(5)] + [Member("new")]
    decision = rollout.decide(policy, state, now=0)
    # 5 in service, 3 must stay: 2 of them may go, and the new member
    assert decision.start == ("s0", "s1", "new")


def test_min_in_service_that_cannot_be_kept_fails() -> None:
    policy = Policy.from_dict({"min_in_service": 2, "max_errors": 5})
    state = [
        Member("a", FAILED),
        Member("b", COMPLETE),
        Member("c", PENDING, serving=True),
    ]
    decision = rollout.decide(policy, state, now=0)
    assert decision.status == FAILED
    assert decision.reason == (
        "min_in_service 2 cannot be kept: 2 members in service, 1 not started"
    )


def test_unknown_member_state_is_refused() -> None:
    with pytest.raises(exceptions.ValidationError, match="unknown member state"):
        rollout.decide(Policy(), [Member("a", "DONE")], now=0)


# ------------------------------------------------------ invariants, fuzzed
amounts = st.one_of(st.integers(1, 12), st.integers(1, 100).map(lambda p: f"{p}%"))
budgets = st.one_of(st.integers(0, 6), st.integers(0, 100).map(lambda p: f"{p}%"))
policies = st.builds(
    lambda c, e, b, m: Policy.from_dict(
        {"max_concurrency": c, "max_errors": e, "batches": b, "min_in_service": m}
    ),
    st.one_of(st.none(), amounts),
    budgets,
    st.one_of(st.none(), st.lists(amounts, min_size=1, max_size=3)),
    st.integers(0, 4),
)


@settings(max_examples=300, deadline=None)
@given(
    policy=policies,
    outcomes=st.lists(st.booleans(), min_size=1, max_size=30),
    serving=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_simulated_rollouts_keep_every_bound(
    policy: Policy, outcomes: list[bool], serving: bool, seed: int
) -> None:
    """Concurrency never exceeded; nothing starts past the budget; each
    member starts once; waves in order; min_in_service kept; it ends."""
    rng = random.Random(seed)
    names = [f"m{i}" for i in range(len(outcomes))]
    waves = policy.assign_batches(names)
    state = {
        n: Member(n, PENDING, waves[n], serving=serving and n != names[-1])
        for n in names
    }
    started: list[str] = []
    limit = policy.concurrency(len(names))
    for clock in range(10 * len(names) + 10):
        decision = rollout.decide(policy, list(state.values()), now=clock)
        failed = sum(1 for m in state.values() if m.state == FAILED)
        if decision.start:
            assert not policy.max_errors.exceeded_by(failed, len(names))
        for name in decision.start:
            assert state[name].state == PENDING
            earlier = [m for m in state.values() if m.batch < state[name].batch]
            assert all(m.state in rollout.ENDED for m in earlier)
            state[name] = dataclasses.replace(state[name], state=RUNNING)
            started.append(name)
        running = [m for m in state.values() if m.state == RUNNING]
        assert len(running) <= limit
        if policy.min_in_service and serving:
            in_service = sum(
                1
                for m in state.values()
                if m.state == COMPLETE or (m.state == PENDING and m.serving)
            )
            # starting only ever takes members out down to the minimum
            assert in_service >= policy.min_in_service or not any(
                state[n].serving for n in decision.start
            )
        if decision.done:
            assert not running
            assert decision.status in (COMPLETE, FAILED)
            over = policy.max_errors.exceeded_by(failed, len(names))
            if over:
                assert decision.status == FAILED
                assert decision.reason.startswith("max_errors")
            if decision.status == COMPLETE:
                assert all(m.state in rollout.ENDED for m in state.values())
            break
        if running:
            ending = rng.choice(running)
            outcome = COMPLETE if outcomes[names.index(ending.name)] else FAILED
            state[ending.name] = dataclasses.replace(
                ending, state=outcome, ended_at=clock
            )
    else:
        raise AssertionError("the rollout never ended")
    assert len(started) == len(set(started))
