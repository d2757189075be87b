"""The deployment state machine: the transition table is the contract."""

from __future__ import annotations

import itertools

import pytest

from swflows import exceptions, states

IP, OK, KO = states.IN_PROGRESS, states.COMPLETE, states.FAILED

#: written out here, independently of states.TRANSITIONS
ALLOWED = {
    (None, IP),  # created, waiting for a signal
    (None, OK),  # created with NO_SIGNAL
    (IP, OK),
    (IP, KO),
    (OK, IP),  # a new action
    (OK, OK),  # a new NO_SIGNAL action
    (KO, IP),
    (KO, OK),
}
ALL_PAIRS = list(itertools.product([None, IP, OK, KO], [IP, OK, KO]))


@pytest.mark.parametrize(("current", "new"), sorted(ALLOWED, key=str))
def test_allowed(current: str | None, new: str) -> None:
    states.check_transition(current, new, "d1")


@pytest.mark.parametrize(("current", "new"), [p for p in ALL_PAIRS if p not in ALLOWED])
def test_refused(current: str | None, new: str) -> None:
    with pytest.raises(exceptions.InvalidTransition) as exc:
        states.check_transition(current, new, "d1")
    err = exc.value
    assert (err.deployment_id, err.current, err.new) == ("d1", current, new)
    assert err.fields == {"deployment_id": "d1", "current": current, "new": new}
    assert "d1" in str(err)
    assert new in str(err)
    assert (current or "nothing") in str(err)
    assert not err.retryable


def test_table_matches() -> None:
    table = {(c, n) for c, targets in states.TRANSITIONS.items() for n in targets}
    assert table == ALLOWED


def test_refused_without_a_deployment_id() -> None:
    with pytest.raises(exceptions.InvalidTransition, match=r"^deployment cannot"):
        states.check_transition(IP, IP)


@pytest.mark.parametrize("current", [None, IP])
def test_unknown_status(current: str | None) -> None:
    with pytest.raises(exceptions.ValidationError) as exc:
        states.check_transition(current, "DONE")
    assert exc.value.field == "status"


def test_unknown_current_status_allows_nothing() -> None:
    with pytest.raises(exceptions.InvalidTransition):
        states.check_transition("DONE", IP)


def test_terminal() -> None:
    assert states.TERMINAL == {OK, KO}
    assert states.STATUSES == {IP, OK, KO}
    assert states.is_terminal(OK)
    assert states.is_terminal(KO)
    assert not states.is_terminal(IP)
    assert not states.is_terminal(None)


def test_reason_kinds_are_plain_strings() -> None:
    assert states.ReasonKind.EXIT_CODE.value == "exit_code"
    assert isinstance(states.ReasonKind.EXIT_CODE, str)
    assert {k.value for k in states.ReasonKind} == {
        "outputs_received",
        "not_waiting",
        "exit_code",
        "error_output",
        "timeout",
        "never_picked_up",
        "cancelled",
        "server_gone",
        "signal_rejected",
        "infrastructure",
        "internal_error",
        "flow_broken",
        "orphaned",
    }


def test_a_cancel_or_a_flow_gone_withdraws_an_action() -> None:
    cancelled = {"kind": "cancelled", "by": None}
    assert states.withdrawn(KO, cancelled)
    # nothing will take a broken or orphaned action's signal: withdrawn too
    ended = {"cancelled", "flow_broken", "orphaned"}
    for kind in states.ReasonKind:
        assert states.withdrawn(KO, {"kind": kind.value}) == (kind.value in ended)
    assert not states.withdrawn(IP, cancelled)  # a new action began
    assert not states.withdrawn(OK, cancelled)
    assert not states.withdrawn(KO, None)
    assert not states.withdrawn(KO, {})
    assert not states.withdrawn(KO, "cancelled")  # type: ignore[arg-type]
