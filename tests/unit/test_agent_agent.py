"""The agent's loop: what runs when, when the marker is written, bad input."""

from __future__ import annotations

import dataclasses
import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swflows import exceptions
from swflows.agent import agent, collectors, config, hooks, items, main, notify
from tests.unit.agent_http import FakeHttp, Seen, fake_http

__all__ = ["fake_http"]


class Documents(collectors.Collector):
    """Hands out the documents a test queues (None: unchanged)."""

    def __init__(self, *docs: Any) -> None:
        self.docs = list(docs)

    def collect(self) -> Any:
        return self.docs.pop(0) if self.docs else None


class Recorder(notify.Notifier):
    """Records signals; fails the first ``fail`` sends with ``error``."""

    def __init__(self, fail: int = 0, error: Exception | None = None) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.fail = fail
        self.error = error or exceptions.CloudError("signal", "down", retryable=True)
        self.calls = 0

    def send(self, target: notify.Target, body: bytes) -> None:
        self.calls += 1
        if self.calls <= self.fail:
            raise self.error
        self.sent.append((target.config_id, json.loads(body)))


class Counting(hooks.Hook):
    def __init__(self, code: int = 0) -> None:
        self.ran: list[str] = []
        self.code = code

    def run(self, item: items.Item, context: hooks.HookContext) -> dict[str, Any]:
        self.ran.append(item.id)
        return {"result": item.values.get("foo"), "deploy_status_code": self.code}


def item(ident: str, group: str = "script", **extra: Any) -> dict[str, Any]:
    inputs = [
        {"name": "foo", "value": f"v-{ident}"},
        {"name": "deploy_action", "value": "CREATE"},
        {"name": "deploy_signal_transport", "value": "TEMP_URL_SIGNAL"},
        {"name": "deploy_signal_id", "value": "http://x/sig"},
        {"name": "deploy_signal_verb", "value": "PUT"},
        {"name": "deploy_signal_started", "value": "true"},
    ]
    return {"id": ident, "name": ident, "group": group, "inputs": inputs, **extra}


def doc(*raw: Any) -> bytes:
    return json.dumps({"deployments": list(raw)}).encode()


def make(
    tmp_path: Path,
    *docs: Any,
    recorder: Recorder | None = None,
    hook: hooks.Hook | None = None,
) -> tuple[agent.Agent, Recorder, hooks.Hook]:
    conf = config.build(
        {
            "state_dir": tmp_path / "state",
            "interval": 0.1,
            "notify_attempts": 2,
            "notify_backoff": 0.001,
            "request": {"metadata_url": "http://unused"},
        }
    )
    recorder = recorder or Recorder()
    hook = hook or Counting()
    made = agent.Agent(
        conf,
        collector=Documents(*docs),
        hooks_=hooks.Hooks({"script": hook}, entry_points=False),
        notifiers=notify.Notifiers(
            {"TEMP_URL_SIGNAL": recorder, "ZAQAR_SIGNAL": recorder},
            entry_points=False,
        ),
        rand=random.Random(1),
    )
    made.state.prepare()
    return made, recorder, hook


def test_runs_each_new_config_once_in_order(tmp_path: Path) -> None:
    a, b = item("a"), item("b")
    ag, rec, hook = make(tmp_path, doc(a), doc(a, b), None)
    assert ag.step()
    assert ag.step()
    assert not ag.step()  # unchanged, nothing due
    assert hook.ran == ["a", "b"]  # type: ignore[attr-defined]
    assert rec.sent == [
        ("a", {"deploy_signal": "started"}),
        ("a", {"result": "v-a", "deploy_status_code": 0}),
        ("b", {"deploy_signal": "started"}),
        ("b", {"result": "v-b", "deploy_status_code": 0}),
    ]
    assert ag.state.deployed() == ["a", "b"]


def test_marker_only_after_the_signal_is_delivered(tmp_path: Path) -> None:
    """A signal that cannot be sent leaves no marker; the hook does not rerun."""
    rec = Recorder(fail=5)  # "started": 3 attempts, final signal: 2 attempts
    ag, rec, hook = make(tmp_path, doc(item("a")), recorder=rec)
    ag.step()
    assert not ag.state.is_deployed("a")
    assert ag.state.pending("a") == {"result": "v-a", "deploy_status_code": 0}
    ag._retry["a"] = (0.0, 1)  # due now
    ag.step()
    assert ag.state.is_deployed("a")
    assert ag.state.pending("a") is None
    assert hook.ran == ["a"]  # type: ignore[attr-defined]
    assert rec.sent == [("a", {"result": "v-a", "deploy_status_code": 0})]


