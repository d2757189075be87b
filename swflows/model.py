"""Value types: configs, their inputs and outputs, deployments.

Pure: no I/O.  Shapes and names follow Heat's software-config API so that
documents built from these types are what Heat's agents expect.  Every
constructor validates, and an invalid value raises
:class:`~swflows.exceptions.ValidationError` naming the field.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from swflows import exceptions, states

UNGROUPED: Final = "Heat::Ungrouped"
COMPONENT: Final = "component"

STRING: Final = "String"
NUMBER: Final = "Number"
COMMA_DELIMITED_LIST: Final = "CommaDelimitedList"
JSON: Final = "Json"
BOOLEAN: Final = "Boolean"
INPUT_TYPES: Final = (STRING, NUMBER, COMMA_DELIMITED_LIST, JSON, BOOLEAN)

#: the lifecycle actions; components may name any other action too
CREATE: Final = "CREATE"
UPDATE: Final = "UPDATE"
DELETE: Final = "DELETE"
SUSPEND: Final = "SUSPEND"
RESUME: Final = "RESUME"
LIFECYCLE_ACTIONS: Final = (CREATE, UPDATE, DELETE, SUSPEND, RESUME)
DEFAULT_COMPONENT_ACTIONS: Final = (CREATE, UPDATE)

#: outputs every signal carries besides the declared ones
DEPLOY_STDOUT: Final = "deploy_stdout"
DEPLOY_STDERR: Final = "deploy_stderr"
DEPLOY_STATUS_CODE: Final = "deploy_status_code"
RESERVED_OUTPUTS: Final = (DEPLOY_STDOUT, DEPLOY_STDERR, DEPLOY_STATUS_CODE)

#: a metadata document's key for its generation: the version of the
#: server's deployments it was read at, which only grows for that server.
#: swflows' agent acts on no document older than one it acted on; Heat's
#: agents ignore the key (they read only ``deployments``)
DOCUMENT_GENERATION: Final = "generation"

#: how a hidden input's value, or a sealed one, is shown (as Heat shows
#: a hidden parameter)
HIDDEN_SHOWN: Final = "******"
#: the key of a sealed value, ``{"$swflows_secret": "<Fernet token>"}``: a
#: value encrypted with the store's key (see :mod:`swflows.persistence`)
SEALED_KEY: Final = "$swflows_secret"

MAX_NAME_LENGTH: Final = 255
#: the longest timeout a deployment action may have, in seconds (7 days):
#: far under what the store's integer columns hold
MAX_TIMEOUT: Final = 7 * 24 * 3600
#: characters a name may not hold: C0 and C1 controls and DEL (ESC, BEL,
#: newline, ...), which a terminal showing the name would act on
_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_TRUE = frozenset({"true", "t", "yes", "y", "on", "1"})
_FALSE = frozenset({"false", "f", "no", "n", "off", "0"})


def new_id() -> str:
    return str(uuid.uuid4())


def utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0, tzinfo=None)


def isotime(value: _dt.datetime | float | None) -> str | None:
    """A time as every view shows it, Heat's API format:
    ``2026-11-21T13:33:18Z`` (UTC, whole seconds).

    ``value`` is a naive datetime in UTC (as the store keeps them), an
    aware one, or seconds since the epoch (``time.time()``).
    """
    if value is None:
        return None
    if isinstance(value, int | float):
        value = _dt.datetime.fromtimestamp(value, _dt.UTC)
    elif value.tzinfo is not None:
        value = value.astimezone(_dt.UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def _require_str(field: str, value: Any, *, empty_ok: bool = False) -> str:
    if not isinstance(value, str):
        raise exceptions.ValidationError(field, f"must be a string, not {_kind(value)}")
    if not empty_ok and not value.strip():
        raise exceptions.ValidationError(field, "must not be empty")
    if len(value) > MAX_NAME_LENGTH:
        raise exceptions.ValidationError(
            field, f"must be at most {MAX_NAME_LENGTH} characters"
        )
    check_storable_text(field, value)
    return value


def check_name(field: str, value: Any) -> Any:
    """Refuse a name holding a control character (ESC, BEL, a newline...).

    Checked where a name is given, not where one is read back: a name
    stored before this check is still read (and escaped when shown)."""
    if isinstance(value, str):
        found = _CONTROL.search(value)
        if found:
            raise exceptions.ValidationError(
                field,
                f"must not contain control characters ({found.group()!r} at "
                f"character {found.start() + 1})",
            )
    return value


def check_timeout(field: str, seconds: int) -> int:
    """Refuse a timeout that is not 1 to :data:`MAX_TIMEOUT` seconds."""
    if not 0 < seconds <= MAX_TIMEOUT:
        raise exceptions.ValidationError(
            field,
            f"must be 1 to {MAX_TIMEOUT} seconds ({MAX_TIMEOUT // 60} minutes, "
            f"{MAX_TIMEOUT // 86400} days)",
        )
    return seconds


def check_storable_text(field: str, value: str) -> str:
    """Refuse text no database column takes: a NUL, or a lone surrogate.

    PostgreSQL refuses NUL in text; a lone surrogate (text decoded with
    ``surrogateescape``, or an escape like ``\\ud800`` in JSON) is not
    UTF-8 at all, so no driver can send it.
    """
    if "\x00" in value:
        raise exceptions.ValidationError(field, "must not contain a NUL character")
    if _SURROGATE.search(value):
        raise exceptions.ValidationError(
            field, "must be valid Unicode text (it holds a lone surrogate)"
        )
    return value


def _kind(value: Any) -> str:
    return type(value).__name__


def is_sealed(value: Any) -> bool:
    """Whether ``value`` has the shape of a sealed value (``SEALED_KEY``)."""
    return isinstance(value, dict) and set(value) == {SEALED_KEY}


def shown_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of input values fit to show: sealed ones as ``HIDDEN_SHOWN``."""
    return {
        key: HIDDEN_SHOWN if is_sealed(value) else value
        for key, value in values.items()
    }


