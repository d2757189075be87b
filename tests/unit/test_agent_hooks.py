"""Hooks: the script hook, executable hooks, plug-ins, time limits."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from swflows.agent import hooks, items, process, state


@pytest.fixture
def context(tmp_path: Path) -> hooks.HookContext:
    sd = state.StateDir(tmp_path / "state")
    sd.prepare()
    return hooks.HookContext(
        state=sd, stop=threading.Event(), env={"PATH": "/usr/bin:/bin"}
    )


def script_item(
    script: str, inputs: list[dict[str, Any]] | None = None, **kw: Any
) -> items.Item:
    raw = {
        "id": "c1",
        "name": "app",
        "group": "script",
        "config": script,
        "inputs": inputs or [],
        "outputs": kw.pop("outputs", [{"name": "result"}]),
        **kw,
    }
    return items.parse_item(raw)


def run(item: items.Item, context: hooks.HookContext) -> dict[str, Any]:
    return hooks.ScriptHook().run(item, context)


class TestScriptHook:
    def test_inputs_outputs_and_streams(self, context: hooks.HookContext) -> None:
        script = (
            "#!/bin/sh\n"
            'echo "foo=$foo n=$n flag=$flag none=[$none] list=$list"\n'
            'echo "to stderr" >&2\n'
            'printf %s "$foo-$n" > $heat_outputs_path.result\n'
            "exit 0\n"
        )
        inputs: list[dict[str, Any]] = [
            {"name": "foo", "value": "bar baz"},
            {"name": "n", "type": "Number", "value": 3},
            {"name": "flag", "type": "Boolean", "value": True},
            {"name": "none", "value": None},
            {"name": "list", "type": "Json", "value": {"a": [1]}},
        ]
        payload = run(script_item(script, inputs), context)
        assert payload == {
            "result": "bar baz-3",
            "deploy_stdout": 'foo=bar baz n=3 flag=true none=[] list={"a": [1]}\n',
            "deploy_stderr": "to stderr\n",
            "deploy_status_code": 0,
        }
        assert list(payload) == [  # Heat's order: outputs first
            "result",
            "deploy_stdout",
            "deploy_stderr",
            "deploy_status_code",
        ]
        # nothing left behind: script, outputs, captured streams
        for sub in ("scripts", "outputs", "work"):
            assert list((context.state.root / sub).iterdir()) == [], sub

    def test_failure_keeps_outputs_written(self, context: hooks.HookContext) -> None:
        script = (
            "#!/bin/sh\n"
            "echo partial > $heat_outputs_path.result\n"
            "echo oops >&2\n"
            "exit 3\n"
        )
        payload = run(script_item(script), context)
        assert payload["deploy_status_code"] == 3
        assert payload["deploy_stderr"] == "oops\n"
        assert payload["result"] == "partial\n"

    def test_missing_output_is_left_out(self, context: hooks.HookContext) -> None:
        payload = run(script_item("#!/bin/sh\n"), context)
        assert "result" not in payload and payload["deploy_status_code"] == 0

    def test_stale_outputs_of_an_interrupted_run_are_removed(
        self, context: hooks.HookContext
    ) -> None:
        stale = context.state.outputs_path("c1")
        stale.with_name(f"{stale.name}.result").write_text("stale")
        payload = run(script_item("#!/bin/sh\n"), context)
        assert "result" not in payload

    def test_unsafe_output_names_are_not_paths(
        self, context: hooks.HookContext
    ) -> None:
        item = script_item("#!/bin/sh\n", outputs=[{"name": "../../x"}, {"name": "ok"}])
        payload = run(item, context)
        assert "../../x" not in payload

    def test_output_that_is_a_fifo_is_not_read(
        self, context: hooks.HookContext
    ) -> None:
        script = "#!/bin/sh\nmkfifo $heat_outputs_path.result\n"
        payload = run(script_item(script), context)
        assert "result" not in payload and payload["deploy_status_code"] == 0

    def test_no_interpreter_line(self, context: hooks.HookContext) -> None:
        payload = run(script_item("echo hi\n"), context)
        assert payload["deploy_status_code"] == hooks.CANNOT_RUN
        assert "cannot run" in payload["deploy_stderr"]

    def test_config_must_be_text(self, context: hooks.HookContext) -> None:
        payload = run(script_item({"a": 1}), context)  # type: ignore[arg-type]
        assert payload["deploy_status_code"] == hooks.BAD_ITEM

    def test_killed_by_a_signal(self, context: hooks.HookContext) -> None:
        payload = run(script_item("#!/bin/sh\nkill -9 $$\n"), context)
        assert payload["deploy_status_code"] == 137

    def test_time_limit(self, context: hooks.HookContext) -> None:
        context.timeout = 0.3
        started = time.monotonic()
        payload = run(script_item("#!/bin/sh\necho before\nsleep 30\n"), context)
        assert time.monotonic() - started < 10
        assert payload["deploy_status_code"] == hooks.TIMED_OUT
        assert payload["deploy_stdout"] == "before\n"
        assert "ran over 0.3 s" in payload["deploy_stderr"]

    def test_stop_interrupts(self, context: hooks.HookContext) -> None:
        threading.Timer(0.3, context.stop.set).start()
        with pytest.raises(process.Interrupted):
            run(script_item("#!/bin/sh\nsleep 30\n"), context)

    def test_huge_output_keeps_its_end(self, context: hooks.HookContext) -> None:
        context.keep = 1000
        script = "#!/bin/sh\nhead -c 100000 /dev/zero | tr '\\0' a\necho END\n"
        payload = run(script_item(script), context)
        assert len(payload["deploy_stdout"]) == 1000
        assert payload["deploy_stdout"].endswith("aEND\n")

    def test_background_child_does_not_hang(self, context: hooks.HookContext) -> None:
        started = time.monotonic()
        payload = run(script_item("#!/bin/sh\nsleep 5 &\necho done\n"), context)
        assert time.monotonic() - started < 4
        assert payload["deploy_stdout"] == "done\n"


def test_input_env_conversions() -> None:
    item = script_item(
        "",
        [
            {"name": "s", "value": "x"},
            {"name": "f", "value": 1.5},
            {"name": "b", "value": False},
            {"name": "l", "value": ["a", "b"]},
            {"name": "bad=name", "value": "x"},
            {"name": "nul", "value": "a\x00b"},
        ],
    )
    assert hooks.input_env(item) == {
        "s": "x",
        "f": "1.5",
        "b": "false",
        "l": '["a", "b"]',
    }


class TestRegistry:
    def test_builtins(self) -> None:
        found = hooks.Hooks(entry_points=False)
        assert isinstance(found.find("script"), hooks.ScriptHook)
        assert isinstance(found.find("Heat::Ungrouped"), hooks.ScriptHook)
        assert found.find("puppet") is None
        assert found.known() == ["Heat::Ungrouped", "script"]

    def test_given_hooks_win(self) -> None:
        class Mine(hooks.Hook):
            def run(
                self, item: items.Item, context: hooks.HookContext
            ) -> dict[str, Any]:
                return {"deploy_status_code": 0}

        mine = Mine()
        found = hooks.Hooks({"script": mine, "salt": mine}, entry_points=False)
        assert found.find("script") is mine and found.find("salt") is mine

    def test_entry_points(self, monkeypatch: pytest.MonkeyPatch) -> None:
        class Plugin:
            name = "ansible"
            value = "pkg:Hook"

            @staticmethod
            def load() -> type[hooks.Hook]:
                return hooks.ScriptHook

        monkeypatch.setattr(hooks, "_entry_points", lambda: [Plugin()])
        found = hooks.Hooks()
        assert isinstance(found.find("ansible"), hooks.ScriptHook)
        assert "ansible" in found.known()

    def test_broken_entry_point_raises(self, monkeypatch: pytest.MonkeyPatch) -> None:
        class Plugin:
            name = "ansible"
            value = "pkg:thing"

            @staticmethod
            def load() -> object:
                return object()

        monkeypatch.setattr(hooks, "_entry_points", lambda: [Plugin()])
        with pytest.raises(TypeError, match="not a Hook"):
            hooks.Hooks().find("ansible")

    def test_executable_hooks_in_dirs(
        self, tmp_path: Path, context: hooks.HookContext
    ) -> None:
        folder = tmp_path / "hooks"
        folder.mkdir()
        # a hook as Heat runs them: the item as JSON on stdin, the signal on stdout
        (folder / "echo-json").write_text(
            "#!/usr/bin/env python3\n"
            "import json, sys\n"
            "item = json.load(sys.stdin)\n"
            "print(json.dumps({'result': item['config'], 'deploy_stdout': 'x'}))\n"
        )
        (folder / "echo-json").chmod(0o755)
        (folder / "plain").write_text("#!/bin/sh\ncat >/dev/null\necho plain; exit 4\n")
        (folder / "plain").chmod(0o755)
        (folder / "not-exec").write_text("#!/bin/sh\n")
        found = hooks.Hooks(
            hook_dirs=[tmp_path / "missing", folder], entry_points=False
        )
        assert found.find("not-exec") is None
        # as Heat names hook files: characters but letters, digits, - and _
        # are dropped, so a group never points outside the hook folders
        assert found.find("../hooks/plain") is None  # "hooksplain"
        assert found.find("../..") is None
        assert isinstance(found.find("pl:ain"), hooks.ExecutableHook)
        assert found.known() == ["Heat::Ungrouped", "echo-json", "plain", "script"]

        hook = found.find("echo-json")
        assert isinstance(hook, hooks.ExecutableHook)
        item = script_item("payload", group="echo-json")
        assert hook.run(item, context) == {
            "result": "payload",
            "deploy_stdout": "x",
            "deploy_status_code": 0,
        }
        plain = found.find("plain")
        assert plain is not None
        assert plain.run(item, context) == {
            "deploy_stdout": "plain\n",
            "deploy_stderr": "",
            "deploy_status_code": 4,
        }


def test_failure_payload() -> None:
    assert hooks.failure(127, "no hook") == {
        "deploy_stdout": "",
        "deploy_stderr": "no hook\n",
        "deploy_status_code": 127,
    }
    assert json.dumps(hooks.failure(1, "x\n"))


class TestCancel:
    """A cancel stops the hook's whole process group: SIGTERM, then SIGKILL."""

    @staticmethod
    def alive(pid: int) -> bool:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"

    def test_sigterm_stops_the_group(
        self, context: hooks.HookContext, tmp_path: Path
    ) -> None:
        pids = tmp_path / "pids"
        script = f"#!/bin/sh\nsleep 600 &\necho $! > {pids}\nwait\n"
        threading.Timer(0.5, context.cancel.set).start()
        started = time.monotonic()
        with pytest.raises(process.Cancelled) as caught:
            run(script_item(script), context)
        assert time.monotonic() - started < 5
        assert caught.value.how == "SIGTERM"
        assert not self.alive(int(pids.read_text()))
        for sub in ("scripts", "outputs", "work"):
            assert list((context.state.root / sub).iterdir()) == [], sub

    def test_sigkill_after_the_grace(
        self, context: hooks.HookContext, tmp_path: Path
    ) -> None:
        pids = tmp_path / "pids"
        # an ignored signal stays ignored in children: nobody heeds SIGTERM
        script = f"#!/bin/sh\ntrap '' TERM\nsleep 600 &\necho $! > {pids}\nwait\n"
        context.grace = 0.5
        threading.Timer(0.5, context.cancel.set).start()
        started = time.monotonic()
        with pytest.raises(process.Cancelled) as caught:
            run(script_item(script), context)
        took = time.monotonic() - started
        assert 1.0 <= took < 5
        assert caught.value.how == "SIGTERM, then SIGKILL after 0.5 s"
        assert not self.alive(int(pids.read_text()))

    def test_executable_hook_is_cancelled_too(
        self, context: hooks.HookContext, tmp_path: Path
    ) -> None:
        path = tmp_path / "slow"
        path.write_text("#!/bin/sh\nsleep 600\n")
        path.chmod(0o755)
        threading.Timer(0.3, context.cancel.set).start()
        with pytest.raises(process.Cancelled):
            hooks.ExecutableHook(path).run(script_item(""), context)


def test_heat_hook_programs_get_string_inputs_as_text() -> None:
    inputs: list[dict[str, Any]] = [
        {"name": "none", "type": "String", "value": None},
        {"name": "flag", "type": "String", "value": True},
        {"name": "map", "type": "String", "value": {"a": 1}},
        {"name": "text", "type": "String", "value": "t"},
        {"name": "port", "type": "Number", "value": 8080},
        {"name": "bare", "type": "String"},
    ]
    source = {"id": "x", "group": "puppet", "inputs": inputs}
    got = {i["name"]: i.get("value", "-") for i in hooks.heat_item(source)["inputs"]}
    # as heat-agents' 55-heat-config: Python's str() of what is not text
    assert got == {
        "none": "None",
        "flag": "True",
        "map": "{'a': 1}",
        "text": "t",
        "port": 8080,
        "bare": "-",
    }
    assert inputs[0]["value"] is None  # the item is not changed
