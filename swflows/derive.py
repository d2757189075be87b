"""Derived configs: what one deployment action hands to the server's agent.

Pure: no I/O, no clock.  Each action of a deployment gets a new derived
config: the source config's script and schemas, its inputs carrying values,
then the ``deploy_*`` inputs telling the agent which server and action this
is and where to signal.  Field order and names follow Heat's
``OS::Heat::SoftwareDeployment`` so that Heat's agents read it unchanged.

The derived config's id is the agent's idempotence key: an agent runs each
id once.  It is computed from (deployment id, generation), so a derive task
re-run after a crash makes the same id, and every new action (a new
generation) makes a new one.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as _dt
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

from swflows import exceptions, model
from swflows import transport_names as names

#: fixed namespace of swflows' derived-config ids (uuid5)
DERIVED_CONFIG_NAMESPACE: Final = uuid.UUID("35f499a7-66aa-4f52-8653-063743a75edc")

RESERVED_PREFIX: Final = "deploy_"

DEPLOY_SERVER_ID: Final = "deploy_server_id"
DEPLOY_ACTION: Final = "deploy_action"
DEPLOY_STACK_ID: Final = "deploy_stack_id"
DEPLOY_RESOURCE_NAME: Final = "deploy_resource_name"
DEPLOY_SIGNAL_TRANSPORT: Final = "deploy_signal_transport"
DEPLOY_SIGNAL_ID: Final = "deploy_signal_id"
DEPLOY_SIGNAL_VERB: Final = "deploy_signal_verb"
DEPLOY_AUTH_URL: Final = "deploy_auth_url"
DEPLOY_USERNAME: Final = "deploy_username"
DEPLOY_USER_ID: Final = "deploy_user_id"
DEPLOY_PASSWORD: Final = "deploy_password"  # noqa: S105 (a name)
DEPLOY_PROJECT_ID: Final = "deploy_project_id"
DEPLOY_REGION_NAME: Final = "deploy_region_name"
DEPLOY_QUEUE_ID: Final = "deploy_queue_id"
#: swflows only: a Zaqar signed URL, so a ZAQAR_SIGNAL agent needs no user
DEPLOY_QUEUE_SIGNED_URL: Final = "deploy_queue_signed_url"
#: swflows only: the agent may send a "started" progress signal
DEPLOY_SIGNAL_STARTED: Final = "deploy_signal_started"

#: the inputs derive() itself adds after the config's own, in this order
#: (stack id and resource name only when given)
CONTEXT_INPUTS: Final = (
    DEPLOY_SERVER_ID,
    DEPLOY_ACTION,
    DEPLOY_STACK_ID,
    DEPLOY_RESOURCE_NAME,
    DEPLOY_SIGNAL_TRANSPORT,
)
HEAT_SIGNAL_INPUTS: Final = (
    DEPLOY_AUTH_URL,
    DEPLOY_USERNAME,
    DEPLOY_USER_ID,
    DEPLOY_PASSWORD,
    DEPLOY_PROJECT_ID,
    DEPLOY_REGION_NAME,
)

#: inputs whose values are secrets: the store encrypts them at rest and
#: :func:`redact` hides them (for the signed URL: its signature)
SECRET_INPUTS: Final = frozenset({DEPLOY_PASSWORD, DEPLOY_QUEUE_SIGNED_URL})
#: inputs the store keeps encrypted: the secrets, and the signal URL, whose
#: TempURL signature lets whoever holds it forge the server's signal
SEALED_INPUTS: Final = SECRET_INPUTS | {DEPLOY_SIGNAL_ID}
REDACTED: Final = "***"

#: keys of the ``deploy_queue_signed_url`` value
SIGNED_URL_KEYS: Final = ("signature", "expires", "methods", "paths", "project", "url")

_DESCRIPTIONS: Final = {
    DEPLOY_SERVER_ID: "The server this config is deployed to",
    DEPLOY_ACTION: "The action being run (CREATE, UPDATE, or any other name)",
    DEPLOY_STACK_ID: "The stack the deployment belongs to, if any",
    DEPLOY_RESOURCE_NAME: "The deployment's resource name in its stack, if any",
    DEPLOY_SIGNAL_TRANSPORT: "How the agent sends the output values back",
    DEPLOY_SIGNAL_ID: "Where the agent sends the output values",
    DEPLOY_SIGNAL_VERB: "The HTTP method for sending the output values",
    DEPLOY_AUTH_URL: "Identity endpoint the agent authenticates against",
    DEPLOY_USERNAME: "User name the agent authenticates as",
    DEPLOY_USER_ID: "User id the agent authenticates as",
    DEPLOY_PASSWORD: "Password the agent authenticates with",
    DEPLOY_PROJECT_ID: "Project the agent authenticates in",
    DEPLOY_REGION_NAME: "Region of the endpoints the agent uses",
    DEPLOY_QUEUE_ID: "Zaqar queue the agent posts the output values to",
    DEPLOY_QUEUE_SIGNED_URL: "Signed URL that lets the agent post to its queue",
    DEPLOY_SIGNAL_STARTED: "The agent may signal 'started' before it runs",
}

# Zaqar's queue-name rule
_QUEUE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_URL_SIGNATURE = re.compile(r"((?:^|[?&])(?:temp_url_sig|Signature)=)[^&#]*")

InputPairs = list[tuple[str, Any]]


def derived_config_id(deployment_id: str, generation: int) -> str:
    """The id of the config derived for action number ``generation``."""
    _text("deployment_id", deployment_id)
    if isinstance(generation, bool) or not isinstance(generation, int):
        raise exceptions.ValidationError("generation", "must be an integer")
    if generation < 0:
        raise exceptions.ValidationError("generation", "must not be negative")
    return str(uuid.uuid5(DERIVED_CONFIG_NAMESPACE, f"{deployment_id}/{generation}"))


def check_action(
    source: model.Config | None, action: str, actions: Sequence[str] | None = None
) -> None:
    """Refuse an ``action`` that ``source`` would not run.

    A component config runs only the actions its entries list.  Any other
    config runs the deployment's ``actions`` (``None``: any action, as a
    client-side trigger does).  Flows that want Heat's silent skip of an
    unlisted lifecycle action ask :meth:`Config.handles` instead.
    """
    _text("action", action)
    if source is not None and source.is_component:
        if source.entry_for(action) is None:
            handled = [a for e in source.component_entries() for a in e.actions]
            raise exceptions.ValidationError(
                "action",
                f"component config {source.name} ({source.id}) has no entry for "
                f"{action}; it handles {', '.join(handled)}",
            )
        return
    if actions is not None and action not in actions:
        raise exceptions.ValidationError(
            "action",
            f"{action} is not one of the deployment's actions "
            f"({', '.join(actions) or 'none'})",
        )


def check_values(source: model.Config | None, input_values: Mapping[str, Any]) -> None:
    """Raise :class:`~swflows.exceptions.ValidationError` unless every value
    ``input_values`` gives a declared input coerces to its type, as
    :func:`derive` will: checked before a flow starts, so a Number input
    given ``notanumber`` is refused at once rather than by a flow that
    started and reverted."""
    for spec in source.inputs if source is not None else ():
        if spec.name in input_values:
            _declared_value(spec, input_values[spec.name])


def _declared_value(spec: model.InputSpec, raw: Any) -> Any:
    field = f"input_values.{spec.name}"
    return _json_checked(field, model.coerce_hidden(spec.hidden, field, spec.type, raw))


def derive(
    source: model.Config | None,
    *,
    deployment_id: str,
    generation: int,
    server_id: str,
    action: str,
    input_values: Mapping[str, Any],
    signal_transport: str,
    transport_inputs: Sequence[tuple[str, Any]] | Mapping[str, Any] = (),
    name: str | None = None,
    stack_id: str | None = None,
    resource_name: str | None = None,
    creation_time: _dt.datetime | None = None,
) -> model.Config:
    """Build the derived config for one action of a deployment.

    Inputs come in Heat's order: the source's declared inputs (value from
    ``input_values``, else the default, coerced to the declared type); then
    any other ``input_values`` keys as undeclared String inputs; then
    ``deploy_server_id``, ``deploy_action``, ``deploy_stack_id`` and
    ``deploy_resource_name`` (only when given: swflows has no stack),
    ``deploy_signal_transport``; then ``transport_inputs`` in their order
    (build them with the ``*_inputs`` helpers below).

    Undeclared values differ from Heat in one way: Heat keeps them raw and
    its agent later turns them into text with ``str()`` (a dict becomes a
    Python repr); here they become that text up front, consistently with
    declared String inputs: scalars as :func:`model.coerce_value` makes them,
    maps and lists as JSON text.  So the derived config is well-typed and
    reads back from the store unchanged.  Values with no JSON form are
    refused.

    ``creation_time`` is kept as given (naive UTC, whole seconds); None
    leaves it to the store, since this module reads no clock.
    """
    if source is not None and not isinstance(source, model.Config):
        raise exceptions.ValidationError(
            "source", f"must be a Config, not {type(source).__name__}"
        )
    config_id = derived_config_id(deployment_id, generation)
    _text("server_id", server_id)
    _text("action", action)
    transport = names.normalize_signal_transport(signal_transport)
    if transport == names.AUTO:
        raise exceptions.ValidationError(
            "signal_transport", "AUTO must be resolved to a transport before deriving"
        )
    if not isinstance(input_values, Mapping):
        raise exceptions.ValidationError("input_values", "must be a mapping")
    for key in input_values:
        if not isinstance(key, str):
            raise exceptions.ValidationError(
                "input_values", f"names must be strings, not {type(key).__name__}"
            )
        if key.startswith(RESERVED_PREFIX):
            raise exceptions.ValidationError(
                f"input_values.{key}",
                f"names starting with {RESERVED_PREFIX} are reserved for swflows",
            )

    remaining = dict(input_values)
    inputs: list[model.InputSpec] = []
    for spec in source.inputs if source is not None else ():
        raw = remaining.pop(spec.name) if spec.name in remaining else spec.default
        inputs.append(dataclasses.replace(spec, value=_declared_value(spec, raw)))
    for key, raw in remaining.items():
        field = f"input_values.{key}"
        spec = model.InputSpec.from_dict({"name": key}, field)
        inputs.append(dataclasses.replace(spec, value=_undeclared_value(field, raw)))

    context: InputPairs = [(DEPLOY_SERVER_ID, server_id), (DEPLOY_ACTION, action)]
    if stack_id is not None:
        context.append((DEPLOY_STACK_ID, _text("stack_id", stack_id)))
    if resource_name is not None:
        context.append((DEPLOY_RESOURCE_NAME, _text("resource_name", resource_name)))
    context.append((DEPLOY_SIGNAL_TRANSPORT, transport))
    inputs.extend(_deploy_input(n, v) for n, v in context)
    inputs.extend(_deploy_input(n, v) for n, v in _transport_pairs(transport_inputs))

    seen = [spec.name for spec in inputs]
    duplicates = sorted({n for n in seen if seen.count(n) > 1})
    if duplicates:
        raise exceptions.ValidationError(
            "inputs",
            f"duplicate input name(s) {', '.join(duplicates)}: the source config "
            "declares an input that swflows sets, or a transport input repeats",
        )

    if name is not None:
        derived_name = _text("name", name)
    elif source is not None:
        derived_name = source.name
    else:
        derived_name = f"swflows-{deployment_id}"[: model.MAX_NAME_LENGTH]

    return model.Config(
        id=config_id,
        name=derived_name,
        group=source.group if source is not None else model.UNGROUPED,
        config=copy.deepcopy(source.config) if source is not None else "",
        inputs=tuple(inputs),
        outputs=source.outputs if source is not None else (),
        options=copy.deepcopy(dict(source.options)) if source is not None else {},
        creation_time=_creation_time(creation_time),
    )


def temp_url_signal_inputs(put_url: str) -> InputPairs:
    """TEMP_URL_SIGNAL: the agent PUTs its signal to a Swift TempURL."""
    return [
        (DEPLOY_SIGNAL_ID, _text("put_url", put_url)),
        (DEPLOY_SIGNAL_VERB, "PUT"),
    ]


def cfn_signal_inputs(url: str) -> InputPairs:
    """CFN_SIGNAL: the agent POSTs its signal to a pre-signed URL."""
    return [(DEPLOY_SIGNAL_ID, _text("url", url)), (DEPLOY_SIGNAL_VERB, "POST")]


def heat_signal_inputs(
    auth_url: str,
    username: str,
    user_id: str,
    password: str,
    project_id: str,
    region_name: str | None = None,
) -> InputPairs:
    """HEAT_SIGNAL: the agent authenticates as a stack user and signals the API.

    Every credential must be non-empty: an agent left without one could
    never signal, and the deployment would hang until it times out.
    """
    pairs: InputPairs = [
        (DEPLOY_AUTH_URL, _text("auth_url", auth_url)),
        (DEPLOY_USERNAME, _text("username", username)),
        (DEPLOY_USER_ID, _text("user_id", user_id)),
        (DEPLOY_PASSWORD, _text("password", password)),
        (DEPLOY_PROJECT_ID, _text("project_id", project_id)),
    ]
    if region_name:
        pairs.append((DEPLOY_REGION_NAME, _text("region_name", region_name)))
    return pairs


def zaqar_signal_inputs(
    queue_id: str,
    *,
    auth: Sequence[tuple[str, Any]] | None = None,
    signed_url: Mapping[str, Any] | None = None,
) -> InputPairs:
    """ZAQAR_SIGNAL: the agent posts its signal to the Zaqar queue ``queue_id``.

    Three forms:

    * ``auth=heat_signal_inputs(...)``: Heat's form, the stack user's
      credentials then ``deploy_queue_id``.  Heat's ``heat-config-notify``
      was written for it, but posts with python-zaqarclient's v1 API,
      which current clients and Zaqar no longer have: swflows refuses
      ZAQAR_SIGNAL for a server running Heat's agents.
    * ``signed_url={...}``: no stack user.  ``deploy_queue_id`` then
      ``deploy_queue_signed_url``, a JSON object as Zaqar's "share" call
      returns it plus the endpoint::

          {"signature": "<hex HMAC>",          # secret
           "expires": "2026-11-21T14:33:18",   # ISO 8601, UTC
           "methods": ["POST"],
           "paths": ["/v2/queues/<queue>/messages"],
           "project": "<project id>",
           "url": "https://zaqar.example:8888"}

      The agent posts to ``url`` + the messages path with the headers
      ``URL-Signature``, ``URL-Expires``, ``URL-Methods``, ``URL-Paths``
      and ``X-Project-ID``.  Only swflows' agent understands this form.
    * neither: ``deploy_queue_id`` alone, for callers that put the
      credential inputs before it themselves.
    """
    if not isinstance(queue_id, str) or not _QUEUE_NAME.match(queue_id):
        raise exceptions.ValidationError(
            "queue_id", "must be 1 to 64 characters of letters, digits, _ and -"
        )
    if auth is not None and signed_url is not None:
        raise exceptions.ValidationError(
            "auth", "give either credentials or a signed URL, not both"
        )
    queue = (DEPLOY_QUEUE_ID, queue_id)
    if signed_url is not None:
        return [queue, (DEPLOY_QUEUE_SIGNED_URL, _signed_url(signed_url))]
    if auth is not None:
        pairs = _transport_pairs(auth)
        unknown = [n for n, _ in pairs if n not in HEAT_SIGNAL_INPUTS]
        missing = [
            n
            for n in HEAT_SIGNAL_INPUTS[:-1]  # the region is optional
            if n not in {k for k, _ in pairs}
        ]
        if unknown or missing:
            raise exceptions.ValidationError(
                "auth",
                "must be the inputs heat_signal_inputs() returns "
                f"(unknown: {', '.join(unknown) or 'none'}; "
                f"missing: {', '.join(missing) or 'none'})",
            )
        return [*pairs, queue]
    return [queue]


def started_signal_input() -> InputPairs:
    """Tells an agent that it may send a "started" progress signal.

    A list of one pair, like the other helpers, so they concatenate.  The
    value is the *string* ``"true"``, typed String: Heat's script hook
    crashes on a non-string value in an input that is not a map or a list.
    """
    return [(DEPLOY_SIGNAL_STARTED, "true")]


def for_agent(
    deployments: Sequence[Mapping[str, Any]], *, heat_agents: bool = False
) -> list[dict[str, Any]]:
    """A server's derived configs as published to its agent.

    Every input carries ``value`` (its default when it was given None, else
    None when it has none), as Heat publishes
    them: Heat's ``55-heat-config`` and ``heat-config-notify`` read it
    directly and skip a config without it (no signal).  For Heat's agents
    (``heat_agents``), a Number or Boolean value, or a missing
    value of a type other than String, is published as the text swflows'
    agent would put in the hook's environment (``3``, ``2.5``, ``true``,
    ``""``): ``55-heat-config`` turns only String inputs into text, and
    Heat's script and puppet hooks crash on an environment variable that is
    not text.  A String without a value stays None (``55-heat-config``
    makes it ``"None"``, as under Heat); maps and lists stay as they are
    (the hooks JSON-encode them).  The declared types are kept.
    """
    out = []
    for item in deployments:
        config = dict(item)
        inputs = config.get("inputs")
        if isinstance(inputs, list):
            config["inputs"] = [_published_input(i, heat_agents) for i in inputs]
        out.append(config)
    return out


def heat_agents_text(value: Any) -> Any:
    """``value`` as published to Heat's agents for a non-String input."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


