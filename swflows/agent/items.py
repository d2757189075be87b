"""The metadata document and its items, read defensively.

A server's metadata document is ``{"deployments": [item, ...], ...}``
(Heat's ``GET .../metadata/<server>`` answer ``{"metadata": [...]}`` and a
bare list, the shape of Heat's ``heat-config`` file, are read too).  Each
item is a derived config as Heat shapes it.  Nothing here trusts its input:
a malformed document or item is a :class:`~swflows.exceptions.ValidationError`
naming what is wrong, and :func:`signal_inputs` still finds where to signal
from an item too broken to run, so the server can be told.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from typing import Any, Final

from swflows import derive, exceptions, masking, model

LOG = logging.getLogger(__name__)

#: keys of a document that may hold the item list, in order of preference
DOCUMENT_KEYS: Final = ("deployments", "metadata")


@dataclasses.dataclass(frozen=True)
class Item:
    """One derived config, as the agent runs it.

    ``source`` is the item as received: executable hooks get it on stdin,
    as Heat's hooks do (with a component resolved to its entry).
    """

    id: str
    name: str
    group: str
    config: Any
    inputs: tuple[Mapping[str, Any], ...]
    outputs: tuple[Mapping[str, Any], ...]
    options: Mapping[str, Any]
    source: Mapping[str, Any]

    @property
    def values(self) -> dict[str, Any]:
        """Input name -> value (a declared input without value: its default)."""
        return {
            str(spec["name"]): spec.get("value", spec.get("default"))
            for spec in self.inputs
        }

    @property
    def action(self) -> str | None:
        action = self.values.get(derive.DEPLOY_ACTION)
        return action if isinstance(action, str) else None

    @property
    def output_names(self) -> list[str]:
        return [str(spec["name"]) for spec in self.outputs]


@dataclasses.dataclass(frozen=True)
class Document:
    """A metadata document as read: its raw items, and its generation (None
    when it has none: Heat's documents, or a malformed value)."""

    items: list[Any]
    generation: int | None = None


@dataclasses.dataclass
class Newest:
    """The highest generation of a document the agent acted on.

    A document older than that was written late by a publisher that read
    the store before the newer one was published (it was paused between
    reading and writing): it is not acted on, so it neither runs what was
    withdrawn since nor stops a running hook it lacks.  A document without
    a generation (Heat's) is always acted on.  A server's generations start
    again from 1 only when its channel was removed (it was unenrolled) and
    made anew: the agent forgets the generation when it finds its document
    gone, and a restarted agent starts without one.
    """

    generation: int | None = None

    def admits(self, document: Document) -> bool:
        """Whether ``document`` is to be acted on; if so, it is the newest."""
        found = document.generation
        if found is None:
            return True
        if self.generation is not None and found < self.generation:
            LOG.warning(
                "ignoring a metadata document of generation %d: one of "
                "generation %d was acted on (a late write of an older copy)",
                found,
                self.generation,
            )
            return False
        self.generation = found
        return True

    def forget(self) -> None:
        if self.generation is not None:
            LOG.info("the metadata document is gone: its generation is forgotten")
        self.generation = None


def read_document(raw: bytes | str | Any) -> Document:
    """The items of a metadata document and its generation
    (:data:`swflows.model.DOCUMENT_GENERATION`); refused as
    :func:`parse_document` refuses."""
    doc = _decode(raw)
    found = doc.get(model.DOCUMENT_GENERATION) if isinstance(doc, Mapping) else None
    generation = (
        found
        if isinstance(found, int) and not isinstance(found, bool) and found >= 0
        else None
    )
    return Document(_items_of(doc), generation)


def parse_document(raw: bytes | str | Any) -> list[Any]:
    """The raw items of a metadata document (each still to be checked).

    ``raw`` is the document's bytes or text, or an already decoded value
    (a Zaqar message body).  A document without a deployments key has no
    deployments.  Refuses, with ValidationError: bytes that are not UTF-8
    JSON, a document that is not an object or a list, an item list that is
    not a list.
    """
    return _items_of(_decode(raw))


#: what an empty text decodes to: a document without items
_EMPTY: Final = object()


def _decode(raw: bytes | str | Any) -> Any:
    """The decoded document (:data:`_EMPTY` for an empty text);
    ValidationError when it is not UTF-8 JSON."""
    if isinstance(raw, bytes | bytearray):
        try:
            raw = bytes(raw).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise exceptions.ValidationError(
                "metadata", f"not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
    if not isinstance(raw, str):
        return raw
    if not raw.strip():
        return _EMPTY
    try:
        return json.loads(raw, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise exceptions.ValidationError(
            "metadata", f"not JSON: {str(exc)[:200]}"
        ) from None


def _items_of(doc: Any) -> list[Any]:
    """The item list of a decoded document."""
    if doc is _EMPTY:
        return []
    if isinstance(doc, list):
        return list(doc)
    if not isinstance(doc, Mapping):
        raise exceptions.ValidationError(
            "metadata", f"must be a JSON object, not {_kind(doc)}"
        )
    for key in DOCUMENT_KEYS:
        if key in doc:
            found = doc[key]
            if found is None:
                return []
            if not isinstance(found, list):
                raise exceptions.ValidationError(
                    f"metadata.{key}", f"must be a list, not {_kind(found)}"
                )
            return list(found)
    return []


def item_id(raw: Any) -> str | None:
    """The item's id (its derived config id), or None when it has none."""
    if isinstance(raw, Mapping):
        ident = raw.get("id")
        if isinstance(ident, str) and ident.strip():
            return ident
    return None


def signal_inputs(raw: Any) -> dict[str, Any]:
    """The ``deploy_*`` input values of an item, however broken the rest is.

    Used to tell the server about an item the agent cannot run; only
    well-formed ``{"name": "deploy_...", "value": ...}`` entries count.
    """
    found: dict[str, Any] = {}
    inputs = raw.get("inputs") if isinstance(raw, Mapping) else None
    if not isinstance(inputs, list):
        return found
    for spec in inputs:
        if not isinstance(spec, Mapping):
            continue
        name = spec.get("name")
        if isinstance(name, str) and name.startswith(derive.RESERVED_PREFIX):
            found.setdefault(name, spec.get("value"))
    return found


def hidden_inputs(raw: Any) -> dict[str, Any]:
    """The values of an item's inputs marked ``hidden`` (its secrets), by
    name; its signal leaves the server with them masked."""
    found: dict[str, Any] = {}
    inputs = raw.get("inputs") if isinstance(raw, Mapping) else None
    if not isinstance(inputs, list):
        return found
    for name in masking.hidden_names(inputs):
        for spec in inputs:
            if isinstance(spec, Mapping) and spec.get("name") == name:
                value = spec.get("value")
                found.setdefault(name, spec.get("default") if value is None else value)
    return found


def parse_item(raw: Any) -> Item:
    """Check one raw item; ValidationError says what is wrong with it.

    Lenient where Heat's agents are (a missing name, group, outputs or
    options take Heat's defaults), strict where running it would be a
    guess: the id, and inputs and outputs that are not lists of named
    mappings.
    """
    if not isinstance(raw, Mapping):
        raise exceptions.ValidationError("item", f"must be an object, not {_kind(raw)}")
    ident = item_id(raw)
    if ident is None:
        raise exceptions.ValidationError("item.id", "missing or not a string")
    name = raw.get("name")
    if name is None:
        name = ident
    if not isinstance(name, str):
        raise exceptions.ValidationError("item.name", "must be a string")
    group = raw.get("group") or model.UNGROUPED
    if not isinstance(group, str):
        raise exceptions.ValidationError("item.group", "must be a string")
    options = raw.get("options") or {}
    if not isinstance(options, Mapping):
        raise exceptions.ValidationError("item.options", "must be an object")
    return Item(
        id=ident,
        name=name,
        group=group,
        config=raw.get("config"),
        inputs=_specs("inputs", raw.get("inputs")),
        outputs=_specs("outputs", raw.get("outputs")),
        options=options,
        source=raw,
    )


def resolve(item: Item) -> Item:
    """A ``component`` item resolved to its entry for ``deploy_action``.

    The entry's ``config`` and ``tool`` replace the item's ``config`` and
    ``group``, as Heat's agent does.  Any other item is returned as is.  A
    component without an entry for its action is a ValidationError (Heat's
    agent skips it silently, and the deployment waits for ever).
    """
    if item.group != model.COMPONENT:
        return item
    body = item.config
    entries = body.get("configs") if isinstance(body, Mapping) else None
    if not isinstance(entries, list):
        raise exceptions.ValidationError(
            "item.config", "a component config must be an object with a 'configs' list"
        )
    action = item.action
    if action is None:
        raise exceptions.ValidationError(
            "item.inputs", f"a component config needs {derive.DEPLOY_ACTION}"
        )
    handled: list[str] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise exceptions.ValidationError(
                f"item.config.configs[{i}]", "must be an object"
            )
        actions = entry.get("actions", list(model.DEFAULT_COMPONENT_ACTIONS))
        if not isinstance(actions, list):
            raise exceptions.ValidationError(
                f"item.config.configs[{i}].actions", "must be a list"
            )
        handled.extend(str(a) for a in actions)
        if action not in actions:
            continue
        tool = entry.get("tool")
        if not isinstance(tool, str) or not tool:
            raise exceptions.ValidationError(
                f"item.config.configs[{i}].tool", "missing or not a string"
            )
        source = {**item.source, "group": tool, "config": entry.get("config")}
        return dataclasses.replace(
            item, group=tool, config=entry.get("config"), source=source
        )
    raise exceptions.ValidationError(
        "item.config",
        f"component config {item.name} has no entry for action {action} "
        f"(it handles {', '.join(handled) or 'nothing'})",
    )


def _specs(field: str, raw: Any) -> tuple[Mapping[str, Any], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise exceptions.ValidationError(f"item.{field}", "must be a list")
    for i, spec in enumerate(raw):
        if not isinstance(spec, Mapping):
            raise exceptions.ValidationError(
                f"item.{field}[{i}]", f"must be an object, not {_kind(spec)}"
            )
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            raise exceptions.ValidationError(
                f"item.{field}[{i}].name", "missing or not a string"
            )
    return tuple(raw)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _kind(value: Any) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        int: "a number",
        float: "a number",
        bool: "a boolean",
        type(None): "null",
    }.get(type(value), type(value).__name__)
