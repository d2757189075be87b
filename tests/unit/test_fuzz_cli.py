"""Fuzzing the command line: any arguments end in a result, a usage error
(exit status 2) or one line ``swflows: error: ...`` with its exit status,
never a traceback or an exception escaping a command.

Commands that only read or check run end to end against a Swflows on a
SQLite store; the others (they would start flows on a cloud) have their
argument parsers fuzzed alone.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from swflows import conf as sw_conf
from swflows import exceptions
from swflows.api import Swflows
from swflows.cli import main, parsing
from swflows.cli.parsing import ExitCode
from swflows.clients.cloud import Clients
from swflows.persistence.store import Store
from tests.unit.fuzzing import case, fuzz, nasty_text

pytestmark = pytest.mark.filterwarnings("ignore:Do not use the .random. module")

words = st.one_of(
    nasty_text,
    st.sampled_from(
        ["", "-", "--", "=", "-1", "0", "5", "x=y", "=v", "k=", "script", "component"]
    ),
    st.integers(-(10**30), 10**30).map(str),
)


# -- the pure helpers ------------------------------------------------------------
@fuzz(600)
@given(pairs=st.one_of(st.none(), st.lists(words, max_size=4)))
def test_input_values(pairs: list[str] | None) -> None:
    case("cli")
    try:
        values = parsing.parse_input_values(pairs)
    except parsing.BadInput as exc:
        assert exc.field == "--input-value"
        return
    for pair in pairs or ():
        assert pair.partition("=")[0].strip() in values
    # what it gives, written back as KEY=VALUE, reads the same
    assert parsing.parse_input_values([f"{k}={v}" for k, v in values.items()]) == values


@fuzz(200)
@given(minutes=st.one_of(st.none(), st.integers(-(10**30), 10**30)))
def test_timeouts(minutes: int | None) -> None:
    case("cli")
    try:
        seconds = parsing.minutes_to_seconds(minutes)
    except parsing.BadInput as exc:
        assert exc.field == "--timeout"
        assert minutes is not None
        assert not 0 < minutes <= parsing.MAX_TIMEOUT_MINUTES
        return
    assert seconds is None if minutes is None else seconds == minutes * 60


file_contents = st.one_of(
    st.binary(max_size=60),
    nasty_text.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from(
        [
            b"inputs:\n- name: foo\noutputs:\n- name: r\n",
            b"1: a\nb: c\n",
            b"? [a]\n: 1\n",
            b"inputs: 5\n",
            b"- a\n- b\n",
            b"[" * 1200 + b"]" * 1200,
            b"configs:\n- {actions: [CREATE], tool: script, config: x}\n",
            b"&a [*a]",
            b"\xff\xfe\x00",
            b"options: {a: .nan}\n",
            b"",
        ]
    ),
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli")


@fuzz(500)
@given(content=file_contents, group=st.sampled_from(["script", "component", "ansible"]))
def test_definition_and_config_files(workdir: Path, content: bytes, group: str) -> None:
    case("cli")
    path = workdir / "file"
    path.write_bytes(content)
    try:
        definition = parsing.read_definition(str(path))
    except parsing.BadInput as exc:
        assert exc.field == "--definition-file"
    else:
        assert set(definition) <= {"inputs", "outputs", "options"}
    try:
        parsing.read_config_body(str(path), group)
    except parsing.BadInput as exc:
        assert exc.field == "--config-file"


# -- every command's arguments ------------------------------------------------------
@functools.cache
def parser_of(name: str) -> Any:
    return main.COMMANDS[name](main.SwflowsApp(), None).get_parser(f"swflows {name}")


def option_strings(parser: Any) -> list[str]:
    return sorted(o for o in parser._option_string_actions if o.startswith("--"))


@st.composite
def command_lines(draw: st.DrawFn, commands: list[str], path: str) -> list[str]:
    """A command's name, then a mix of its options and other words."""
    name = draw(st.sampled_from(commands))
    known = option_strings(parser_of(name))
    token = st.one_of(
        words,
        st.sampled_from(known),
        st.builds(lambda o, w: f"{o}={w}", st.sampled_from(known), words),
        st.sampled_from(["-h", "--help", path, path + ".missing"]),
    )
    return [*name.split(), *draw(st.lists(token, max_size=6))]


ALL_COMMANDS = sorted(main.COMMANDS)


