"""Signal payloads and the outcome they give a deployment.

Pure: no I/O.  A *signal* is the JSON object a server's agent sends when a
deployment action has run: ``deploy_stdout``, ``deploy_stderr``,
``deploy_status_code`` and the declared outputs.  :func:`outcome` turns it
into COMPLETE or FAILED by Heat's rules, with Heat's reason strings, plus a
machine-readable reason.  Also here, what Heat lacks: a "started" progress
signal, and outcomes for the endings that are not signals (timeout, never
picked up, cancelled, server gone).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from swflows import exceptions, model, states

#: the largest signal accepted, as Heat's ``max_json_body_size``
MAX_SIGNAL_BYTES: Final = 1048576
#: the deepest nesting of arrays and objects a signal may hold (the payload
#: object itself is level 1): far more than any output needs, and far less
#: than what makes Python's recursive JSON and database code overflow
MAX_SIGNAL_DEPTH: Final = 64
#: what an agent trims a signal to, as Heat's ``heat-config-notify`` does
AGENT_SIGNAL_BYTES: Final = 950000

#: a progress signal is ``{"deploy_signal": "started"}`` without a status code
DEPLOY_SIGNAL: Final = "deploy_signal"
SIGNAL_STARTED: Final = "started"

#: the longest ``status_reason`` stored; a longer one is cut, keeping its start
MAX_REASON_CHARS: Final = 4096
#: what :func:`storable_outcome` puts in place of a character no database stores
REPLACEMENT_CHAR: Final = "\ufffd"
#: the reason key listing what :func:`storable_outcome` altered
ALTERED_KEY: Final = "altered"

#: what :func:`trim_payload` puts in place of an output value that cannot fit
TRIMMED_MARKER: Final = (
    "[swflows: a {size}-byte value was removed to fit a {limit}-byte signal]"
)

_TRIMMABLE: Final = (model.DEPLOY_STDOUT, model.DEPLOY_STDERR)
#: JSON's own whitespace (RFC 8259); str.strip would also take control
#: characters such as U+001C, which are not JSON
_JSON_WHITESPACE: Final = " \t\n\r"
#: NUL (PostgreSQL refuses it in text and JSON) and lone surrogates (not
#: encodable as UTF-8, so refused by every database driver)
_UNSTORABLE: Final = re.compile("[\x00\ud800-\udfff]")
_JSON_TYPES: Final = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


@dataclasses.dataclass(frozen=True)
class Outcome:
    """Where a signal (or its absence) leaves a deployment."""

    status: str
    #: Heat's human-readable reason
    status_reason: str
    #: machine-readable: ``{"kind": states.ReasonKind, ...details}``
    reason: dict[str, Any]
    #: declared outputs received plus the reserved ``deploy_*`` ones; empty
    #: for an ending that is not a signal (the stored values stay as they are)
    output_values: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status == states.FAILED

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "status_reason": self.status_reason,
            "reason": dict(self.reason),
            "output_values": dict(self.output_values),
        }


def parse_payload(
    raw: bytes | str | Mapping[str, Any], *, max_bytes: int = MAX_SIGNAL_BYTES
) -> dict[str, Any] | None:
    """The signal in ``raw``, or None when nothing has been signalled yet.

    An empty body (how a TempURL signal object is seeded) is "no signal
    yet"; ``{}`` is a signal.  Anything over ``max_bytes``, nested deeper
    than :data:`MAX_SIGNAL_DEPTH`, not UTF-8, not strict JSON (no NaN or
    Infinity) or not a JSON object is refused with
    :class:`~swflows.exceptions.SignalRejected`.  A mapping (a signal an
    embedder received through its own API) is checked the same way.
    """
    if isinstance(raw, Mapping):
        check_depth(raw)
        try:
            size = len(json.dumps(raw, allow_nan=False).encode("utf-8"))
        except (TypeError, ValueError) as exc:
            raise exceptions.SignalRejected(
                "signal", f"payload has no JSON form: {exc}"
            ) from None
        _check_size(size, max_bytes)
        return dict(raw)
    if isinstance(raw, str):
        try:
            data = raw.encode("utf-8")
        except UnicodeEncodeError:
            raise exceptions.SignalRejected(
                "signal", "payload is not valid Unicode text"
            ) from None
    elif isinstance(raw, bytes | bytearray | memoryview):
        data = bytes(raw)
    else:
        raise exceptions.SignalRejected(
            "signal",
            f"payload must be bytes, text or a mapping, not {type(raw).__name__}",
        )
    _check_size(len(data), max_bytes)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise exceptions.SignalRejected(
            "signal", f"payload is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None
    if not text.strip(_JSON_WHITESPACE):
        return None
    try:
        payload = json.loads(
            text, parse_constant=_refuse_constant, parse_float=_finite_float
        )
    except ValueError as exc:
        raise exceptions.SignalRejected(
            "signal", f"payload is not JSON: {exc}"
        ) from None
    except RecursionError:
        raise exceptions.SignalRejected(
            "signal", f"payload nests deeper than {MAX_SIGNAL_DEPTH} levels"
        ) from None
    check_depth(payload)
    if not isinstance(payload, dict):
        kind = _JSON_TYPES.get(type(payload), type(payload).__name__)
        raise exceptions.SignalRejected(
            "signal", f"payload must be a JSON object, not {kind}"
        )
    return payload


def check_depth(value: Any, limit: int = MAX_SIGNAL_DEPTH) -> None:
    """Refuse (:class:`~swflows.exceptions.SignalRejected`) a value whose
    arrays and objects nest deeper than ``limit``; looked at without
    recursion, so any depth is refused rather than overflowing."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            raise exceptions.SignalRejected(
                "signal", f"payload nests deeper than {limit} levels"
            )
        stack.extend((child, depth + 1) for child in children)


