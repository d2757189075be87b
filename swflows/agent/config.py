"""The agent's configuration: an INI or JSON file, os-collect-config style.

INI::

    [agent]
    state_dir = /var/lib/swflows-agent
    interval = 30

    [request]
    metadata_url = https://swift.example/v1/AUTH_x/swflows-metadata/<server>?temp_url_sig=...

JSON: the same sections as objects, and the ``os-collect-config`` section
of a server's metadata document may be used as is (``{"collectors":
["zaqar"], "zaqar": {"signed_url": {...}}}``), so an embedder can write it
into the server's user data.  Heat's ``/etc/os-collect-config.conf`` is
read too: its ``[DEFAULT]`` ``collectors``, ``polling_interval``,
``min_polling_interval`` and ``splay``, its ``[request]`` and ``[zaqar]``
sections; other sections are ignored.  Several files may be given; later
ones override earlier ones key by key.
"""

from __future__ import annotations

import configparser
import dataclasses
import json
import logging
import math
import re
import reprlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from swflows import exceptions
from swflows.agent import collectors, notify

LOG = logging.getLogger(__name__)

DEFAULT_CONFIG_FILE: Final = Path("/etc/swflows-agent.conf")
DEFAULT_STATE_DIR: Final = Path("/var/lib/swflows-agent")
#: where Heat's images keep hooks; their hooks serve groups swflows lacks
DEFAULT_HOOK_DIRS: Final = (
    Path("/usr/libexec/heat-config/hooks"),
    Path("/var/lib/heat-config/hooks"),
)

#: os-collect-config's ``[DEFAULT]`` keys -> the agent's
_OCC_DEFAULTS: Final = {
    "collectors": "collectors",
    "polling_interval": "interval",
    "min_polling_interval": "min_interval",
    "splay": "splay",
}
_ZAQAR_CREDENTIALS: Final = (
    "user_id",
    "password",
    "auth_url",
    "project_id",
    "queue_id",
)


@dataclasses.dataclass(frozen=True)
class AgentConfig:
    """Every setting of the agent (see the README's "The agent")."""

    #: markers, pending signals and hook files; must survive a reboot
    state_dir: Path = DEFAULT_STATE_DIR
    #: seconds between polls while nothing changes
    interval: float = 30.0
    #: seconds before the next poll after a change
    min_interval: float = 1.0
    #: the longest wait after failed polls (they back off exponentially)
    max_backoff: float = 300.0
    #: every wait is scaled by a random factor within 1 +- jitter
    jitter: float = 0.2
    #: a random delay of up to this many seconds before the first poll
    splay: float = 0.0
    #: seconds an HTTP request may take
    http_timeout: float = 10.0
    #: seconds a hook may run before it is killed (0: no limit)
    hook_timeout: float = 0.0
    #: seconds between SIGTERM and SIGKILL when a hook's process group must
    #: stop (its item cancelled, over its time limit, or the agent stopping)
    kill_grace: float = 10.0
    #: folders searched for executable hooks, named by group
    hook_dirs: tuple[Path, ...] = DEFAULT_HOOK_DIRS
    #: attempts to deliver a final signal in one go, and their first backoff;
    #: a signal still not delivered is kept and tried again later (doubling
    #: waits), while the agent goes on with the other deployments: one go is
    #: kept short so a slow signal service holds none of them up for long
    notify_attempts: int = 3
    notify_backoff: float = 0.5
    #: attempts for a "started" signal (it is only a hint)
    started_attempts: int = 3
    #: the largest ZAQAR_SIGNAL body (Zaqar's max_messages_post_size)
    zaqar_signal_bytes: int = notify.ZAQAR_SIGNAL_BYTES
    #: HEAT_SIGNAL without a stack: the embedder's signal URL template
    heat_signal_url: str | None = None
    #: collectors to use, in order (the first configured one is used)
    collectors: tuple[str, ...] = ()
    #: os-collect-config's ``request`` section: ``metadata_url``
    request: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: os-collect-config's ``zaqar`` section: ``signed_url``, or credentials
    zaqar: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    log_level: str = "INFO"

    def collector(self) -> tuple[str, Mapping[str, Any]]:
        """The collector to use and its section; ValidationError if none is set."""
        order = [c for c in self.collectors if c in collectors.COLLECTORS]
        order += [c for c in collectors.COLLECTORS if c not in order]
        for name in order:
            section = self.request if name == collectors.REQUEST else self.zaqar
            if name == collectors.REQUEST and section.get("metadata_url"):
                return name, section
            if name == collectors.ZAQAR and (
                section.get("signed_url")
                or all(section.get(k) for k in _ZAQAR_CREDENTIALS)
            ):
                return name, section
        raise exceptions.ValidationError(
            "collectors",
            "no metadata source: set [request] metadata_url, [zaqar] signed_url, "
            "or [zaqar] user_id, password, auth_url, project_id and queue_id",
        )


