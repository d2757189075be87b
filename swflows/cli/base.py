"""What every ``swflows`` command shares: the Swflows it talks to, errors
as one line with their exit status, and table cells for nested values."""

from __future__ import annotations

import abc
import argparse
import json
import traceback
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cliff import columns, command, lister, show

from swflows import exceptions
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
)


class JsonColumn(columns.FormattableColumn[Any]):
    """A nested value: compact JSON in a table, itself in json and yaml."""

    def human_readable(self) -> str:
        return json.dumps(self._value, sort_keys=True, default=str)

    def machine_readable(self) -> Any:
        return self._value


def cell(value: Any) -> Any:
    if isinstance(value, Mapping | list | tuple):
        return JsonColumn(value)
    return value


def row(data: Mapping[str, Any], names: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(cell(data.get(name)) for name in names)


class _Errors:
    """Run ``take_action`` turning swflows' errors into one line and a status."""

    app: Any

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
        self.app.stderr.write(f"swflows: error: {exc}\n")
        return int(code)

    @property
    def sw(self) -> Swflows:
        return self.app.swflows(resume=False)  # type: ignore[no-any-return]


def _column_key(name: str) -> str:
    return name.lower().strip().replace(" ", "_")


class _Columns:
    """Refuse ``-c`` naming no column as bad input (cliff's own check ends
    in a bare ValueError, exit status 1)."""

    def produce_output(
        self, parsed_args: argparse.Namespace, column_names: Any, data: Any
    ) -> int:
        requested = {_column_key(c) for c in getattr(parsed_args, "columns", ()) or ()}
        if requested and not requested & {_column_key(c) for c in column_names}:
            raise parsing.BadInput(
                "--column",
                f"no column {', '.join(parsed_args.columns)}; "
                f"the columns are {', '.join(column_names)}",
            )
        return super().produce_output(  # type: ignore[misc,no-any-return]
            parsed_args, column_names, data
        )


class Command(_Errors, command.Command, metaclass=abc.ABCMeta):
    """A command printing what it did, not a table."""

    def run(self, parsed_args: argparse.Namespace) -> int:
        return self._guarded(super().run, parsed_args)


class Lister(_Errors, _Columns, lister.Lister, metaclass=abc.ABCMeta):
    def run(self, parsed_args: argparse.Namespace) -> int:
        return self._guarded(super().run, parsed_args)


class ShowOne(_Errors, _Columns, show.ShowOne, metaclass=abc.ABCMeta):
    #: set by take_action: the status to exit with after the output
    exit_status: int = 0

    def run(self, parsed_args: argparse.Namespace) -> int:
        return self._guarded(super().run, parsed_args)


def fields(data: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """A ShowOne's columns and values, nested values as JSON cells."""
    names = tuple(data)
    return names, row(data, names)


__all__ = ["Command", "Lister", "ShowOne", "fields", "parsing", "row"]