def is_progress(payload: Mapping[str, Any]) -> bool:
    """Whether ``payload`` is a "started" progress signal, not a final one.

    swflows' agent sends one before it runs the hook when the derived config
    has ``deploy_signal_started``.  Heat's agents never send it, and every
    final signal carries ``deploy_status_code``, so the two never collide.
    """
    return (
        payload.get(DEPLOY_SIGNAL) == SIGNAL_STARTED
        and model.DEPLOY_STATUS_CODE not in payload
    )


def progress_payload() -> dict[str, Any]:
    """The "started" progress signal an agent sends."""
    return {DEPLOY_SIGNAL: SIGNAL_STARTED}


def outcome(payload: Mapping[str, Any], outputs: Sequence[model.OutputSpec]) -> Outcome:
    """The outcome of a final signal, by Heat's rules.

    FAILED when ``deploy_status_code`` is truthy and not ``0``/``"0"``, or an
    output declared ``error_output`` carries a value (Heat also fails on an
    empty one; swflows treats ``None``, ``""``, ``[]`` and ``{}`` as unset,
    so a script may create its error file without writing to it).  Declared
    outputs present are kept, the three reserved ones always (None when
    missing), undeclared keys are dropped.  Call :func:`is_progress` first:
    a progress signal is not a final one.
    """
    reasons: list[str] = []
    reason: dict[str, Any] = {}
    code = payload.get(model.DEPLOY_STATUS_CODE)
    if code and str(code) != "0":
        reasons.append(
            f"{model.DEPLOY_STATUS_CODE} : "
            f"Deployment exited with non-zero status code: {code}"
        )
        reason["kind"] = states.ReasonKind.EXIT_CODE.value
        exit_code = _exit_code(code)
        if exit_code is not None:
            reason["exit_code"] = exit_code
        else:
            reason["status_code"] = str(code)

    output_values: dict[str, Any] = {}
    error_outputs: list[str] = []
    for spec in outputs:
        if spec.name not in payload:
            continue
        value = payload[spec.name]
        output_values[spec.name] = value
        if spec.error_output and _is_set(value):
            error_outputs.append(spec.name)
            reasons.append(f"{spec.name} : {_text(value)}")
    for key in model.RESERVED_OUTPUTS:
        output_values[key] = payload.get(key)

    if error_outputs:
        if not reason:
            reason = {
                "kind": states.ReasonKind.ERROR_OUTPUT.value,
                "output": error_outputs[0],
            }
        reason["error_outputs"] = error_outputs
    if reasons:
        return Outcome(states.FAILED, ", ".join(reasons), reason, output_values)
    return Outcome(
        states.COMPLETE,
        "Outputs received",
        {"kind": states.ReasonKind.OUTPUTS_RECEIVED.value},
        output_values,
    )


