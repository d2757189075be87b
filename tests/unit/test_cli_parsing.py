"""The command line's pure parts: --input-value, --timeout, exit statuses."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from swflows import states
from swflows.cli import main, parsing
from swflows.cli.parsing import ExitCode


def test_input_values() -> None:
    assert parsing.parse_input_values(["a=1", "b=x=y", "c=", " d =v", "a=2"]) == {
        "a": "2",
        "b": "x=y",
        "c": "",
        "d": "v",
    }
    assert parsing.parse_input_values(None) == {}


@pytest.mark.parametrize("bad", ["novalue", "=v", " =v", ""])
def test_malformed_input_value(bad: str) -> None:
    with pytest.raises(parsing.BadInput, match="--input-value"):
        parsing.parse_input_values([bad])


def test_timeout_in_minutes() -> None:
    assert parsing.minutes_to_seconds(None) is None
    assert parsing.minutes_to_seconds(2) == 120
    with pytest.raises(parsing.BadInput, match="--timeout"):
        parsing.minutes_to_seconds(0)


def deployment(status: str, kind: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(status=status, reason={"kind": kind} if kind else None)


@pytest.mark.parametrize(
    ("dep", "code"),
    [
        (None, ExitCode.OK),
        (deployment(states.COMPLETE, "outputs_received"), ExitCode.OK),
        (deployment(states.IN_PROGRESS), ExitCode.OK),
        (deployment(states.FAILED, "exit_code"), ExitCode.FAILED),
        (deployment(states.FAILED, "error_output"), ExitCode.FAILED),
        (deployment(states.FAILED), ExitCode.FAILED),
        (deployment(states.FAILED, "timeout"), ExitCode.TIMED_OUT),
        (deployment(states.FAILED, "never_picked_up"), ExitCode.TIMED_OUT),
        (deployment(states.FAILED, "cancelled"), ExitCode.CANCELLED),
    ],
)
def test_exit_code(dep: SimpleNamespace | None, code: ExitCode) -> None:
    assert parsing.exit_code(dep) == code


def test_exit_codes_are_distinct() -> None:
    assert len({int(c) for c in ExitCode}) == len(ExitCode)
    assert int(ExitCode.BAD_INPUT) == 2


def test_definition_and_config_files(tmp_path: Path) -> None:
    definition = tmp_path / "def.yaml"
    definition.write_text("inputs:\n- name: foo\noutputs:\n- name: result\n")
    assert parsing.read_definition(str(definition)) == {
        "inputs": [{"name": "foo"}],
        "outputs": [{"name": "result"}],
    }
    definition.write_text("input: []\n")
    with pytest.raises(parsing.BadInput, match="unknown keys input"):
        parsing.read_definition(str(definition))
    with pytest.raises(parsing.BadInput, match="--definition-file: cannot read"):
        parsing.read_definition(str(tmp_path / "missing.yaml"))
    body = tmp_path / "component.yaml"
    body.write_text("configs:\n- {actions: [CREATE], tool: script, config: x}\n")
    assert parsing.read_config_body(str(body), "script").startswith("configs:")
    assert parsing.read_config_body(str(body), "component") == {
        "configs": [{"actions": ["CREATE"], "tool": "script", "config": "x"}]
    }


def test_global_options_end_at_the_command() -> None:
    app = main.SwflowsApp()
    parser = app.build_option_parser("d", "v")
    known, rest = parser.parse_known_args(
        ["--config-file", "a.conf", "--debug", "config", "create", "--config-file", "s"]
    )
    assert known.swflows_config == ["a.conf"] and known.debug
    assert rest == ["config", "create", "--config-file", "s"]
    known, rest = parser.parse_known_args(["--config-file=b", "flow", "list"])
    assert known.swflows_config == ["b"] and rest == ["flow", "list"]


# found by tests/unit/test_fuzz_cli.py
@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"\x80inputs: []\n", "not UTF-8 text"),
        (b"[" * 1200 + b"]" * 1200, "nests too deeply"),
        (b"1: a\nb: c\n", "unknown keys 1, b"),
    ],
)
def test_definition_files_that_cannot_be_used(
    tmp_path: Path, content: bytes, match: str
) -> None:
    path = tmp_path / "def.yaml"
    path.write_bytes(content)
    with pytest.raises(parsing.BadInput, match=match) as exc:
        parsing.read_definition(str(path))
    assert exc.value.field == "--definition-file"


def test_config_files_that_cannot_be_used(tmp_path: Path) -> None:
    path = tmp_path / "body"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(parsing.BadInput, match=r"--config-file: .* not UTF-8"):
        parsing.read_config_body(str(path), "script")
    path.write_bytes(b"configs: " + b"[" * 1200)
    with pytest.raises(parsing.BadInput, match=r"nests too deeply|not YAML"):
        parsing.read_config_body(str(path), "component")


# found by tests/unit/test_fuzz_cli.py
@pytest.mark.parametrize("argv", [["-v"], ["--debug", "-q"], ["--config-file", "x"]])
def test_global_options_alone_show_the_help(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_shell(self: main.SwflowsApp) -> None:
        raise AssertionError("an interactive shell was started")

    monkeypatch.setattr(main.SwflowsApp, "interact", no_shell)
    assert main.main(argv) == 0
    assert "deployment create" in capsys.readouterr().out
