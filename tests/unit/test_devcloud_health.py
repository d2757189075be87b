"""The dev cloud's health as ``tools/devcloud up`` and ``status`` read it:
a live server that answers late is waited for, not taken for down (a
restart moves every port under the runs using the cloud)."""

from __future__ import annotations

import pytest

from tools.devcloud_lib import cli


def test_a_slow_server_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    rounds = [
        {"keystone": "not answering", "swift-proxy": "ok"},
        {"keystone": "not answering", "swift-proxy": "ok"},
        {"keystone": "ok", "swift-proxy": "ok"},
    ]
    monkeypatch.setattr(cli, "health", lambda: rounds.pop(0))
    found = cli.settled_health(60, sleep=slept.append)
    assert found == {"keystone": "ok", "swift-proxy": "ok"}
    assert len(slept) == 2 and rounds == []


def test_a_dead_server_is_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    states = {"keystone": "not answering", "nova": "down"}
    monkeypatch.setattr(cli, "health", lambda: dict(states))
    assert cli.settled_health(60, sleep=slept.append) == states
    assert slept == []


def test_patience_runs_out(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    ticks = iter(range(0, 1000, 10))
    monkeypatch.setattr(cli, "health", lambda: {"keystone": "not answering"})
    found = cli.settled_health(30, sleep=slept.append, clock=lambda: float(next(ticks)))
    assert found == {"keystone": "not answering"}
    assert len(slept) == 2  # waited at 10 and 20 s; at 30 s patience ran out