def _published_input(item: Any, heat_agents: bool) -> Any:
    if not isinstance(item, Mapping):
        return item
    published = dict(item)
    value = published.get("value")
    if value is None:
        value = published.get("default")  # what swflows' agent has always used
    if heat_agents and published.get("type") != model.STRING:
        value = heat_agents_text(value)
    published["value"] = value
    return published


def redact(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a config dict (or of a flat name -> value mapping) fit for logs.

    Passwords and the values of hidden inputs become ``"***"``; a signed
    URL keeps its shape but not its signature; signed signal URLs
    (TempURL, EC2-signed) lose their signature parameter, since whoever
    holds one can forge a signal.
    """
    out = dict(config)
    inputs = out.get("inputs")
    if isinstance(inputs, list):
        out["inputs"] = [_redact_input(item) for item in inputs]
    for key in out:
        if isinstance(key, str) and key.startswith(RESERVED_PREFIX):
            out[key] = _redact_value(key, out[key])
    return out


def replace_on_change_changed(
    source: model.Config | None,
    old_values: Mapping[str, Any],
    new_values: Mapping[str, Any],
) -> list[str]:
    """Names of ``replace_on_change`` inputs whose value differs (in order).

    A value missing from a mapping is the input's default.  A non-empty
    answer means a redeploy must make a new deployment, not update this one.
    """
    if source is None:
        return []
    changed = []
    for spec in source.inputs:
        if not spec.replace_on_change:
            continue
        if _effective(spec, old_values) != _effective(spec, new_values):
            changed.append(spec.name)
    return changed


def _effective(spec: model.InputSpec, values: Mapping[str, Any]) -> Any:
    raw = values[spec.name] if spec.name in values else spec.default
    try:
        return model.coerce_value(spec.name, spec.type, raw)
    except exceptions.ValidationError:
        return raw


def _text(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise exceptions.ValidationError(
            field, f"must be a string, not {type(value).__name__}"
        )
    if not value.strip():
        raise exceptions.ValidationError(field, "must not be empty")
    return model.check_storable_text(field, value)


def _json_checked(field: str, value: Any) -> Any:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise exceptions.ValidationError(
            field, f"must have a JSON form: {exc}"
        ) from None
    except RecursionError:
        raise exceptions.ValidationError(
            field, "must have a JSON form: it nests too deeply"
        ) from None
    return value


def _json_copy(field: str, value: Any) -> Any:
    """A copy of ``value`` through its JSON form (deepcopy recurses deeper)."""
    text = json.dumps(_json_checked(field, value))
    try:
        return json.loads(text)
    except RecursionError:
        raise exceptions.ValidationError(
            field, "must have a JSON form: it nests too deeply"
        ) from None


def _undeclared_value(field: str, value: Any) -> Any:
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(_json_checked(field, value))
    if value is None or isinstance(value, (str, bool, int, float)):
        return model.coerce_value(field, model.STRING, value)
    raise exceptions.ValidationError(
        field, f"must have a JSON form, not {type(value).__name__}"
    )


def _deploy_input(name: str, value: Any) -> model.InputSpec:
    field = f"transport_inputs.{name}"
    if isinstance(value, (dict, list)):
        type_, value = model.JSON, _json_copy(field, value)
    else:
        type_ = model.STRING
        value = _json_checked(field, model.coerce_value(field, type_, value))
    return model.InputSpec(
        name=name, type=type_, description=_DESCRIPTIONS.get(name), value=value
    )


def _transport_pairs(
    pairs: Sequence[tuple[str, Any]] | Mapping[str, Any],
) -> InputPairs:
    if isinstance(pairs, Mapping):
        items = list(pairs.items())
    elif isinstance(pairs, Sequence) and not isinstance(pairs, str | bytes):
        items = list(pairs)
    else:
        raise exceptions.ValidationError(
            "transport_inputs",
            f"expected (name, value) pairs or a mapping, not {type(pairs).__name__}",
        )
    out: InputPairs = []
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise exceptions.ValidationError(
                "transport_inputs", f"expected (name, value) pairs, got {item!r}"
            )
        name, value = item
        if not isinstance(name, str) or not name.startswith(RESERVED_PREFIX):
            raise exceptions.ValidationError(
                "transport_inputs", f"{name!r} must start with {RESERVED_PREFIX}"
            )
        if name in CONTEXT_INPUTS:
            raise exceptions.ValidationError(
                "transport_inputs", f"{name} is set by derive() itself"
            )
        out.append((name, value))
    return out


def _signed_url(data: Mapping[str, Any]) -> dict[str, Any]:
    field = "signed_url"
    if not isinstance(data, Mapping):
        raise exceptions.ValidationError(field, "must be a mapping")
    missing = [k for k in SIGNED_URL_KEYS if k not in data]
    if missing:
        raise exceptions.ValidationError(field, f"missing key(s) {', '.join(missing)}")
    out: dict[str, Any] = {}
    for key in ("signature", "project", "url"):
        out[key] = _text(f"{field}.{key}", data[key])
    expires = data["expires"]
    if isinstance(expires, bool) or not isinstance(expires, str | int):
        raise exceptions.ValidationError(
            f"{field}.expires", "must be a time (ISO 8601 text or epoch seconds)"
        )
    out["expires"] = str(expires)
    for key in ("methods", "paths"):
        value = data[key]
        if (
            isinstance(value, str)
            or not isinstance(value, Sequence)
            or not value
            or not all(isinstance(v, str) and v for v in value)
        ):
            raise exceptions.ValidationError(
                f"{field}.{key}", "must be a non-empty list of strings"
            )
        out[key] = list(value)
    return {k: out[k] for k in SIGNED_URL_KEYS}


def _redact_input(item: Any) -> Any:
    if not isinstance(item, Mapping):
        return item
    out = dict(item)
    if item.get("hidden") is True:
        for key in ("value", "default"):
            if out.get(key) is not None:
                out[key] = REDACTED
        return out
    if "value" in item:
        out["value"] = _redact_value(str(item.get("name")), item["value"])
    return out


def _redact_value(name: str, value: Any) -> Any:
    if value is None:
        return None
    if name == DEPLOY_QUEUE_SIGNED_URL and isinstance(value, Mapping):
        shown = dict(value)
        if "signature" in shown:
            shown["signature"] = REDACTED
        return shown
    if name in SECRET_INPUTS:
        return REDACTED
    if name == DEPLOY_SIGNAL_ID and isinstance(value, str):
        return _URL_SIGNATURE.sub(lambda m: m.group(1) + REDACTED, value)
    return value


def _creation_time(value: _dt.datetime | None) -> _dt.datetime | None:
    if value is None:
        return None
    if not isinstance(value, _dt.datetime):
        raise exceptions.ValidationError("creation_time", "must be a datetime")
    if value.tzinfo is not None:
        value = value.astimezone(_dt.UTC).replace(tzinfo=None)
    return value.replace(microsecond=0)