_FIELDS: Final = {f.name: f for f in dataclasses.fields(AgentConfig)}
_AGENT_KEYS: Final = frozenset(_FIELDS) - {"request", "zaqar", "collectors"}


def load(
    paths: Sequence[Path | str],
    overrides: Mapping[str, Any] | None = None,
    *,
    extra: Mapping[str, Mapping[str, Any]] | None = None,
) -> AgentConfig:
    """Read ``paths`` in order, then ``overrides`` (agent keys) and ``extra``
    sections (``request``, ``zaqar``), and check it all."""
    values: dict[str, Any] = {}
    request: dict[str, Any] = {}
    zaqar: dict[str, Any] = {}
    layers = [read_file(Path(path)) for path in paths]
    if extra:
        layers.append({name: dict(section) for name, section in extra.items()})
    for sections in layers:
        values.update(sections.get("agent", {}))
        request.update(sections.get(collectors.REQUEST, {}))
        zaqar.update(sections.get(collectors.ZAQAR, {}))
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    values["request"] = request
    values["zaqar"] = zaqar
    config = build(values)
    config.collector()
    return config


def read_file(path: Path) -> dict[str, dict[str, Any]]:
    """A file's sections: ``agent`` (agent keys), ``request``, ``zaqar``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise exceptions.ValidationError(
            "config_file", f"cannot read {path}: {exc.strerror or exc}"
        ) from None
    except UnicodeDecodeError:
        raise exceptions.ValidationError(
            "config_file", f"{path} is not UTF-8 text"
        ) from None
    if text.lstrip().startswith("{"):
        return _from_json(path, text)
    return _from_ini(path, text)


def build(values: Mapping[str, Any]) -> AgentConfig:
    """An AgentConfig from raw values (text from INI files is converted)."""
    unknown = sorted(set(values) - set(_FIELDS))
    if unknown:
        raise exceptions.ValidationError(
            "agent", f"unknown option(s) {', '.join(unknown)}"
        )
    kwargs: dict[str, Any] = {}
    for key, raw in values.items():
        kwargs[key] = _convert(key, raw)
    config = AgentConfig(**kwargs)
    if config.interval <= 0:
        raise exceptions.ValidationError("agent.interval", "must be above 0")
    if config.min_interval <= 0:
        raise exceptions.ValidationError("agent.min_interval", "must be above 0")
    if config.jitter >= 1:
        raise exceptions.ValidationError("agent.jitter", "must be below 1")
    if config.notify_attempts < 1 or config.started_attempts < 1:
        raise exceptions.ValidationError("agent.notify_attempts", "must be at least 1")
    if config.zaqar_signal_bytes < 1024:
        raise exceptions.ValidationError(
            "agent.zaqar_signal_bytes", "must be at least 1024"
        )
    if config.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise exceptions.ValidationError(
            "agent.log_level", "must be DEBUG, INFO, WARNING or ERROR"
        )
    if config.zaqar.get("signed_url"):
        signed = collectors.signed_url_value(config.zaqar["signed_url"])
        collectors.messages_path(signed)
        config = dataclasses.replace(
            config, zaqar={**config.zaqar, "signed_url": signed}
        )
    return config


def _from_json(path: Path, text: str) -> dict[str, dict[str, Any]]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise exceptions.ValidationError(
            "config_file", f"{path} is not JSON: {exc}"
        ) from None
    if not isinstance(doc, dict):
        raise exceptions.ValidationError("config_file", f"{path}: must be an object")
    nested = doc.pop("os-collect-config", None)
    if isinstance(nested, dict):
        doc = {**nested, **doc}
    out: dict[str, dict[str, Any]] = {"agent": {}}
    agent = doc.get("agent") or {}
    if not isinstance(agent, dict):
        raise exceptions.ValidationError("agent", f"{path}: must be an object")
    for occ, key in _OCC_DEFAULTS.items():
        if occ in doc:
            out["agent"][key] = doc[occ]
    out["agent"].update(agent)
    for name in (collectors.REQUEST, collectors.ZAQAR):
        section = doc.get(name)
        if section is None:
            continue
        if not isinstance(section, dict):
            raise exceptions.ValidationError(name, f"{path}: must be an object")
        out[name] = dict(section)
    return out


def _from_ini(path: Path, text: str) -> dict[str, dict[str, Any]]:
    # "DEFAULT" is a plain section here: its keys must not leak into others
    parser = configparser.ConfigParser(
        interpolation=None, default_section="\x00none", strict=False
    )
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as exc:
        raise exceptions.ValidationError(
            "config_file", f"{path}: {str(exc).splitlines()[0]}"
        ) from None
    out: dict[str, dict[str, Any]] = {"agent": {}}
    if parser.has_section("DEFAULT"):
        for occ, key in _OCC_DEFAULTS.items():
            if parser.has_option("DEFAULT", occ):
                out["agent"][key] = parser.get("DEFAULT", occ)
    if parser.has_section("agent"):
        out["agent"].update(parser.items("agent"))
    for name in (collectors.REQUEST, collectors.ZAQAR):
        if parser.has_section(name):
            out[name] = dict(parser.items(name))
    return out


def _convert(key: str, raw: Any) -> Any:
    field = f"agent.{key}"
    kind = _FIELDS[key].type
    if key in ("request", "zaqar"):
        if not isinstance(raw, Mapping):
            raise exceptions.ValidationError(key, "must be a section")
        return dict(raw)
    if key == "collectors":
        items = _list(field, raw)
        return tuple(items)
    if key == "hook_dirs":
        return tuple(Path(p) for p in _list(field, raw))
    if key == "state_dir":
        if not isinstance(raw, str | Path) or not str(raw).strip():
            raise exceptions.ValidationError(field, "must be a folder path")
        return Path(raw).expanduser()
    if key in ("heat_signal_url", "log_level"):
        if raw is None or raw == "":
            return None if key == "heat_signal_url" else "INFO"
        if not isinstance(raw, str):
            raise exceptions.ValidationError(field, "must be text")
        return raw
    if kind == "int":
        return _number(field, raw, int)
    return _number(field, raw, float)


def _number(field: str, raw: Any, kind: type[int] | type[float]) -> Any:
    if isinstance(raw, bool):
        raise exceptions.ValidationError(field, "must be a number")
    try:
        value = kind(raw.strip() if isinstance(raw, str) else raw)
        finite = math.isfinite(value)
    except (TypeError, ValueError, OverflowError):
        raise exceptions.ValidationError(
            field, f"must be a number, not {reprlib.repr(raw)}"
        ) from None
    if not finite or value < 0:
        raise exceptions.ValidationError(field, "must be a number of at least 0")
    return value


def _list(field: str, raw: Any) -> list[str]:
    if isinstance(raw, str):
        return [item for item in re.split(r"[\s,]+", raw) if item]
    if isinstance(raw, list | tuple) and all(isinstance(i, str | Path) for i in raw):
        return [str(i) for i in raw]
    raise exceptions.ValidationError(field, "must be a list")