#: how far a waiting action got on its server, as far as swflows saw:
#: its metadata published; read by the server through swflows (an
#: embedder serving POLL_SERVER_HEAT); the agent's "started" signal came
PUBLISHED: Final = "published"
PICKED_UP: Final = "picked_up"
STARTED: Final = "started"
STAGES: Final = (PUBLISHED, PICKED_UP, STARTED)
_STOPPED_AT: Final = {
    PUBLISHED: "stopped at: published, with no sign that the server picked it "
    'up (no metadata read through swflows, no "started" signal): is the '
    "server or its agent running?",
    PICKED_UP: "stopped at: picked up (the server read its metadata), no final signal",
    STARTED: 'stopped at: started (the agent said "started"), no final '
    "signal: the hook still runs, or hung",
}


def stage_of(waiting: Mapping[str, Any]) -> str:
    """The stage a parked flow's ``waiting`` record reached: its
    ``started_at`` (a "started" signal) or ``picked_up`` (a metadata read)."""
    if waiting.get("started_at"):
        return STARTED
    if waiting.get("picked_up"):
        return PICKED_UP
    return PUBLISHED


def timeout_outcome(seconds: float, stage: str | None = None) -> Outcome:
    """No final signal came within the deployment's timeout; ``stage``
    (one of :data:`STAGES`) is how far it got, named in the reason."""
    text = f"Deployment timed out: no signal within {_seconds(seconds)} seconds"
    reason: dict[str, Any] = {
        "kind": states.ReasonKind.TIMEOUT.value,
        "timeout": seconds,
    }
    if stage is not None:
        text += f"; {_STOPPED_AT[stage]}"
        reason["stage"] = stage
    return Outcome(states.FAILED, text, reason)


def never_picked_up_outcome(seconds: float) -> Outcome:
    """The server neither read its metadata nor said "started" in time."""
    return Outcome(
        states.FAILED,
        "Deployment was never picked up: the server did not read its metadata "
        f"or signal within {_seconds(seconds)} seconds",
        {"kind": states.ReasonKind.NEVER_PICKED_UP.value, "delivery_timeout": seconds},
    )


def cancelled_outcome(by: str | None = None) -> Outcome:
    """Cancelled by an operator or embedder; ``by`` is who or why, as given
    (Heat's reason when it is None)."""
    text = "Deployment cancelled." if not by else f"Deployment cancelled: {by}"
    if by and not text.endswith((".", "!", "?")):
        text += "."
    return Outcome(
        states.FAILED, text, {"kind": states.ReasonKind.CANCELLED.value, "by": by}
    )


def server_gone_outcome(server_id: str, detail: str) -> Outcome:
    """The server was deleted or broke while the deployment waited."""
    return Outcome(
        states.FAILED,
        f"Server {server_id} is gone: {detail}",
        {
            "kind": states.ReasonKind.SERVER_GONE.value,
            "server_id": server_id,
            "detail": detail,
        },
    )


#: how the status reasons of :func:`flow_broken_outcome` and
#: :func:`orphaned_outcome` begin (counted by ``swflows conductor list``)
FLOW_BROKEN_PREFIX = "Flow broken: "
ORPHANED_PREFIX = "Deployment orphaned: "


def flow_broken_outcome(flow_id: str, detail: str) -> Outcome:
    """Its flow failed and could not undo a step; the flow is kept BROKEN."""
    return Outcome(
        states.FAILED,
        f"{FLOW_BROKEN_PREFIX}flow {flow_id} failed and could not be undone: {detail}",
        {
            "kind": states.ReasonKind.FLOW_BROKEN.value,
            "flow_id": flow_id,
            "detail": detail,
        },
    )