def _check_keys(field: str, data: Mapping[str, Any], allowed: Iterable[str]) -> None:
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise exceptions.ValidationError(field, f"unknown key(s) {', '.join(unknown)}")


def coerce_value(field: str, type_: str, value: Any) -> Any:
    """Check ``value`` against an input ``type_`` and return its typed form.

    Strings are accepted for every type (that is how values arrive from a
    command line) and parsed; ``None`` stays ``None`` (no value given).
    """
    if value is None:
        return None
    if type_ == STRING:
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, (str, int, float)):
            try:
                return str(value)
            except ValueError:  # an int too long for text
                raise exceptions.ValidationError(
                    field, "expected a String, got a number too long to write"
                ) from None
        raise exceptions.ValidationError(
            field, f"expected a String, not {_kind(value)}"
        )
    if type_ == NUMBER:
        if isinstance(value, bool):
            raise exceptions.ValidationError(field, "expected a Number, not a boolean")
        number: int | float | None = None
        if isinstance(value, (int, float)):
            number = value
        elif isinstance(value, str):
            try:
                number = int(value)
            except ValueError:
                try:
                    number = float(value)
                except ValueError:
                    pass
        # NaN, infinities and ints too long for text have no JSON form
        if number is not None and _has_json_form(number):
            return number
        raise exceptions.ValidationError(
            field, f"expected a Number, got {_short(value)}"
        )
    if type_ == BOOLEAN:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise exceptions.ValidationError(
            field, f"expected a Boolean, got {_short(value)}"
        )
    if type_ == COMMA_DELIMITED_LIST:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",")] if value else []
        if isinstance(value, (list, tuple)) and all(isinstance(i, str) for i in value):
            return list(value)
        raise exceptions.ValidationError(
            field, "expected a CommaDelimitedList (a string or a list of strings)"
        )
    if type_ == JSON:
        # Heat's Json is a map or a list; a string is its JSON text.  Parsed
        # scalars are refused so that coercing again returns the same value.
        if isinstance(value, str):
            try:
                value = json.loads(value, parse_constant=_refuse_constant)
            except ValueError as exc:
                raise exceptions.ValidationError(
                    field, f"invalid JSON: {exc}"
                ) from None
            except RecursionError:
                raise exceptions.ValidationError(
                    field, "invalid JSON: it nests too deeply"
                ) from None
            if not isinstance(value, (dict, list)):
                raise exceptions.ValidationError(
                    field, f"expected Json (a map or a list), not {_kind(value)}"
                )
        if isinstance(value, (dict, list)):
            if not _has_json_form(value):
                raise exceptions.ValidationError(
                    field,
                    "expected Json, got a value with no JSON form (NaN, an "
                    "infinity, a non-JSON type, or nesting too deep)",
                )
            return value
        raise exceptions.ValidationError(field, f"expected Json, not {_kind(value)}")
    raise exceptions.ValidationError(
        field, f"unknown type {type_!r}; expected one of {', '.join(INPUT_TYPES)}"
    )


