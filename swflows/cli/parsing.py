"""Pure helpers of the command line: arguments in, exit statuses out."""

from __future__ import annotations

import enum
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from swflows import exceptions, model, states


class ExitCode(enum.IntEnum):
    """The ``swflows`` command's exit statuses."""

    #: done; or started, when not waiting
    OK = 0
    #: an error that is not the caller's input (a cloud or flow failure)
    ERROR = 1
    #: bad input: an unknown id, a malformed argument, a missing file
    BAD_INPUT = 2
    #: the deployment ended FAILED (exit code, error output, …)
    FAILED = 3
    #: the deployment timed out, or its server never picked it up
    TIMED_OUT = 4
    #: the deployment was cancelled
    CANCELLED = 5


#: reason kinds that exit with :attr:`ExitCode.TIMED_OUT`
TIMEOUT_KINDS = frozenset(
    {states.ReasonKind.TIMEOUT, states.ReasonKind.NEVER_PICKED_UP}
)


class BadInput(exceptions.ValidationError):
    """A command-line argument that cannot be used."""


def parse_input_values(pairs: Iterable[str] | None) -> dict[str, str]:
    """``["k=v", ...]`` as a dict; the value is everything after the first ``=``.

    Values stay text, as Heat's client sends them; a later key wins.
    """
    values: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise BadInput("--input-value", f"{pair!r} is not KEY=VALUE")
        values[key] = value
    return values


#: the longest ``--timeout``: :data:`swflows.model.MAX_TIMEOUT` in minutes
MAX_TIMEOUT_MINUTES = model.MAX_TIMEOUT // 60


def minutes_to_seconds(minutes: int | None) -> int | None:
    """``--timeout`` is in minutes, like ``openstack software deployment create``."""
    if minutes is None:
        return None
    if not 0 < minutes <= MAX_TIMEOUT_MINUTES:
        raise BadInput(
            "--timeout",
            f"must be 1 to {MAX_TIMEOUT_MINUTES} minutes "
            f"({model.MAX_TIMEOUT // 86400} days)",
        )
    return minutes * 60


def exit_code(deployment: Any) -> ExitCode:
    """The exit status a deployment's outcome gives (None: it was removed)."""
    if deployment is None or deployment.status != states.FAILED:
        return ExitCode.OK
    kind = (deployment.reason or {}).get("kind")
    if kind in TIMEOUT_KINDS:
        return ExitCode.TIMED_OUT
    if kind == states.ReasonKind.CANCELLED:
        return ExitCode.CANCELLED
    return ExitCode.FAILED


def read_text(path: str, option: str) -> str:
    """A file's text; a missing or unreadable file is bad input."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(option, f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise BadInput(
            option, f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None


def yaml_error(path: str, exc: yaml.YAMLError) -> str:
    """A YAML error in one line: ``FILE:LINE:COLUMN: problem (context)``."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else path
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    said = f"{problem} ({context})" if context else problem
    return f"{where}: not YAML: {' '.join(str(said).split())}"


def check_config_file(path: str) -> str | None:
    """What makes ``path`` unusable as swflows' configuration file (None:
    nothing): missing, or not a regular file (a directory, ``/dev/null``).
    An empty file is usable: every option keeps its default."""
    file = Path(path)
    try:
        mode = file.stat().st_mode
    except FileNotFoundError:
        return f"{path}: no such file"
    except OSError as exc:
        return f"{path}: cannot read it: {exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return None
    return (
        f"{path} is {_FILE_KINDS.get(stat.S_IFMT(mode), 'not a regular file')}, "
        "not a configuration file"
    )


#: what a path that is not a regular file is, by its stat.S_IFMT
_FILE_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a pipe",
    stat.S_IFSOCK: "a socket",
}


def _load_yaml(text: str, path: str, option: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BadInput(option, yaml_error(path, exc)) from None
    except RecursionError:
        raise BadInput(option, f"{path} nests too deeply to be read") from None


def read_definition(path: str) -> dict[str, Any]:
    """A definition file (YAML or JSON): ``inputs``, ``outputs``, ``options``."""
    text = read_text(path, "--definition-file")
    data = _load_yaml(text, path, "--definition-file") or {}
    if not isinstance(data, Mapping):
        raise BadInput("--definition-file", f"{path} must hold a mapping")
    unknown = set(data) - {"inputs", "outputs", "options"}
    if unknown:
        raise BadInput(
            "--definition-file",
            f"{path}: unknown keys {', '.join(sorted(map(str, unknown)))} "
            "(expected inputs, outputs, options)",
        )
    return dict(data)


def read_config_body(path: str, group: str) -> Any:
    """The config's body: text, or for a component a parsed mapping."""
    text = read_text(path, "--config-file")
    if group != "component":
        return text
    return _load_yaml(text, path, "--config-file")