def orphaned_outcome(detail: str) -> Outcome:
    """IN_PROGRESS with no flow left to end it."""
    return Outcome(
        states.FAILED,
        f"{ORPHANED_PREFIX}{detail}",
        {"kind": states.ReasonKind.ORPHANED.value, "detail": detail},
    )


def rejected_outcome(detail: str) -> Outcome:
    """The server's signal could not be accepted (``detail`` says why).

    A final signal that cannot be read is a failed action: the agent will
    not send another, so waiting on would only end in a timeout.
    """
    return Outcome(
        states.FAILED,
        f"Signal rejected: {detail}",
        {"kind": states.ReasonKind.SIGNAL_REJECTED.value, "detail": detail},
    )


def storable_outcome(outcome: Outcome) -> Outcome:
    """``outcome`` as every supported database stores it, and alike on each.

    NUL characters (PostgreSQL refuses them) and lone surrogates (no
    database driver can encode them) become U+FFFD, in values and in keys,
    however deeply nested; ``status_reason`` and the texts of ``reason``
    are cut to :data:`MAX_REASON_CHARS` (a MariaDB TEXT column holds 64
    KiB).  What was altered is listed in ``reason["altered"]``: the paths
    whose characters were ``replaced`` and those ``truncated``.  An
    outcome that needs nothing is returned as it is.
    """
    replaced: list[str] = []
    truncated: list[str] = []
    status_reason = _storable(outcome.status_reason, "status_reason", replaced)
    if len(status_reason) > MAX_REASON_CHARS:
        status_reason = _cut(status_reason)
        truncated.append("status_reason")
    reason = _storable(outcome.reason, "reason", replaced, truncated)
    output_values = _storable(outcome.output_values, "output_values", replaced)
    if not replaced and not truncated:
        return outcome
    altered: dict[str, list[str]] = {}
    if replaced:
        altered["replaced"] = replaced
    if truncated:
        altered["truncated"] = truncated
    return Outcome(
        outcome.status,
        status_reason,
        {**reason, ALTERED_KEY: altered},
        output_values,
    )


def _storable(
    value: Any, path: str, replaced: list[str], truncated: list[str] | None = None
) -> Any:
    """``value`` with unstorable characters replaced (and, with
    ``truncated``, long texts cut), each path altered noted."""
    if isinstance(value, str):
        text = value
        if _UNSTORABLE.search(text):
            text = _UNSTORABLE.sub(REPLACEMENT_CHAR, text)
            replaced.append(path)
        if truncated is not None and len(text) > MAX_REASON_CHARS:
            text = _cut(text)
            truncated.append(path)
        return text
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            name = key
            if isinstance(key, str) and _UNSTORABLE.search(key):
                name = _UNSTORABLE.sub(REPLACEMENT_CHAR, key)
                replaced.append(f"{path}.{name}")
            out[name] = _storable(item, f"{path}.{name}", replaced, truncated)
        return out
    if isinstance(value, list | tuple):
        return [
            _storable(item, f"{path}[{index}]", replaced, truncated)
            for index, item in enumerate(value)
        ]
    return value


def _cut(text: str) -> str:
    """The start of ``text`` in :data:`MAX_REASON_CHARS`, saying how much went."""
    keep = MAX_REASON_CHARS - 48
    return f"{text[:keep]}... [{len(text) - keep} characters cut]"


def internal_error_outcome(detail: str, attempts: int) -> Outcome:
    """swflows failed ``attempts`` times handling this deployment's own data
    (``detail``: the error's class and first line)."""
    return Outcome(
        states.FAILED,
        f"Internal error: swflows failed {attempts} times handling this "
        f"deployment: {detail}",
        {
            "kind": states.ReasonKind.INTERNAL_ERROR.value,
            "detail": detail,
            "attempts": attempts,
        },
    )


def encode_payload(payload: Mapping[str, Any]) -> bytes:
    """The bytes an agent sends: ASCII JSON, as Heat's agent sends them."""
    return json.dumps(payload).encode("ascii")


