"""A deployment cancelled while its hook runs: the agent polls on while the
hook runs, stops it once its config leaves the document, signals nothing,
never runs it again, and goes on with the next config at once."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from swflows.agent import agent, hooks, items, process
from tests.unit.test_agent_agent import Counting, Documents, doc, item, make


class Blocking(hooks.Hook):
    """Runs until told to stop (as a hook process is), or ``seconds`` pass."""

    def __init__(self, seconds: float = 10.0) -> None:
        self.seconds = seconds
        self.ran: list[str] = []
        self.cancelled: list[str] = []

    def run(self, item: items.Item, context: hooks.HookContext) -> dict[str, Any]:
        self.ran.append(item.id)
        if context.cancel.wait(self.seconds):
            self.cancelled.append(item.id)
            raise process.Cancelled("the hook was stopped (SIGTERM)", "SIGTERM")
        return {"deploy_status_code": 0}


class Mixed(hooks.Hook):
    """``Blocking`` for items named ``slow*``, ``Counting`` for the others."""

    def __init__(self, seconds: float = 10.0) -> None:
        self.slow = Blocking(seconds)
        self.fast = Counting()

    def run(self, item: items.Item, context: hooks.HookContext) -> dict[str, Any]:
        hook = self.slow if item.name.startswith("slow") else self.fast
        return hook.run(item, context)


def marker(ag: agent.Agent, ident: str) -> dict[str, Any]:
    return dict(json.loads(ag.state.marker_path(ident).read_text()))


def test_withdrawn_while_running_stops_the_hook_and_goes_on(tmp_path: Path) -> None:
    slow, nxt = item("slow"), item("next")
    # the loop reads [slow]; polls while it runs read: unchanged, then [next]
    ag, rec, hook = make(tmp_path, doc(slow), None, doc(nxt), hook=Mixed())
    started = time.monotonic()
    assert ag.step()
    assert time.monotonic() - started < 5  # not the hook's 10 s
    assert hook.slow.cancelled == ["slow"]  # type: ignore[attr-defined]
    # the next config ran in the same round, without waiting for a poll
    assert hook.fast.ran == ["next"]  # type: ignore[attr-defined]
    # "started" only: nobody waits for the cancelled one's signal
    assert rec.sent == [
        ("slow", {"deploy_signal": "started"}),
        ("next", {"deploy_signal": "started"}),
        ("next", {"result": "v-next", "deploy_status_code": 0}),
    ]
    assert ag.state.pending("slow") is None
    record = marker(ag, "slow")
    assert record["status_code"] is None
    assert record["note"].startswith("cancelled while running")


def test_a_cancelled_config_never_runs_again(tmp_path: Path) -> None:
    slow = item("slow")
    ag, _rec, hook = make(tmp_path, doc(slow), doc(), hook=Mixed())
    ag.step()
    assert hook.slow.cancelled == ["slow"]  # type: ignore[attr-defined]
    # a restarted agent reading a stale document that still lists it
    again, rec, hook = make(tmp_path, doc(slow), hook=Mixed())
    again.step()
    assert hook.slow.ran == []  # type: ignore[attr-defined]
    assert rec.sent == []


def test_unchanged_document_lets_the_hook_finish(tmp_path: Path) -> None:
    slow = item("slow")
    ag, rec, hook = make(tmp_path, doc(slow), None, doc(slow), hook=Mixed(0.6))
    ag.step()
    assert hook.slow.cancelled == []  # type: ignore[attr-defined]
    assert rec.sent[-1] == ("slow", {"deploy_status_code": 0})
    assert marker(ag, "slow")["status_code"] == 0


def test_items_withdrawn_before_their_turn_do_not_run(tmp_path: Path) -> None:
    first, second, third = item("slow1"), item("b"), item("c")
    # while slow1 runs (to its end), b is withdrawn and c stays
    ag, _rec, hook = make(
        tmp_path, doc(first, second, third), doc(first, third), hook=Mixed(0.6)
    )
    ag.step()
    assert hook.slow.ran == ["slow1"]  # type: ignore[attr-defined]
    assert hook.slow.cancelled == []  # type: ignore[attr-defined]
    assert hook.fast.ran == ["c"]  # type: ignore[attr-defined]
    assert not ag.state.is_deployed("b")


def test_failing_polls_while_running_do_not_stop_the_hook(tmp_path: Path) -> None:
    class Down(Documents):
        def collect(self) -> Any:
            if not self.docs:
                raise OSError("metadata unreachable")
            return super().collect()

    slow = item("slow")
    ag, rec, hook = make(tmp_path, hook=Mixed(0.6))
    ag.collector = Down(doc(slow))
    ag.step()
    assert hook.slow.cancelled == []  # type: ignore[attr-defined]
    assert rec.sent[-1] == ("slow", {"deploy_status_code": 0})


def test_the_poll_thread_ends_with_the_hook(tmp_path: Path) -> None:
    ag, _rec, _hook = make(tmp_path, doc(item("a")))
    before = threading.active_count()
    ag.step()
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() == before


def test_real_hook_process_is_stopped(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    slow = item("slow", config=f"#!/bin/sh\nsleep 600 &\necho $! > {pids}\nwait\n")
    ag, rec, _hook = make(tmp_path, doc(slow), None, doc(), hook=hooks.ScriptHook())
    started = time.monotonic()
    ag.step()
    assert time.monotonic() - started < 8
    child = int(pids.read_text())
    assert (
        not Path(f"/proc/{child}").exists()
        or "Z"
        in (Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[:1])
    )
    assert rec.sent == [("slow", {"deploy_signal": "started"})]
    assert "cancelled" in marker(ag, "slow")["note"]