def _has_json_form(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _short(value: Any) -> str:
    """``repr(value)`` cut to fit an error message (it may be any size)."""
    try:
        text = repr(value)
    except ValueError:  # an int too long for text
        return f"a {_kind(value)} too long to show"
    return text if len(text) <= 80 else f"{text[:77]}..."


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """One declared input of a config (``value`` is set in derived configs).

    A ``hidden`` input holds a secret (a password, a key): the store keeps
    its default and value encrypted, views show them as ``HIDDEN_SHOWN``,
    and what a server sends back has them masked.
    """

    name: str
    type: str = STRING
    description: str | None = None
    default: Any = None
    replace_on_change: bool = False
    value: Any = None
    hidden: bool = False

    _KEYS = (
        "name",
        "type",
        "description",
        "default",
        "replace_on_change",
        "value",
        "hidden",
    )

    @classmethod
    def from_dict(cls, data: Any, field: str = "inputs") -> InputSpec:
        if not isinstance(data, Mapping):
            raise exceptions.ValidationError(
                field, f"must be a mapping, not {_kind(data)}"
            )
        _check_keys(field, data, cls._KEYS)
        name = _require_str(f"{field}.name", data.get("name"))
        where = f"{field}[{name}]"
        type_ = data.get("type", STRING)
        if type_ not in INPUT_TYPES:
            raise exceptions.ValidationError(
                f"{where}.type",
                f"unknown type {type_!r}; expected one of {', '.join(INPUT_TYPES)}",
            )
        description = data.get("description")
        if description is not None and not isinstance(description, str):
            raise exceptions.ValidationError(f"{where}.description", "must be a string")
        replace = data.get("replace_on_change", False)
        if not isinstance(replace, bool):
            raise exceptions.ValidationError(
                f"{where}.replace_on_change", "must be true or false"
            )
        hidden = data.get("hidden", False)
        if not isinstance(hidden, bool):
            raise exceptions.ValidationError(
                f"{where}.hidden", f"must be true or false, not {_short(hidden)}"
            )
        default = coerce_hidden(hidden, f"{where}.default", type_, data.get("default"))
        value = coerce_hidden(hidden, f"{where}.value", type_, data.get("value"))
        return cls(name, type_, description, default, replace, value, hidden)

    def to_dict(self, *, reveal: bool = False) -> dict[str, Any]:
        """Heat's shape: optional keys only when set.

        Without ``reveal``, a hidden input's default and value are shown
        as ``HIDDEN_SHOWN``.
        """
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.description is not None:
            out["description"] = self.description
        if self.default is not None:
            out["default"] = self._shown(self.default, reveal)
        if self.replace_on_change:
            out["replace_on_change"] = True
        if self.hidden:
            out["hidden"] = True
        if self.value is not None or self.name.startswith("deploy_"):
            out["value"] = self._shown(self.value, reveal)
        return out

    def _shown(self, value: Any, reveal: bool) -> Any:
        if reveal or value is None or not self.hidden:
            return value
        return HIDDEN_SHOWN

    def __repr__(self) -> str:  # a hidden input's value stays out of logs
        fields = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"InputSpec({fields})"


def coerce_hidden(hidden: bool, field: str, type_: str, value: Any) -> Any:
    """:func:`coerce_value`, whose error never quotes a ``hidden`` value."""
    try:
        return coerce_value(field, type_, value)
    except exceptions.ValidationError:
        if not hidden:
            raise
    raise exceptions.ValidationError(
        field, f"expected a {type_} (the value of a hidden input is not shown)"
    )


@dataclasses.dataclass(frozen=True)
class OutputSpec:
    """One declared output of a config."""

    name: str
    type: str = STRING
    description: str | None = None
    error_output: bool = False

    _KEYS = ("name", "type", "description", "error_output")

    @classmethod
    def from_dict(cls, data: Any, field: str = "outputs") -> OutputSpec:
        if not isinstance(data, Mapping):
            raise exceptions.ValidationError(
                field, f"must be a mapping, not {_kind(data)}"
            )
        _check_keys(field, data, cls._KEYS)
        name = _require_str(f"{field}.name", data.get("name"))
        where = f"{field}[{name}]"
        if name in RESERVED_OUTPUTS:
            raise exceptions.ValidationError(where, "is a reserved output name")
        type_ = data.get("type", STRING)
        if type_ not in INPUT_TYPES:
            raise exceptions.ValidationError(
                f"{where}.type",
                f"unknown type {type_!r}; expected one of {', '.join(INPUT_TYPES)}",
            )
        description = data.get("description")
        if description is not None and not isinstance(description, str):
            raise exceptions.ValidationError(f"{where}.description", "must be a string")
        error_output = data.get("error_output", False)
        if not isinstance(error_output, bool):
            raise exceptions.ValidationError(
                f"{where}.error_output", "must be true or false"
            )
        return cls(name, type_, description, error_output)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.description is not None:
            out["description"] = self.description
        out["error_output"] = self.error_output
        return out


@dataclasses.dataclass(frozen=True)
class ComponentEntry:
    """One entry of a component config: the config and tool for some actions."""

    actions: tuple[str, ...]
    config: Any
    tool: str

    @classmethod
    def from_dict(cls, data: Any, field: str) -> ComponentEntry:
        if not isinstance(data, Mapping):
            raise exceptions.ValidationError(
                field, f"must be a mapping, not {_kind(data)}"
            )
        _check_keys(field, data, ("actions", "config", "tool"))
        actions = data.get("actions", list(DEFAULT_COMPONENT_ACTIONS))
        if isinstance(actions, str) or not isinstance(actions, Sequence) or not actions:
            raise exceptions.ValidationError(
                f"{field}.actions", "must be a non-empty list of action names"
            )
        for action in actions:
            _require_str(f"{field}.actions", action)
        tool = _require_str(f"{field}.tool", data.get("tool"))
        return cls(tuple(actions), data.get("config"), tool)

    def to_dict(self) -> dict[str, Any]:
        return {"actions": list(self.actions), "config": self.config, "tool": self.tool}


def _specs(field: str, items: Any, build: Any) -> tuple[Any, ...]:
    if items is None:
        return ()
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise exceptions.ValidationError(field, "must be a list of mappings")
    specs = tuple(build(item, f"{field}[{i}]") for i, item in enumerate(items))
    names = [spec.name for spec in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise exceptions.ValidationError(
            field, f"duplicate name(s) {', '.join(duplicates)}"
        )
    return specs


@dataclasses.dataclass(frozen=True)
class Config:
    """An immutable software config (a source, or one derived for an action)."""

    id: str
    name: str
    group: str = UNGROUPED
    config: Any = ""
    inputs: tuple[InputSpec, ...] = ()
    outputs: tuple[OutputSpec, ...] = ()
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    creation_time: _dt.datetime | None = None

    @classmethod
    def create(
        cls,
        name: str,
        config: Any = "",
        *,
        group: str | None = None,
        inputs: Sequence[Mapping[str, Any]] | None = None,
        outputs: Sequence[Mapping[str, Any]] | None = None,
        options: Mapping[str, Any] | None = None,
        id: str | None = None,
        creation_time: _dt.datetime | None = None,
    ) -> Config:
        """Validate raw (JSON-shaped) fields and build a config."""
        _require_str("name", name)
        group = group or UNGROUPED
        _require_str("group", group)
        if options is None:
            options = {}
        if not isinstance(options, Mapping):
            raise exceptions.ValidationError("options", "must be a mapping")
        if creation_time is not None and not isinstance(creation_time, _dt.datetime):
            raise exceptions.ValidationError(
                "creation_time", f"must be a time, not {_kind(creation_time)}"
            )
        if config is None:
            config = ""
        if not isinstance(config, (str, Mapping, list)):
            raise exceptions.ValidationError(
                "config", f"must be a string or a mapping, not {_kind(config)}"
            )
        # the store keeps both as JSON: NaN, infinities and other types have no
        # JSON form, and a nesting too deep for the parser could not be read back
        for field, value in (("config", config), ("options", options)):
            if not _has_json_form(value):
                raise exceptions.ValidationError(
                    field,
                    "must have a JSON form (no NaN, infinity or non-JSON type; "
                    "not nested too deeply)",
                )
        built = cls(
            id=id or new_id(),
            name=name,
            group=group,
            config=config,
            inputs=_specs("inputs", inputs, InputSpec.from_dict),
            outputs=_specs("outputs", outputs, OutputSpec.from_dict),
            options=dict(options),
            creation_time=creation_time or utcnow(),
        )
        if group == COMPONENT:
            built.component_entries()  # validates
        return built

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Config:
        """Build from Heat's config dict (as the API or the store returns it)."""
        if not isinstance(data, Mapping):
            raise exceptions.ValidationError("config", "must be a mapping")
        _check_keys(
            "config",
            data,
            (
                "id",
                "name",
                "group",
                "config",
                "inputs",
                "outputs",
                "options",
                "creation_time",
            ),
        )
        created = data.get("creation_time")
        if isinstance(created, str):
            try:
                created = _dt.datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ")
            except ValueError:
                raise exceptions.ValidationError(
                    "creation_time",
                    f"must be a time like 2026-11-21T13:33:18Z, not {_short(created)}",
                ) from None
        return cls.create(
            data.get("name"),  # type: ignore[arg-type]
            data.get("config", ""),
            group=data.get("group"),
            inputs=data.get("inputs"),
            outputs=data.get("outputs"),
            options=data.get("options"),
            id=data.get("id"),
            creation_time=created,
        )

    def to_dict(self, *, reveal: bool = False) -> dict[str, Any]:
        """Heat's config dict; with ``reveal``, also the shape of one
        server-metadata item.  Without it, hidden inputs' defaults and
        values are shown as ``HIDDEN_SHOWN``."""
        return {
            "id": self.id,
            "name": self.name,
            "group": self.group,
            "creation_time": isotime(self.creation_time),
            "config": self.config,
            "inputs": [i.to_dict(reveal=reveal) for i in self.inputs],
            "outputs": [o.to_dict() for o in self.outputs],
            "options": dict(self.options),
        }

    @property
    def is_component(self) -> bool:
        return self.group == COMPONENT

    def component_entries(self) -> tuple[ComponentEntry, ...]:
        """The entries of a component config; validates them."""
        if not self.is_component:
            return ()
        body = self.config
        if not isinstance(body, Mapping) or "configs" not in body:
            raise exceptions.ValidationError(
                "config", "a component config must be a mapping with 'configs'"
            )
        raw = body["configs"]
        if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence) or not raw:
            raise exceptions.ValidationError(
                "config.configs", "must be a non-empty list of entries"
            )
        entries = tuple(
            ComponentEntry.from_dict(item, f"config.configs[{i}]")
            for i, item in enumerate(raw)
        )
        seen: dict[str, int] = {}
        for i, entry in enumerate(entries):
            for action in entry.actions:
                if action in seen:
                    raise exceptions.ValidationError(
                        f"config.configs[{i}].actions",
                        f"action {action} is already in configs[{seen[action]}]",
                    )
                seen[action] = i
        return entries

    def entry_for(self, action: str) -> ComponentEntry | None:
        for entry in self.component_entries():
            if action in entry.actions:
                return entry
        return None

    def handles(self, action: str, actions: Sequence[str] | None = None) -> bool:
        """Whether ``action`` runs anything for this config.

        Components list their own actions; other configs run the actions
        the deployment lists (``actions``, default CREATE and UPDATE).
        """
        if self.is_component:
            return self.entry_for(action) is not None
        return action in (actions if actions is not None else DEFAULT_COMPONENT_ACTIONS)

    def input(self, name: str) -> InputSpec | None:
        for spec in self.inputs:
            if spec.name == name:
                return spec
        return None

    @property
    def hidden_inputs(self) -> frozenset[str]:
        """The names of the inputs declared ``hidden``."""
        return frozenset(spec.name for spec in self.inputs if spec.hidden)


@dataclasses.dataclass
class Deployment:
    """A config deployed to one server; its status follows :mod:`swflows.states`."""

    id: str
    server_id: str
    config_id: str | None
    source_config_id: str | None
    action: str
    status: str
    status_reason: str = ""
    #: machine-readable reason: ``{"kind": ReasonKind, ...details}``
    reason: dict[str, Any] | None = None
    input_values: dict[str, Any] = dataclasses.field(default_factory=dict)
    output_values: dict[str, Any] = dataclasses.field(default_factory=dict)
    signal_transport: str = "NO_SIGNAL"
    name: str | None = None
    #: actions this deployment runs (non-component configs), like Heat's property
    actions: tuple[str, ...] = DEFAULT_COMPONENT_ACTIONS
    #: counts the actions run; derived names and signal stores are keyed by it
    generation: int = 0
    #: seconds to wait for the final signal
    timeout: int | None = None
    #: for a triggered action: the deployment it was triggered from
    parent_id: str | None = None
    creation_time: _dt.datetime | None = None
    updated_time: _dt.datetime | None = None

    def __post_init__(self) -> None:
        _require_str("server_id", self.server_id)
        _require_str("action", self.action)
        if isinstance(self.name, str):
            check_storable_text("name", self.name)
        if self.status not in states.STATUSES:
            raise exceptions.ValidationError(
                "status", f"unknown status {self.status!r}"
            )
        if not isinstance(self.input_values, dict):
            raise exceptions.ValidationError("input_values", "must be a mapping")

    @property
    def is_terminal(self) -> bool:
        return states.is_terminal(self.status)

    def to_dict(self) -> dict[str, Any]:
        """Heat's deployment dict plus swflows' extra fields.

        The values of hidden inputs are held sealed (encrypted with the
        store's key) and shown as ``HIDDEN_SHOWN``.
        """
        out: dict[str, Any] = {
            "id": self.id,
            "config_id": self.config_id,
            "source_config_id": self.source_config_id,
            "server_id": self.server_id,
            "input_values": shown_values(self.input_values),
            "output_values": dict(self.output_values),
            "action": self.action,
            "status": self.status,
            "status_reason": self.status_reason,
            "reason": dict(self.reason) if self.reason else None,
            "signal_transport": self.signal_transport,
            "name": self.name,
            "actions": list(self.actions),
            "generation": self.generation,
            "timeout": self.timeout,
            "parent_id": self.parent_id,
            "creation_time": isotime(self.creation_time),
        }
        if self.updated_time is not None:
            out["updated_time"] = isotime(self.updated_time)
        return out