@fuzz(500)
@given(data=st.data())
def test_every_command_parses_or_is_a_usage_error(data: st.DataObject) -> None:
    case("cli")
    argv = data.draw(command_lines(ALL_COMMANDS, "/nonexistent"))
    words_of_name = [w for w in ALL_COMMANDS if argv[: len(w.split())] == w.split()]
    name = max(words_of_name, key=len)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            # made here: the app writes to the stderr it finds when made
            app = main.SwflowsApp()
            parser = main.COMMANDS[name](app, None).get_parser(f"swflows {name}")
            parser.parse_args(argv[len(name.split()) :])
    except SystemExit as exc:
        assert exc.code in (0, 2), exc.code
        if exc.code == 2:
            assert "error:" in err.getvalue()
    assert "Traceback" not in err.getvalue()


# -- end to end ------------------------------------------------------------------
#: commands that only read or check (no flow started, no cloud called)
SAFE_COMMANDS = [
    "config create",
    "config show",
    "config list",
    "config delete",
    "deployment show",
    "deployment list",
    "deployment cancel",
    "deployment output show",
    "deployment metadata show",
    "flow list",
]
GLOBAL_OPTIONS = ["-v", "-q", "--debug", "--config-file", "--config-file=/nonexistent"]


class _App(main.SwflowsApp):
    """The real application, on one shared Swflows, recording what a command
    let escape (cliff logs it as one line and exits 1)."""

    shared: Swflows
    escaped: BaseException | None = None

    def swflows(self, *, resume: bool) -> Any:
        self.config_files()  # --config-file is checked as it is for real
        return self.shared

    def close_swflows(self) -> None:
        pass

    def clean_up(self, cmd: Any, result: int, err: BaseException | None) -> None:
        self.escaped = err
        super().clean_up(cmd, result, err)


@pytest.fixture(scope="module")
def shared(workdir: Path) -> Iterator[Swflows]:
    conf = sw_conf.get_conf()
    conf.set_override("resume_on_start", False, "runner")
    conf.set_override("default_software_config_transport", "POLL_SERVER_HEAT")
    store = Store(f"sqlite:///{workdir / 's.sqlite'}")
    made = Swflows(store, Clients(), conf)
    made.create_config("existing", "#!/bin/sh\n", group="script")
    try:
        yield made
    finally:
        made.close()
        store.close()


def run(shared: Swflows, argv: list[str]) -> tuple[Any, str, _App]:
    """``swflows <argv>``: its exit status, its stderr, the app."""
    app = _App()
    app.shared = shared
    out, err = io.StringIO(), io.StringIO()
    with (
        _logging_kept(),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        app.stdout, app.stderr = out, err
        try:
            result: Any = app.run(argv)
        except SystemExit as exc:
            result = exc.code
            assert result in (0, 2), result
    return result, err.getvalue(), app


# found by test_commands_end_in_a_status_not_a_traceback
@pytest.mark.parametrize("command", [["config", "list"], ["config", "show"]])
def test_an_unknown_column_is_bad_input(
    shared: Swflows, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.delenv("SWFLOWS_CONFIG", raising=False)
    config = shared.create_config("shown", "#!/bin/sh\n", group="script")
    argv = [*command, "-c", "nosuch"]
    if command[1] == "show":
        argv.append(config.id)
    result, text, app = run(shared, argv)
    assert result == ExitCode.BAD_INPUT
    assert "swflows: error: -c/--column: unknown column 'nosuch'" in text
    assert app.escaped is None


@contextlib.contextmanager
def _logging_kept() -> Iterator[None]:
    """cliff adds a handler to the root logger on every run; take it away."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


@fuzz(400)
@given(
    data=st.data(),
    globals_=st.lists(st.sampled_from(GLOBAL_OPTIONS), max_size=2),
    content=file_contents,
)
def test_commands_end_in_a_status_not_a_traceback(
    shared: Swflows,
    workdir: Path,
    monkeypatch: pytest.MonkeyPatch,
    data: st.DataObject,
    globals_: list[str],
    content: bytes,
) -> None:
    case("cli")
    monkeypatch.delenv("SWFLOWS_CONFIG", raising=False)
    monkeypatch.setattr(main, "DEFAULT_CONFIG_FILE", workdir / "none.conf")
    path = workdir / "input"
    path.write_bytes(content)
    ids = [c.id for c in shared.list_configs()][:1]
    argv = data.draw(command_lines(SAFE_COMMANDS, str(path)))
    if ids and bool(data.draw(st.booleans())):
        argv.append(ids[0])
    if not data.draw(st.integers(0, 19)):
        argv = []  # global options alone
    argv = [*globals_, *argv]
    result, text, app = run(shared, argv)
    assert not app.interactive_mode
    event(f"{' '.join(argv[len(globals_) : len(globals_) + 2])}: exit {result}")
    assert result in {int(c) for c in ExitCode}, (result, text)
    assert app.escaped is None or isinstance(app.escaped, exceptions.SwflowsError), (
        repr(app.escaped)
    )
    if "--debug" not in argv:
        assert "Traceback" not in text, text
