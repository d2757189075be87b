"""Hooks: what runs a derived config, chosen by its group.

A hook takes one item and returns its final signal: the declared outputs
plus ``deploy_stdout``, ``deploy_stderr`` and ``deploy_status_code``.
Built in: ``script`` (also ``Heat::Ungrouped``, which Heat's agent has no
hook for).  ``component`` items are resolved to their entry's tool before
a hook is looked up (:func:`swflows.agent.items.resolve`).  Others come
from, in this order: hooks given to :class:`Hooks`, the
``swflows.agent_hooks`` entry points (name = group), the built-ins, then
an executable named like the group in one of the hook directories, run
the way Heat's ``55-heat-config`` runs its hooks (the item as JSON on
stdin, the signal as JSON on stdout), so Heat's own hooks (puppet,
ansible, ...) work unchanged.
"""

from __future__ import annotations

import abc
import dataclasses
import importlib.metadata
import json
import logging
import os
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from swflows import model, signals
from swflows.agent import process
from swflows.agent.items import Item
from swflows.agent.state import StateDir, write_atomic

LOG = logging.getLogger(__name__)

ENTRY_POINTS: Final = "swflows.agent_hooks"

#: ``deploy_status_code`` of a run that timed out (as ``timeout(1)``)
TIMED_OUT: Final = 124
#: the script could not be executed (no interpreter line, not executable)
CANNOT_RUN: Final = 126
#: no hook for the item's group (as a shell's "command not found")
NO_HOOK: Final = 127
#: the item is malformed: the agent cannot tell what to run
BAD_ITEM: Final = 65
#: the hook itself failed (a plug-in raised, a hook printed no signal)
HOOK_FAILED: Final = 70

SCRIPT: Final = "script"
_EXECUTABLE_NAME: Final = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_-]")
_ENV_NAME: Final = re.compile(r"^[^=\x00]+$")


def failure(code: int, message: str, stdout: str = "") -> dict[str, Any]:
    """A final signal for a run that failed before or around its hook."""
    return {
        model.DEPLOY_STDOUT: stdout,
        model.DEPLOY_STDERR: message if message.endswith("\n") else message + "\n",
        model.DEPLOY_STATUS_CODE: code,
    }


@dataclasses.dataclass
class HookContext:
    """What a hook may use: the state directory, limits, the stop and
    cancel flags."""

    state: StateDir
    stop: threading.Event
    #: seconds a hook may run; None: no limit
    timeout: float | None = None
    #: set when the item is withdrawn from the metadata (cancelled) while
    #: it runs: the hook must stop (a process is stopped by :meth:`run`)
    cancel: threading.Event = dataclasses.field(default_factory=threading.Event)
    #: seconds between SIGTERM and SIGKILL when a hook's process must stop
    grace: float = process.KILL_GRACE
    #: bytes of stdout/stderr (and of each output file) kept
    keep: int = signals.AGENT_SIGNAL_BYTES
    #: the environment hooks start from
    env: Mapping[str, str] = dataclasses.field(default_factory=lambda: os.environ)

    def run(
        self,
        item: Item,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        stdin: bytes | None = None,
    ) -> process.Finished:
        """Run a hook's process for ``item`` (see :func:`process.run`)."""
        return process.run(
            argv,
            env=env,
            out_base=self.state.work_path(item.id, "hook"),
            stdin=stdin,
            timeout=self.timeout,
            stop=self.stop,
            keep=self.keep,
            cancel=self.cancel,
            grace=self.grace,
        )


class Hook(abc.ABC):
    """Runs items of one group."""

    @abc.abstractmethod
    def run(self, item: Item, context: HookContext) -> dict[str, Any]:
        """Run ``item`` and return its final signal.

        Raise :class:`~swflows.agent.process.Interrupted` (as
        :meth:`HookContext.run` does) when the agent stops mid-run: nothing
        is signalled and the item runs again when the agent restarts.
        Raise :class:`~swflows.agent.process.Cancelled` (as
        :meth:`HookContext.run` does) once ``context.cancel`` is set: the
        item was withdrawn, it is not signalled and never runs again.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class ScriptHook(Hook):
    """Heat's script hook: the config is an executable, inputs are its env.

    Each input becomes an environment variable of its name (maps and lists
    as JSON, booleans ``true``/``false``, no value an empty string), plus
    ``heat_outputs_path``: the script writes output ``<name>`` to the file
    ``$heat_outputs_path.<name>``.  The config is run directly, so it needs
    its ``#!`` line.
    """

    def run(self, item: Item, context: HookContext) -> dict[str, Any]:
        config = "" if item.config is None else item.config
        if not isinstance(config, str):
            return failure(
                BAD_ITEM,
                f"swflows-agent: the config of {item.name} ({item.id}) must be "
                f"text for group {item.group}",
            )
        script = context.state.script_path(item.id)
        outputs = context.state.outputs_path(item.id)
        names = [n for n in item.output_names if _safe_output(n)]
        _remove_outputs(outputs, names)
        write_atomic(script, config, mode=0o700)
        env = {**context.env, **input_env(item), "heat_outputs_path": str(outputs)}
        try:
            try:
                finished = context.run(item, [str(script)], env=env)
            except OSError as exc:
                return failure(
                    CANNOT_RUN,
                    f"swflows-agent: cannot run the config of {item.name} "
                    f"({item.id}): {exc.strerror or exc}",
                )
            payload = _read_outputs(outputs, names, context.keep)
        finally:
            script.unlink(missing_ok=True)
            _remove_outputs(outputs, names)
        payload.update(_result(finished, context.timeout))
        return payload


class ExecutableHook(Hook):
    """A hook program, as Heat runs them: item on stdin, signal on stdout."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"ExecutableHook({str(self.path)!r})"

    def run(self, item: Item, context: HookContext) -> dict[str, Any]:
        stdin = json.dumps(heat_item(item.source)).encode()
        try:
            finished = context.run(item, [str(self.path)], env=context.env, stdin=stdin)
        except OSError as exc:
            return failure(
                CANNOT_RUN,
                f"swflows-agent: cannot run hook {self.path}: {exc.strerror or exc}",
            )
        try:
            answer = json.loads(finished.stdout) if not finished.timed_out else None
        except ValueError:
            answer = None
        if isinstance(answer, dict):
            answer.setdefault(model.DEPLOY_STATUS_CODE, finished.status_code)
            return answer
        return _result(finished, context.timeout)


