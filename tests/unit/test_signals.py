"""Signal payloads -> outcomes, by Heat's rules and with Heat's reason strings."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swflows import exceptions, model, signals, states

OUTPUTS = (
    model.OutputSpec("result"),
    model.OutputSpec("err", error_output=True),
    model.OutputSpec("err2", error_output=True),
)
RESERVED = {"deploy_stdout", "deploy_stderr", "deploy_status_code"}


def rejected(raw: Any, **kwargs: Any) -> str:
    with pytest.raises(exceptions.SignalRejected) as exc:
        signals.parse_payload(raw, **kwargs)
    assert exc.value.field == "signal"
    assert isinstance(exc.value, ValueError)
    return str(exc.value)


def body_of_size(size: int) -> bytes:
    """A JSON object of exactly ``size`` bytes."""
    frame = b'{"deploy_stdout": ""}'
    return frame[:-2] + b"x" * (size - len(frame)) + frame[-2:]


class TestParsePayload:
    def test_bytes_text_and_mapping(self) -> None:
        expected = {"deploy_status_code": 0, "r": "é"}
        raw = json.dumps(expected)
        assert signals.parse_payload(raw.encode()) == expected
        assert signals.parse_payload(raw) == expected
        given_map = {"a": 1}
        parsed = signals.parse_payload(given_map)
        assert parsed == given_map
        assert parsed is not given_map

    @pytest.mark.parametrize("raw", [b"", "", b"  \n", "\t"])
    def test_empty_body_is_no_signal_yet(self, raw: bytes | str) -> None:
        assert signals.parse_payload(raw) is None

    def test_empty_object_is_a_signal(self) -> None:
        assert signals.parse_payload(b"{}") == {}
        assert signals.parse_payload({}) == {}

    def test_utf8_bom_tolerated(self) -> None:
        assert signals.parse_payload(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}

    def test_exactly_at_the_limit(self) -> None:
        raw = body_of_size(signals.MAX_SIGNAL_BYTES)
        assert len(raw) == 1048576
        payload = signals.parse_payload(raw)
        assert payload is not None
        assert len(payload["deploy_stdout"]) == 1048576 - 21

    def test_just_over_the_limit(self) -> None:
        raw = body_of_size(signals.MAX_SIGNAL_BYTES + 1)
        assert rejected(raw) == (
            "signal: payload is 1048577 bytes; the limit is 1048576"
        )
        assert "1048577 bytes" in rejected(raw.decode())

    def test_limit_counts_utf8_bytes_of_text(self) -> None:
        text = '{"a": "' + "é" * 10 + '"}'  # 19 characters, 29 bytes
        assert signals.parse_payload(text, max_bytes=29) is not None
        assert "30" not in rejected(text, max_bytes=28)
        assert "29 bytes; the limit is 28" in rejected(text, max_bytes=28)

    def test_mapping_over_the_limit(self) -> None:
        assert "the limit is 100" in rejected({"a": "x" * 100}, max_bytes=100)

    @pytest.mark.parametrize(
        ("raw", "kind"),
        [
            (b"[1, 2]", "an array"),
            (b'"text"', "a string"),
            (b"3", "a number"),
            (b"1.5", "a number"),
            (b"true", "a boolean"),
            (b"null", "null"),
        ],
    )
    def test_json_but_not_an_object(self, raw: bytes, kind: str) -> None:
        assert rejected(raw) == f"signal: payload must be a JSON object, not {kind}"

    @pytest.mark.parametrize(
        "raw",
        [b"{oops", b"{'a': 1}", b'{"a": NaN}', b'{"a": Infinity}', b'{"a": 1e999}'],
    )
    def test_not_json(self, raw: bytes) -> None:
        assert "payload is not JSON" in rejected(raw)

    @pytest.mark.parametrize("raw", [b"\xff\xfe{}", b'{"a": "\xc3"}'])
    def test_invalid_utf8(self, raw: bytes) -> None:
        assert "not valid UTF-8" in rejected(raw)

    def test_unencodable_text(self) -> None:
        assert "not valid Unicode" in rejected('{"a": "\ud800"}')

    def test_deep_nesting(self) -> None:
        message = rejected(b"[" * 200000 + b"]" * 200000)
        assert message == "signal: payload nests deeper than 64 levels"

    @pytest.mark.parametrize("depth", [65, 900])
    def test_nesting_past_the_limit_is_refused(self, depth: int) -> None:
        text = '{"a": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"
        message = "signal: payload nests deeper than 64 levels"
        assert rejected(text) == message
        assert rejected(text.encode()) == message
        assert rejected(json.loads(text)) == message  # an embedder's mapping

    def test_nesting_to_the_limit_is_a_signal(self) -> None:
        text = '{"a": ' + "[" * 63 + "{}" + "]" * 63 + "}"  # the {} is level 65
        assert "64 levels" in rejected(text)
        text = '{"a": ' + "[" * 63 + "1" + "]" * 63 + "}"
        assert signals.parse_payload(text) is not None
        deep = {"a": {"b": [[{"c": 1}]]}}
        signals.check_depth(deep, 5)
        with pytest.raises(exceptions.SignalRejected):
            signals.check_depth(deep, 4)

    def test_mapping_without_json_form(self) -> None:
        assert "no JSON form" in rejected({"a": object()})
        assert "no JSON form" in rejected({"a": float("nan")})

    def test_wrong_type(self) -> None:
        assert "not int" in rejected(5)


class TestProgress:
    def test_started(self) -> None:
        assert signals.is_progress({"deploy_signal": "started"})
        assert signals.is_progress({"deploy_signal": "started", "note": "x"})
        assert signals.is_progress(signals.progress_payload())
        assert signals.progress_payload() == {"deploy_signal": "started"}

    @pytest.mark.parametrize(
        "payload",
        [
            {},
            {"deploy_status_code": 0},
            {"deploy_signal": "started", "deploy_status_code": 0},
            {"deploy_signal": "started", "deploy_status_code": None},
            {"deploy_signal": "done"},
            {"deploy_signal": ["started"]},
        ],
    )
    def test_not_progress(self, payload: dict[str, Any]) -> None:
        assert not signals.is_progress(payload)


class TestOutcome:
    def test_success(self) -> None:
        out = signals.outcome(
            {
                "result": "bar-x",
                "deploy_stdout": "hello x\n",
                "deploy_stderr": "",
                "deploy_status_code": 0,
                "undeclared": "dropped",
            },
            OUTPUTS,
        )
        assert out == signals.Outcome(
            states.COMPLETE,
            "Outputs received",
            {"kind": "outputs_received"},
            {
                "result": "bar-x",
                "deploy_stdout": "hello x\n",
                "deploy_stderr": "",
                "deploy_status_code": 0,
            },
        )
        assert not out.failed

    def test_reserved_outputs_always_set(self) -> None:
        out = signals.outcome({}, OUTPUTS)
        assert out.status == states.COMPLETE
        assert out.output_values == dict.fromkeys(RESERVED)

    @pytest.mark.parametrize("code", [0, "0", None, "", False, 0.0])
    def test_zero_or_unset_code_succeeds(self, code: Any) -> None:
        out = signals.outcome({"deploy_status_code": code}, OUTPUTS)
        assert out.status == states.COMPLETE
        assert out.output_values["deploy_status_code"] == code

    @pytest.mark.parametrize("code", [3, "3"])
    def test_non_zero_code(self, code: Any) -> None:
        out = signals.outcome(
            {
                "result": "partial",
                "deploy_stdout": "before-fail\n",
                "deploy_stderr": "oops\n",
                "deploy_status_code": code,
            },
            OUTPUTS,
        )
        assert out.status == states.FAILED
        assert out.failed
        assert out.status_reason == (
            "deploy_status_code : Deployment exited with non-zero status code: 3"
        )
        assert out.reason == {"kind": "exit_code", "exit_code": 3}
        assert out.output_values["result"] == "partial"  # outputs are kept
        assert out.output_values["deploy_stderr"] == "oops\n"

    def test_unparseable_code(self) -> None:
        out = signals.outcome({"deploy_status_code": "segfault"}, OUTPUTS)
        assert out.status == states.FAILED
        assert out.status_reason.endswith("non-zero status code: segfault")
        assert out.reason == {"kind": "exit_code", "status_code": "segfault"}

    def test_error_output(self) -> None:
        out = signals.outcome({"err": "disk full", "deploy_status_code": 0}, OUTPUTS)
        assert out.status == states.FAILED
        assert out.status_reason == "err : disk full"
        assert out.reason == {
            "kind": "error_output",
            "output": "err",
            "error_outputs": ["err"],
        }
        assert out.output_values["err"] == "disk full"

    def test_reasons_joined_in_heat_order(self) -> None:
        out = signals.outcome(
            {"err2": "two", "err": "one", "deploy_status_code": 2}, OUTPUTS
        )
        assert out.status_reason == (
            "deploy_status_code : Deployment exited with non-zero status code: 2, "
            "err : one, err2 : two"
        )
        assert out.reason == {
            "kind": "exit_code",
            "exit_code": 2,
            "error_outputs": ["err", "err2"],
        }

    @pytest.mark.parametrize("value", [None, "", [], {}])
    def test_empty_error_output_is_unset(self, value: Any) -> None:
        out = signals.outcome({"err": value}, OUTPUTS)
        assert out.status == states.COMPLETE
        assert out.output_values["err"] == value

    def test_error_output_not_text(self) -> None:
        out = signals.outcome({"err": {"code": 5}}, OUTPUTS)
        assert out.status_reason == 'err : {"code": 5}'

    def test_output_without_error_flag_never_fails(self) -> None:
        assert signals.outcome({"result": "x"}, OUTPUTS).status == states.COMPLETE

    def test_to_dict(self) -> None:
        out = signals.outcome({"deploy_status_code": 1}, OUTPUTS)
        assert json.loads(json.dumps(out.to_dict())) == out.to_dict()
        assert out.to_dict()["reason"]["kind"] == "exit_code"


class TestOtherEndings:
    def test_timeout(self) -> None:
        out = signals.timeout_outcome(3600)
        assert out.status == states.FAILED
        assert out.reason == {"kind": "timeout", "timeout": 3600}
        assert "3600 seconds" in out.status_reason
        assert out.output_values == {}

    def test_never_picked_up(self) -> None:
        out = signals.never_picked_up_outcome(600)
        assert out.status == states.FAILED
        assert out.reason["kind"] == states.ReasonKind.NEVER_PICKED_UP
        assert "600 seconds" in out.status_reason
        assert "never picked up" in out.status_reason

    def test_cancelled(self) -> None:
        out = signals.cancelled_outcome(None)
        assert (out.status, out.status_reason) == (
            states.FAILED,
            "Deployment cancelled.",
        )
        assert out.reason == {"kind": "cancelled", "by": None}
        by = signals.cancelled_outcome("operator alice")
        assert by.status_reason == "Deployment cancelled: operator alice."
        # the README's own example reads as a reason, not as a name
        hangs = signals.cancelled_outcome("hangs")
        assert hangs.status_reason == "Deployment cancelled: hangs."
        assert signals.cancelled_outcome("why?").status_reason.endswith("why?")
        assert by.reason["by"] == "operator alice"

    def test_rejected(self) -> None:
        try:
            signals.parse_payload(b"[1]")
        except exceptions.SignalRejected as exc:
            out = signals.rejected_outcome(str(exc))
        assert out.status == states.FAILED
        assert out.status_reason == (
            "Signal rejected: signal: payload must be a JSON object, not an array"
        )
        assert out.reason["kind"] == "signal_rejected"
        assert out.reason["detail"].endswith("not an array")

    def test_server_gone(self) -> None:
        out = signals.server_gone_outcome("srv1", "deleted")
        assert out.status == states.FAILED
        assert out.status_reason == "Server srv1 is gone: deleted"
        assert out.reason == {
            "kind": "server_gone",
            "server_id": "srv1",
            "detail": "deleted",
        }


def size(payload: Mapping[str, Any]) -> int:
    return len(signals.encode_payload(payload))


class TestTrim:
    def test_small_payload_unchanged(self) -> None:
        payload = {"deploy_stdout": "x" * 10, "deploy_status_code": 0}
        trimmed = signals.trim_payload(payload)
        assert trimmed == payload
        assert trimmed is not payload

    def test_default_limit_keeps_the_tail(self) -> None:
        stdout = "".join(f"line {i}\n" for i in range(200000))  # ~1.4 MB
        payload = {
            "deploy_stdout": stdout,
            "deploy_stderr": "e",
            "deploy_status_code": 1,
        }
        trimmed = signals.trim_payload(payload)
        assert signals.AGENT_SIGNAL_BYTES - 2 <= size(trimmed) <= 950000
        assert stdout.endswith(trimmed["deploy_stdout"])
        assert trimmed["deploy_stdout"].endswith("line 199999\n")
        assert trimmed["deploy_stderr"] == "e"
        assert trimmed["deploy_status_code"] == 1
        assert payload["deploy_stdout"] is stdout  # the input is untouched

    def test_room_is_shared(self) -> None:
        payload = {"deploy_stdout": "o" * 5000, "deploy_stderr": "e" * 5000}
        trimmed = signals.trim_payload(payload, limit=2000)
        assert size(trimmed) <= 2000
        out, err = trimmed["deploy_stdout"], trimmed["deploy_stderr"]
        assert abs(len(out) - len(err)) <= 1
        assert size(trimmed) >= 2000 - 1

    def test_short_value_lends_its_room(self) -> None:
        payload = {"deploy_stdout": "o" * 5000, "deploy_stderr": "e" * 100}
        trimmed = signals.trim_payload(payload, limit=2000)
        assert trimmed["deploy_stderr"] == "e" * 100
        assert size(trimmed) >= 2000 - 1

    def test_escaped_characters_are_counted(self) -> None:
        stdout = "é\n\x01😀" * 3000
        trimmed = signals.trim_payload({"deploy_stdout": stdout}, limit=5000)
        assert size(trimmed) <= 5000
        assert len(json.dumps(trimmed, ensure_ascii=False).encode()) <= 5000
        assert stdout.endswith(trimmed["deploy_stdout"])
        assert size(trimmed) > 5000 - 12

    def test_outputs_too_big_are_replaced(self) -> None:
        payload = {
            "big": "b" * 3000,
            "bigger": ["x" * 4000],
            "small": "kept",
            "deploy_stdout": "o" * 100,
            "deploy_status_code": 3,
        }
        trimmed = signals.trim_payload(payload, limit=1000)
        assert size(trimmed) <= 1000
        assert trimmed["small"] == "kept"
        assert trimmed["deploy_status_code"] == 3
        assert trimmed["bigger"].startswith("[swflows: a 4004-byte value was removed")
        assert trimmed["big"].startswith("[swflows: a 3002-byte value was removed")
        assert "1000-byte signal" in trimmed["big"]
        assert trimmed["deploy_stdout"].endswith("o")

    def test_only_what_is_needed_is_replaced(self) -> None:
        payload = {"big": "b" * 3000, "medium": "m" * 500}
        trimmed = signals.trim_payload(payload, limit=1000)
        assert trimmed["medium"] == "m" * 500
        assert trimmed["big"] != payload["big"]

    def test_huge_keys_are_dropped(self) -> None:
        payload = {"k" * 2000: 1, "deploy_status_code": 0, "deploy_stdout": "x"}
        trimmed = signals.trim_payload(payload, limit=500)
        assert trimmed == {"deploy_status_code": 0, "deploy_stdout": "x"}

    def test_limit_too_small(self) -> None:
        with pytest.raises(ValueError, match="cannot be made to fit"):
            signals.trim_payload({"deploy_stdout": "x" * 100}, limit=10)


# -- properties --------------------------------------------------------------

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_keys = st.sampled_from(
    [
        "result",
        "err",
        "err2",
        "other",
        "deploy_stdout",
        "deploy_stderr",
        "deploy_signal",
    ]
)
_codes = st.one_of(
    st.none(),
    st.integers(-3, 300),
    st.sampled_from(["0", "1", "3", "", "00", "x"]),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    _json,
)


@st.composite
def payloads(draw: st.DrawFn) -> dict[str, Any]:
    payload = draw(st.dictionaries(_keys | st.text(max_size=6), _json, max_size=6))
    if draw(st.booleans()):
        payload["deploy_status_code"] = draw(_codes)
    return payload


@settings(max_examples=150, deadline=None)
@given(payloads())
def test_property_outcome(payload: dict[str, Any]) -> None:
    # it never raises for a JSON object, and reads back from JSON
    raw = json.dumps(payload).encode()
    parsed = signals.parse_payload(raw)
    assert parsed == payload
    out = signals.outcome(parsed, OUTPUTS)
    code = payload.get("deploy_status_code")
    bad_code = bool(code) and str(code) != "0"
    error_set = any(
        payload.get(name) not in (None, "", [], {}) for name in ("err", "err2")
    )
    assert (out.status == states.FAILED) == (bad_code or error_set)
    assert out.status in (states.COMPLETE, states.FAILED)
    assert set(out.output_values) <= {o.name for o in OUTPUTS} | RESERVED
    assert RESERVED <= set(out.output_values)
    assert out.reason["kind"] in {k.value for k in states.ReasonKind}
    json.dumps(out.to_dict())


# long texts built cheaply: a short piece repeated
_piece = st.text(
    st.characters(codec="utf-8") | st.sampled_from('\n"\\\x00é😀'), max_size=40
)
_text = st.builds(lambda piece, times: piece * times, _piece, st.integers(0, 400))
_output = _json | st.builds(lambda n: "b" * n, st.integers(0, 8000))


@settings(max_examples=80, deadline=None)
@given(
    _text,
    _text,
    st.dictionaries(st.sampled_from(["result", "err", "big"]), _output, max_size=3),
    st.integers(300, 6000),
)
def test_property_trim(
    stdout: str, stderr: str, outputs: dict[str, Any], limit: int
) -> None:
    payload = {
        **outputs,
        "deploy_stdout": stdout,
        "deploy_stderr": stderr,
        "deploy_status_code": 0,
    }
    trimmed = signals.trim_payload(payload, limit=limit)
    assert size(trimmed) <= limit
    assert len(json.dumps(trimmed, ensure_ascii=False).encode()) <= limit
    assert stdout.endswith(trimmed["deploy_stdout"])
    assert stderr.endswith(trimmed["deploy_stderr"])
    assert trimmed["deploy_status_code"] == 0
    if size(payload) <= limit:
        assert trimmed == payload
    others = {k: v for k, v in payload.items() if k not in signals._TRIMMABLE}
    if size({**others, "deploy_stdout": "", "deploy_stderr": ""}) <= limit:
        # the outputs fit: they are untouched, and the room is used up to the
        # last character that would not fit (at most 12 bytes when escaped)
        assert {k: trimmed[k] for k in others} == others
        if trimmed != payload:
            assert size(trimmed) > limit - 2 * 12
