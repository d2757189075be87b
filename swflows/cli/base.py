"""What every ``swflows`` command shares: the Swflows it talks to, errors
as one line with their exit status, and table cells for nested values."""

from __future__ import annotations

import abc
import argparse
import json
import re
import signal
import threading
import traceback
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from cliff import columns, command, lister, show

from swflows import exceptions, stopping
from swflows.cli import parsing
from swflows.cli.parsing import ExitCode

if TYPE_CHECKING:
    from swflows.api import Swflows

#: errors that are the caller's to fix: exit status 2
BAD_INPUT_ERRORS: tuple[type[BaseException], ...] = (
    exceptions.ValidationError,
    exceptions.NotFound,
    exceptions.NotSupported,
    exceptions.InvalidTransition,
    exceptions.ConfigInUse,
    exceptions.ServerInUse,
    exceptions.GroupBusy,
    exceptions.Forbidden,
)


class JsonColumn(columns.FormattableColumn[Any]):
    """A nested value: compact JSON in a table, itself in json and yaml."""

    def human_readable(self) -> str:
        return json.dumps(self._value, sort_keys=True, default=str)

    def machine_readable(self) -> Any:
        return self._value


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT: how a long-running command
    (``engine``, ``conductor``) learns to stop cleanly."""
    stop = threading.Event()
    stopping.stop_on_signals(stop, (signal.SIGTERM, signal.SIGINT))
    return stop


#: control characters a terminal acts on (newline and tab are kept: a
#: config's body is shown with its lines)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` with its control characters escaped (ESC as ``\\x1b``)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def cell(value: Any) -> Any:
    if isinstance(value, Mapping | list | tuple):
        return JsonColumn(value)
    return value


#: output formats whose own encoding escapes control characters
ENCODED_FORMATS = frozenset({"json", "yaml"})


def shown(value: Any, formatter: str) -> Any:
    """A cell as printed in ``formatter``: text escaped for the terminal
    (a name stored with ESC codes must not drive it), unless the format
    encodes it (json, yaml keep the value as stored)."""
    if isinstance(value, str) and formatter not in ENCODED_FORMATS:
        return terminal_safe(value)
    return value


def row(data: Mapping[str, Any], names: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(cell(data.get(name)) for name in names)


def one_line_errors(parser: argparse.ArgumentParser, stderr: Any) -> None:
    """Have ``parser`` report a bad argument in one line and exit 2, not
    with its usage block (``swflows help COMMAND`` shows that)."""
    hint = help_hint(parser.prog)

    def error(message: str) -> NoReturn:
        stderr.write(f"swflows: error: {message} (see: {hint})\n")
        raise SystemExit(int(ExitCode.BAD_INPUT))

    parser.error = error  # type: ignore[method-assign]


def help_hint(prog: str) -> str:
    """Where the usage of ``prog`` (``swflows deployment create``, or the
    program itself) is shown: ``swflows help deployment create``."""
    program, _, command_name = prog.partition(" ")
    return f"{program} help {command_name}".rstrip()


class _Errors:
    """Run ``take_action`` turning swflows' errors into one line and a status."""

    app: Any

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = super().get_parser(prog_name)  # type: ignore[misc]
        one_line_errors(parser, self.app.stderr)
        return parser

    def _generate_columns_and_selector(
        self, parsed_args: argparse.Namespace, column_names: Any
    ) -> Any:
        """cliff's column selection, where an unknown ``-c`` is bad input
        (cliff drops it, or fails with a message of its own)."""
        normal = self._normalize_column_name  # type: ignore[attr-defined]
        known = {normal(name) for name in column_names}
        unknown = [c for c in parsed_args.columns or () if normal(c) not in known]
        if unknown:
            raise parsing.BadInput(
                "-c/--column",
                f"unknown column {', '.join(map(repr, unknown))} "
                f"(columns: {', '.join(map(str, column_names))})",
            )
        return super()._generate_columns_and_selector(  # type: ignore[misc]
            parsed_args, column_names
        )

    def _guarded(self, run: Any, parsed_args: argparse.Namespace) -> int:
        try:
            result = run(parsed_args)
        except BAD_INPUT_ERRORS as exc:
            return self._fail(exc, ExitCode.BAD_INPUT)
        except exceptions.WaitTimeout as exc:
            return self._fail(exc, ExitCode.TIMED_OUT)
        except exceptions.SwflowsError as exc:
            return self._fail(exc, ExitCode.ERROR)
        return int(result or 0) or int(getattr(self, "exit_status", 0))

    def _fail(self, exc: BaseException, code: ExitCode) -> int:
        if self.app.options.debug:
            traceback.print_exception(exc, file=self.app.stderr)
        self.app.stderr.write(f"swflows: error: {terminal_safe(str(exc))}\n")
        return int(code)

    @property
    def ctx(self) -> Any:
        """The request context of ``--scoped`` (None without it)."""
        return self.app.request_context()

    @property
    def sw(self) -> Swflows:
        return self.app.swflows(resume=False)  # type: ignore[no-any-return]


class Command(_Errors, command.Command, metaclass=abc.ABCMeta):
    """A command printing what it did, not a table."""

    def run(self, parsed_args: argparse.Namespace) -> int:
        return self._guarded(super().run, parsed_args)


class Lister(_Errors, lister.Lister, metaclass=abc.ABCMeta):
    def run(self, parsed_args: argparse.Namespace) -> int:
        return self._guarded(super().run, parsed_args)

    def produce_output(
        self, parsed_args: argparse.Namespace, column_names: Any, data: Any
    ) -> int:
        form = parsed_args.formatter
        rows = (tuple(shown(value, form) for value in row) for row in data)
        return int(super().produce_output(parsed_args, column_names, rows))


class ShowOne(_Errors, show.ShowOne, metaclass=abc.ABCMeta):
    #: set by take_action: the status to exit with after the output
    exit_status: int = 0

    def run(self, parsed_args: argparse.Namespace) -> int:
        return self._guarded(super().run, parsed_args)

    def produce_output(
        self, parsed_args: argparse.Namespace, column_names: Any, data: Any
    ) -> int:
        form = parsed_args.formatter
        values = tuple(shown(value, form) for value in data)
        return int(super().produce_output(parsed_args, column_names, values))


def add_all_projects(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--all-projects",
        action="store_true",
        help="with --scoped: every project's, not the login's (admins only)",
    )


def fields(data: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """A ShowOne's columns and values, nested values as JSON cells."""
    names = tuple(data)
    return names, row(data, names)


__all__ = ["Command", "Lister", "ShowOne", "fields", "parsing", "row"]
