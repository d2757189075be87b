"""The program's help: ``-h``/``--help`` show its usage and commands, its
name is ``swflows`` however it was started, and error hints name a
command that works."""

from __future__ import annotations

import pytest

from swflows.cli import base, main


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["-v", "--help"], ["help"]])
def test_help_is_the_programs_usage_and_commands(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main.main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: swflows [")
    assert "usage: swflows help" not in out
    assert "deployment create" in out and "config list" in out


def test_a_commands_usage_names_swflows(capsys: pytest.CaptureFixture[str]) -> None:
    # cliff names the program after sys.argv[0]: "cli" under python -m
    # swflows.cli, "pytest" here
    assert main.main(["help", "deployment", "list"]) == 0
    assert capsys.readouterr().out.startswith("usage: swflows deployment list ")


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["deployment", "create", "x"], "(see: swflows help deployment create)"),
        (
            ["deployment", "list", "--status", "NOPE"],
            "(see: swflows help deployment list)",
        ),
        (["deploymnt"], "(see: swflows help)"),
    ],
)
def test_error_hints_point_at_help(
    argv: list[str], hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main.main(argv)
    except SystemExit as exc:  # an argument parser's error
        code = int(str(exc.code))
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.rstrip().endswith(hint), err


def test_the_hint_of_the_program_and_of_a_command() -> None:
    assert base.help_hint("swflows") == "swflows help"
    assert base.help_hint("swflows config create") == "swflows help config create"