def trim_payload(
    payload: Mapping[str, Any], limit: int = AGENT_SIGNAL_BYTES
) -> dict[str, Any]:
    """A copy of ``payload`` whose :func:`encode_payload` is at most ``limit`` bytes.

    ``deploy_stdout`` and ``deploy_stderr`` are cut from the left, keeping
    their ends (where errors are), sharing the room left fairly.  If the
    other values alone are too big, the largest are replaced, one by one,
    with :data:`TRIMMED_MARKER` (saying how big they were) rather than
    failing to signal at all: the status code and the other outputs still
    arrive.  Sizes are measured on ASCII-escaped JSON, the largest encoding,
    so the payload fits however it is encoded.  A ``limit`` too small for
    even the keys raises ValueError.
    """
    out = dict(payload)
    if _size(out) <= limit:
        return out
    texts = {k: out[k] for k in _TRIMMABLE if isinstance(out.get(k), str)}
    for key in texts:
        out[key] = ""
    _shrink_others(out, limit, skip=set(texts))
    room = limit - _size(out)
    allowances = _share(room, {k: _inner_size(v) for k, v in texts.items()})
    for key, text in texts.items():
        out[key] = _tail(text, allowances[key])
    return out


def _check_size(size: int, limit: int) -> None:
    if size > limit:
        raise exceptions.SignalRejected(
            "signal", f"payload is {size} bytes; the limit is {limit}"
        )


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is too large for a JSON number")
    return value


def _exit_code(code: Any) -> int | None:
    if isinstance(code, bool):
        return None
    if isinstance(code, int):
        return code
    if isinstance(code, float) and code.is_integer():
        return int(code)
    if isinstance(code, str):
        try:
            return int(code.strip())
        except ValueError:
            return None
    return None


def _is_set(value: Any) -> bool:
    if value is None:
        return False
    return not (isinstance(value, str | list | dict) and len(value) == 0)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _seconds(value: float) -> str:
    return f"{value:g}"


def _size(payload: Mapping[str, Any]) -> int:
    return len(json.dumps(payload))


def _inner_size(text: str) -> int:
    """Bytes ``text`` takes inside its JSON quotes."""
    return len(json.dumps(text)) - 2


def _shrink_others(out: dict[str, Any], limit: int, skip: set[str]) -> None:
    """Replace, then drop, the largest other values until ``out`` fits."""
    replaced: set[str] = set()
    while _size(out) > limit:
        sizes = {
            k: len(json.dumps(v))
            for k, v in out.items()
            if k not in skip and k not in replaced
        }
        if not sizes:
            break
        key = max(sizes, key=lambda k: sizes[k])
        marker = TRIMMED_MARKER.format(size=sizes[key], limit=limit)
        replaced.add(key)
        if len(json.dumps(marker)) < sizes[key]:
            out[key] = marker
    # still too big: only the keys themselves are left to go, largest first
    droppable = sorted(
        (k for k in out if k not in _TRIMMABLE and k != model.DEPLOY_STATUS_CODE),
        key=lambda k: len(json.dumps({k: out[k]})),
        reverse=True,
    )
    for key in droppable:
        if _size(out) <= limit:
            return
        del out[key]
    if _size(out) > limit:
        raise ValueError(f"a signal cannot be made to fit in {limit} bytes")


def _share(room: int, sizes: Mapping[str, int]) -> dict[str, int]:
    """Split ``room`` bytes among values, small ones first (water filling)."""
    shares: dict[str, int] = {}
    pending = sorted(sizes, key=lambda k: sizes[k])
    for i, key in enumerate(pending):
        fair = room // (len(pending) - i)
        shares[key] = min(sizes[key], fair)
        room -= shares[key]
    return shares


def _tail(text: str, allowance: int) -> str:
    """The longest end of ``text`` taking at most ``allowance`` bytes in JSON."""
    if _inner_size(text) <= allowance:
        return text
    low, high = 0, min(len(text), allowance)  # every character takes >= 1 byte
    while low < high:
        mid = (low + high + 1) // 2
        if _inner_size(text[len(text) - mid :]) <= allowance:
            low = mid
        else:
            high = mid - 1
    return text[len(text) - low :] if low else ""