def test_an_undelivered_signal_is_tried_again_later_with_backoff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each failed round doubles the wait before the next try: from twice
    the poll interval up to ``max_backoff``."""
    rec = Recorder(fail=1000)
    ag, rec, _ = make(tmp_path, doc(item("a")), recorder=rec)
    ag.config = dataclasses.replace(ag.config, interval=10.0, max_backoff=300.0)
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    ag.step()
    waits = []
    for _ in range(6):
        due = ag._retry["a"][0]
        waits.append(due - now[0])
        now[0] = due
        ag.step()
    assert waits == [20.0, 40.0, 80.0, 160.0, 300.0, 300.0]
    assert ag._retry["a"][1] == 7


def test_restart_after_the_hook_resends_without_rerunning(tmp_path: Path) -> None:
    ag, rec, hook = make(tmp_path, doc(item("a")))
    ag.state.save_pending("a", {"deploy_status_code": 0, "result": "saved"})
    ag.step()
    assert hook.ran == []  # type: ignore[attr-defined]
    assert rec.sent == [("a", {"deploy_status_code": 0, "result": "saved"})]
    assert ag.state.is_deployed("a")


def test_refused_signal_is_given_up(tmp_path: Path) -> None:
    refused = exceptions.CloudError("signal", "no", status=401)
    ag, _rec, _hook = make(tmp_path, doc(item("a")), recorder=Recorder(9, refused))
    ag.step()
    assert ag.state.is_deployed("a")
    marker = json.loads(ag.state.marker_path("a").read_text())
    assert marker["note"].startswith("signal refused")


def test_unknown_group_signals_failed_naming_it(tmp_path: Path) -> None:
    ag, rec, _ = make(tmp_path, doc(item("a", group="puppet")))
    ag.step()
    [(ident, payload)] = [s for s in rec.sent if "deploy_status_code" in s[1]]
    assert ident == "a"
    assert payload["deploy_status_code"] == hooks.NO_HOOK
    assert "no hook for group 'puppet'" in payload["deploy_stderr"]
    assert ag.state.is_deployed("a")


def test_malformed_item_with_a_target_signals_failed(tmp_path: Path) -> None:
    bad = item("a", outputs="not a list")
    ag, rec, hook = make(tmp_path, doc(bad))
    ag.step()
    assert hook.ran == []  # type: ignore[attr-defined]
    [(_, payload)] = rec.sent  # no "started": nothing runs
    assert payload["deploy_status_code"] == hooks.BAD_ITEM
    assert "item.outputs" in payload["deploy_stderr"]


def test_component_without_entry_signals_failed(tmp_path: Path) -> None:
    comp = item(
        "a",
        group="component",
        config={"configs": [{"actions": ["X"], "tool": "script"}]},
    )
    ag, rec, _ = make(tmp_path, doc(comp))
    ag.step()
    assert "no entry for action CREATE" in rec.sent[-1][1]["deploy_stderr"]


def test_component_resolves_to_its_tool(tmp_path: Path) -> None:
    comp = item(
        "a",
        group="component",
        config={"configs": [{"actions": ["CREATE"], "config": "x", "tool": "script"}]},
    )
    ag, _rec, hook = make(tmp_path, doc(comp))
    ag.step()
    assert hook.ran == ["a"]  # type: ignore[attr-defined]


def test_nowhere_to_signal_is_marked_with_a_note(tmp_path: Path) -> None:
    no_target = {
        "id": "a",
        "inputs": [{"name": "deploy_signal_transport", "value": "SMOKE"}],
    }
    ag, rec, _hook = make(tmp_path, doc(no_target, {"name": "no id"}, "junk"))
    ag.step()
    assert rec.sent == []
    marker = json.loads(ag.state.marker_path("a").read_text())
    assert "not signalled" in marker["note"]


def test_no_signal_is_marked_after_the_hook(tmp_path: Path) -> None:
    quiet = item("a")
    quiet["inputs"] = [{"name": "deploy_signal_transport", "value": "NO_SIGNAL"}]
    ag, rec, hook = make(tmp_path, doc(quiet))
    ag.step()
    assert hook.ran == ["a"] and rec.sent == []  # type: ignore[attr-defined]
    assert ag.state.is_deployed("a")


def test_hook_that_raises_signals_failed(tmp_path: Path) -> None:
    class Broken(hooks.Hook):
        def run(self, item: items.Item, context: hooks.HookContext) -> dict[str, Any]:
            raise RuntimeError("boom")

    ag, rec, _ = make(tmp_path, doc(item("a")), hook=Broken())
    ag.step()
    payload = rec.sent[-1][1]
    assert payload["deploy_status_code"] == hooks.HOOK_FAILED
    assert "RuntimeError: boom" in payload["deploy_stderr"]


def test_secrets_the_hook_prints_leave_the_server_masked(tmp_path: Path) -> None:
    """A hook that prints its signal URL and its password (or crashes
    with them in its traceback): the signal and the state dir hold ***."""
    url = "http://swift/v1/AUTH_p/c/o?temp_url_sig=0123456789abcdef&temp_url_expires=9"
    password = "s3cret-password-42"

    class Printing(hooks.Hook):
        def run(self, item: items.Item, context: hooks.HookContext) -> dict[str, Any]:
            env = "\n".join(f"{k}={v}" for k, v in item.values.items())
            return {"result": [url], "deploy_stderr": env, "deploy_status_code": 1}

    raw = item("a")
    raw["inputs"][3]["value"] = url
    raw["inputs"].append({"name": "deploy_password", "value": password})
    ag, rec, _ = make(tmp_path, doc(raw), hook=Printing())
    ag.step()
    payload = rec.sent[-1][1]
    assert (
        "deploy_signal_id=http://swift/v1/AUTH_p/c/o?temp_url_sig=***&"
        in (payload["deploy_stderr"])
    )
    assert "deploy_password=***" in payload["deploy_stderr"]
    assert payload["result"] == [url.replace("0123456789abcdef", "***")]
    for path in (tmp_path / "state").rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert "0123456789abcdef" not in text and password not in text, path


def test_bad_document_keeps_the_last_good_one(tmp_path: Path) -> None:
    ag, _rec, hook = make(
        tmp_path, doc(item("a")), b"{broken", doc(item("a"), item("b"))
    )
    ag.step()
    ag.step()
    assert [i["id"] for i in ag.items] == ["a"]
    ag.step()
    assert hook.ran == ["a", "b"]  # type: ignore[attr-defined]


def test_duplicate_ids_run_once(tmp_path: Path) -> None:
    ag, _rec, hook = make(tmp_path, doc(item("a"), item("a")))
    ag.step()
    assert hook.ran == ["a"]  # type: ignore[attr-defined]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "id",
                        "name",
                        "group",
                        "config",
                        "inputs",
                        "outputs",
                        "options",
                        "value",
                        "deploy_signal_transport",
                        "x",
                    ]
                ),
                inner,
                max_size=5,
            )
        ),
        max_leaves=20,
    )
)
def test_never_crashes_on_any_document(tmp_path: Path, document: Any) -> None:
    ag, _, _ = make(tmp_path / str(random.random()), json.dumps(document).encode())
    ag.step()  # no exception, whatever the document
    ag.items = document if isinstance(document, list) else [document]
    ag.deploy_all()


def test_schedule_backs_off_with_jitter() -> None:
    sched = agent.Schedule(10, 1, 300, 0.2, random.Random(3))
    assert 0.8 <= sched.changed() <= 1.2
    waits = [sched.unchanged() for _ in range(6)]
    assert 1.6 <= waits[0] <= 2.4 and 8 <= waits[-1] <= 12
    fails = [sched.failed() for _ in range(8)]
    assert 16 <= fails[0] <= 24 and 240 <= fails[-1] <= 360
    assert 0.8 <= sched.changed() <= 1.2
    exact = agent.Schedule(10, 1, 300, 0)
    assert [exact.failed() for _ in range(6)] == [20, 40, 80, 160, 300, 300]
    assert exact.changed() == 1
    assert agent.Schedule(10, 1, 5, 0).failed() == 10  # never under the interval
    plain = agent.Schedule(5, 5, 5, 0)
    assert {plain.changed(), plain.unchanged(), plain.failed()} == {5}
    # different agents do not wait in step
    assert (
        agent.Schedule(10, 1, 300, 0.2).unchanged()
        != agent.Schedule(10, 1, 300, 0.2).unchanged()
    )


class TestCommand:
    """``swflows-agent --once`` in-process, against a local HTTP server."""

    def test_once_deploys_and_signals(
        self, tmp_path: Path, fake_http: FakeHttp
    ) -> None:
        script = '#!/bin/sh\necho hi\nprintf %s "$foo!" > $heat_outputs_path.result\n'
        raw = {
            "id": "c1",
            "name": "app",
            "group": "script",
            "config": script,
            "inputs": [
                {"name": "foo", "value": "bar"},
                {"name": "deploy_signal_transport", "value": "TEMP_URL_SIGNAL"},
                {
                    "name": "deploy_signal_id",
                    "value": f"{fake_http.url}/sig?temp_url_sig=s",
                },
                {"name": "deploy_signal_verb", "value": "PUT"},
            ],
            "outputs": [{"name": "result"}],
        }

        def answer(seen: Seen) -> tuple[int, dict[str, str], bytes]:
            if seen.method == "GET":
                return 200, {"ETag": "e"}, doc(raw)
            return 201, {}, b""

        fake_http.answers = [answer] * 10
        conf = write_conf(
            tmp_path, {"request": {"metadata_url": f"{fake_http.url}/meta"}}
        )
        assert main.main(["--config-file", str(conf), "--once"]) == 0
        puts = [s for s in fake_http.seen if s.method == "PUT"]
        assert [json.loads(s.body) for s in puts] == [
            {
                "result": "bar!",
                "deploy_stdout": "hi\n",
                "deploy_stderr": "",
                "deploy_status_code": 0,
            }
        ]
        # a second run finds the marker
        assert main.main(["--config-file", str(conf), "--once"]) == 0
        assert len([s for s in fake_http.seen if s.method == "PUT"]) == 1

    def test_failed_poll_exits_1_with_once(self, tmp_path: Path) -> None:
        conf = write_conf(
            tmp_path, {"request": {"metadata_url": "http://127.0.0.1:9/m"}}
        )
        assert main.main(["--config-file", str(conf), "--once"]) == 1

    def test_bad_configuration_exits_2(self, tmp_path: Path, capsys: Any) -> None:
        conf = write_conf(tmp_path, {})
        assert main.main(["--config-file", str(conf)]) == main.EXIT_CONFIG
        assert "no metadata source" in capsys.readouterr().err

    def test_second_agent_on_a_state_dir_exits_3(self, tmp_path: Path) -> None:
        conf = write_conf(
            tmp_path, {"request": {"metadata_url": "http://127.0.0.1:9/m"}}
        )
        from swflows.agent import state

        sd = state.StateDir(tmp_path / "state")
        sd.prepare()
        with sd.lock():
            assert main.main(["--config-file", str(conf), "--once"]) == main.EXIT_LOCKED

    def test_unusable_state_dir_exits_2(self, tmp_path: Path) -> None:
        (tmp_path / "file").write_text("")
        conf = write_conf(tmp_path, {"request": {"metadata_url": "http://x"}})
        args = ["--config-file", str(conf), "--state-dir", str(tmp_path / "file")]
        assert main.main([*args, "--once"]) == main.EXIT_CONFIG

    def test_stop_flag_ends_the_loop(self, tmp_path: Path) -> None:
        ag, _, _ = make(tmp_path)
        threading.Timer(0.3, ag.stop.set).start()
        assert ag.run() == 0


def write_conf(tmp_path: Path, sections: dict[str, Any]) -> Path:
    body = {
        "agent": {
            "state_dir": str(tmp_path / "state"),
            "interval": 0.1,
            "notify_attempts": 1,
            "hook_dirs": [],
        },
        **sections,
    }
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(body))
    return path


class FailsFor(Recorder):
    """Refuses (retryably) every signal of the deployments named."""

    def __init__(self, *failing: str) -> None:
        super().__init__()
        self.failing = set(failing)
        self.tries: dict[str, int] = {}

    def send(self, target: notify.Target, body: bytes) -> None:
        if target.config_id in self.failing:
            self.tries[target.config_id] = self.tries.get(target.config_id, 0) + 1
            raise self.error
        super().send(target, body)


def test_a_signal_that_cannot_get_through_holds_up_no_other_deployment(
    tmp_path: Path,
) -> None:
    """With the default attempts, one go at a signal service that does not
    answer is short: the next deployment's hook runs and is signalled in
    the same pass, and the first signal is kept for later (under load a
    Zaqar answering in 10 s held every later deployment for minutes)."""
    rec = FailsFor("a")
    ag, _, hook = make(tmp_path, doc(item("a"), item("b")), recorder=rec)
    ag.config = dataclasses.replace(
        ag.config, notify_attempts=config.AgentConfig.notify_attempts
    )
    ag.step()
    assert hook.ran == ["a", "b"]  # type: ignore[attr-defined]
    # the "started" hint's attempts, then one short go at the final signal
    assert rec.tries["a"] == ag.config.started_attempts + 3
    assert ag.state.is_deployed("b") and not ag.state.is_deployed("a")
    assert ag.state.pending("a") is not None and "a" in ag._retry