class Hooks:
    """Finds the hook for a group (see the module's docstring for the order)."""

    def __init__(
        self,
        hooks: Mapping[str, Hook] | None = None,
        *,
        hook_dirs: Sequence[Path | str] = (),
        entry_points: bool = True,
    ) -> None:
        script = ScriptHook()
        self.builtin: dict[str, Hook] = {SCRIPT: script, model.UNGROUPED: script}
        self.given = dict(hooks or {})
        self.hook_dirs = [Path(d) for d in hook_dirs]
        self._entry_points = entry_points
        self._loaded: dict[str, Hook | None] = {}

    def __repr__(self) -> str:
        return (
            f"Hooks(given={sorted(self.given)}, "
            f"hook_dirs={[str(d) for d in self.hook_dirs]})"
        )

    def find(self, group: str) -> Hook | None:
        """The hook for ``group``, or None.  A plug-in that fails to load raises."""
        if group in self.given:
            return self.given[group]
        plugin = self._plugin(group)
        if plugin is not None:
            return plugin
        if group in self.builtin:
            return self.builtin[group]
        return self._executable(group)

    def known(self) -> list[str]:
        """Every group a hook is known for now (for messages)."""
        names = set(self.given) | set(self.builtin)
        if self._entry_points:
            names |= {ep.name for ep in _entry_points()}
        for folder in self.hook_dirs:
            try:
                names |= {
                    p.name
                    for p in folder.iterdir()
                    if _EXECUTABLE_NAME.match(p.name) and _is_executable(p)
                }
            except OSError:
                continue
        return sorted(names)

    def _plugin(self, group: str) -> Hook | None:
        if not self._entry_points:
            return None
        if group not in self._loaded:
            found: Hook | None = None
            for ep in _entry_points():
                if ep.name == group:
                    obj = ep.load()
                    found = obj() if isinstance(obj, type) else obj
                    if not isinstance(found, Hook):
                        raise TypeError(
                            f"entry point {ep.name} = {ep.value} is not a Hook"
                        )
                    break
            self._loaded[group] = found
        return self._loaded[group]

    def _executable(self, group: str) -> Hook | None:
        # as Heat's agent names hook files: the group without other characters
        name = _UNSAFE.sub("", group)
        if not _EXECUTABLE_NAME.match(name):
            return None
        for folder in self.hook_dirs:
            path = folder / name
            if _is_executable(path):
                return ExecutableHook(path)
        return None


def heat_item(source: Mapping[str, Any]) -> dict[str, Any]:
    """The item as Heat's ``55-heat-config`` hands it to a hook program.

    Heat's chain makes text of every String input whose value is not text
    (Python's ``str``: null becomes ``"None"``, true ``"True"``), and
    Heat's hooks rely on it: the puppet hook puts each value into the
    environment as is.  Inputs of other types pass unchanged.
    """
    payload = dict(source)
    inputs = payload.get("inputs")
    if isinstance(inputs, list):
        payload["inputs"] = [_heat_input(spec) for spec in inputs]
    return payload


def _heat_input(spec: Any) -> Any:
    if (
        isinstance(spec, Mapping)
        and spec.get("type") == "String"
        and "value" in spec
        and not isinstance(spec["value"], str)
    ):
        return {**spec, "value": str(spec["value"])}
    return spec


def input_env(item: Item) -> dict[str, str]:
    """The environment variables a script gets from the item's inputs."""
    env: dict[str, str] = {}
    for name, value in item.values.items():
        text = _env_value(value)
        if not _ENV_NAME.match(name) or "\x00" in text:
            LOG.warning(
                "input %r of %s cannot be an environment variable; left out",
                name[:64],
                item.id,
            )
            continue
        env[name] = text
    return env


def _env_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value)


def _result(finished: process.Finished, timeout: float | None) -> dict[str, Any]:
    stderr = finished.stderr
    code = finished.status_code
    if finished.timed_out:
        if stderr and not stderr.endswith("\n"):
            stderr += "\n"
        stderr += f"swflows-agent: the hook ran over {timeout:g} s and was killed\n"
        code = TIMED_OUT
    return {
        model.DEPLOY_STDOUT: finished.stdout,
        model.DEPLOY_STDERR: stderr,
        model.DEPLOY_STATUS_CODE: code,
    }


def _safe_output(name: str) -> bool:
    return bool(name) and "/" not in name and "\x00" not in name and name != ".."


def _read_outputs(base: Path, names: Sequence[str], keep: int) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name in names:
        path = base.with_name(f"{base.name}.{name}")
        if not path.is_file():  # absent, or a FIFO or device that could block
            continue
        try:
            with path.open("rb") as handle:
                data = handle.read(keep + 1)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            continue
        # too big to signal: the signal trimming replaces it with a note
        found[name] = data.decode("utf-8", errors="replace")
    return found


def _remove_outputs(base: Path, names: Sequence[str]) -> None:
    for name in names:
        base.with_name(f"{base.name}.{name}").unlink(missing_ok=True)


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    return list(importlib.metadata.entry_points(group=ENTRY_POINTS))
