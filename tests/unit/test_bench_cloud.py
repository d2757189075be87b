"""The bench's own helpers for the processes it starts."""

from __future__ import annotations

import pytest

from bench import cloud as bcloud


def test_a_started_process_caches_its_bytecode_and_finds_this_checkout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A conductor the bench starts runs as an installed one: with the
    cache of compiled modules on, whatever the shell said."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("SWFLOWS_BENCH_MARK", "kept")
    env = bcloud.process_env()
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["PYTHONPATH"] == str(bcloud.REPO)
    assert env["SWFLOWS_BENCH_MARK"] == "kept"
