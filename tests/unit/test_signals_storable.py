"""What a signal carries is made storable on every database, and says so."""

from __future__ import annotations

import json

import pytest

from swflows import exceptions, model, signals, states

OUTPUTS = (model.OutputSpec("result"), model.OutputSpec("err", error_output=True))
UNSTORABLE = ("\x00", "\ud800", "\udfff", "\udc80")


def outcome_of(payload: dict[str, object]) -> signals.Outcome:
    return signals.storable_outcome(signals.outcome(payload, OUTPUTS))


def strings_of(value: object) -> list[str]:
    """Every string in ``value``, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [*strings_of(k), *strings_of(v)]]
    if isinstance(value, list):
        return [s for item in value for s in strings_of(item)]
    return []


def assert_storable(outcome: signals.Outcome) -> None:
    for text in strings_of(outcome.to_dict()):
        assert "\x00" not in text
        text.encode("utf-8")  # no lone surrogate
    assert len(outcome.status_reason) <= signals.MAX_REASON_CHARS


@pytest.mark.parametrize("char", UNSTORABLE)
def test_a_status_code_with_an_unstorable_character(char: str) -> None:
    outcome = outcome_of({"deploy_status_code": f"1{char}"})
    assert outcome.status == states.FAILED
    assert outcome.reason["kind"] == states.ReasonKind.EXIT_CODE.value
    assert outcome.reason["status_code"] == "1\ufffd"
    assert outcome.output_values["deploy_status_code"] == "1\ufffd"
    assert outcome.status_reason.endswith("non-zero status code: 1\ufffd")
    assert outcome.reason["altered"] == {
        "replaced": [
            "status_reason",
            "reason.status_code",
            "output_values.deploy_status_code",
        ]
    }
    assert_storable(outcome)


def test_nested_values_and_keys() -> None:
    value = {"a\x00": ["x\ud83d", {"\udcff": "\x00"}], "ok": [1, 2.5, None, True]}
    outcome = outcome_of({"deploy_status_code": 0, "result": value})
    assert outcome.status == states.COMPLETE
    assert outcome.output_values["result"] == {
        "a\ufffd": ["x\ufffd", {"\ufffd": "\ufffd"}],
        "ok": [1, 2.5, None, True],
    }
    assert outcome.reason["kind"] == states.ReasonKind.OUTPUTS_RECEIVED.value
    assert set(outcome.reason["altered"]["replaced"]) == {
        "output_values.result.a\ufffd",
        "output_values.result.a\ufffd[0]",
        "output_values.result.a\ufffd[1].\ufffd",
    }
    assert_storable(outcome)


def test_an_error_output_with_nul_fails_with_a_storable_reason() -> None:
    outcome = outcome_of({"deploy_status_code": 0, "err": "boom\x00"})
    assert outcome.status == states.FAILED
    assert outcome.reason["kind"] == states.ReasonKind.ERROR_OUTPUT.value
    assert outcome.status_reason == "err : boom\ufffd"
    assert_storable(outcome)


def test_a_long_reason_is_cut_and_says_so() -> None:
    long = "e" * 100_000
    outcome = outcome_of({"deploy_status_code": 0, "err": long})
    assert (
        signals.MAX_REASON_CHARS - 64
        < len(outcome.status_reason)
        <= signals.MAX_REASON_CHARS
    )
    assert outcome.status_reason.startswith("err : eee")
    assert "characters cut]" in outcome.status_reason
    assert outcome.reason["altered"] == {"truncated": ["status_reason"]}
    # the output itself is kept whole: the signal's size limit bounds it
    assert outcome.output_values["err"] == long
    assert_storable(outcome)


def test_a_long_status_code_is_cut_in_the_reason_too() -> None:
    outcome = outcome_of({"deploy_status_code": "x" * 20_000})
    assert len(outcome.reason["status_code"]) <= signals.MAX_REASON_CHARS
    assert outcome.reason["altered"]["truncated"] == [
        "status_reason",
        "reason.status_code",
    ]


def test_a_clean_outcome_is_unchanged() -> None:
    plain = signals.outcome({"deploy_status_code": 0, "result": "é ☃ 🎉"}, OUTPUTS)
    assert signals.storable_outcome(plain) is plain
    for made in (
        signals.timeout_outcome(5),
        signals.cancelled_outcome("me"),
        signals.rejected_outcome("bad"),
    ):
        assert signals.storable_outcome(made) is made


def test_json_round_trip() -> None:
    outcome = outcome_of({"deploy_status_code": "\x00", "deploy_stdout": "\ud800"})
    text = json.dumps(outcome.to_dict(), ensure_ascii=False)
    assert json.loads(text) == outcome.to_dict()
    text.encode("utf-8")


class TestEmptyBody:
    """Only JSON's own whitespace makes a body "no signal yet"."""

    @pytest.mark.parametrize("raw", [b"", b" \t\r\n", "\n"])
    def test_json_whitespace_is_empty(self, raw: bytes | str) -> None:
        assert signals.parse_payload(raw) is None

    @pytest.mark.parametrize(
        "raw", [b"\x1c", b"\x1f", "\x0b", "\x0c", "\u2028", "\xa0", "\u3000"]
    )
    def test_other_whitespace_is_not_json(self, raw: bytes | str) -> None:
        with pytest.raises(exceptions.SignalRejected, match="not JSON"):
            signals.parse_payload(raw)
