"""The agent's markers, pending signals and lock on disk."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from swflows.agent import state


@pytest.fixture
def sd(tmp_path: Path) -> state.StateDir:
    made = state.StateDir(tmp_path / "state")
    made.prepare()
    return made


def test_prepare_makes_private_folders(sd: state.StateDir) -> None:
    for sub in ("", "deployed", "pending", "scripts", "outputs", "work"):
        mode = stat.S_IMODE((sd.root / sub).stat().st_mode)
        assert mode == 0o700, sub


def test_marker(sd: state.StateDir) -> None:
    assert not sd.is_deployed("c1")
    sd.mark_deployed("c1", {"status_code": 0, "name": "app"})
    assert sd.is_deployed("c1")
    body = json.loads(sd.marker_path("c1").read_text())
    assert body["id"] == "c1" and body["status_code"] == 0 and body["deployed_at"]
    assert stat.S_IMODE(sd.marker_path("c1").stat().st_mode) == 0o600
    assert sd.deployed() == ["c1"]
    assert not list(sd.marker_path("c1").parent.glob(".*"))  # no temporary left


def test_pending_round_trip(sd: state.StateDir) -> None:
    assert sd.pending("c1") is None
    payload = {"deploy_status_code": 0, "result": "é"}
    sd.save_pending("c1", payload)
    assert sd.pending("c1") == payload
    sd.clear_pending("c1")
    assert sd.pending("c1") is None
    sd.clear_pending("c1")  # already gone: fine


def test_unreadable_pending_is_dropped(sd: state.StateDir) -> None:
    sd.pending_path("c1").write_text("{half")
    assert sd.pending("c1") is None
    assert not sd.pending_path("c1").exists()


def test_sweep_removes_delivered_pending(sd: state.StateDir) -> None:
    sd.save_pending("done", {"deploy_status_code": 0})
    sd.mark_deployed("done", {})
    sd.save_pending("waiting", {"deploy_status_code": 0})
    (sd.root / "pending" / ".x.json.1.tmp").write_text("")
    assert sd.sweep() == 1
    assert sd.pending("done") is None
    assert sd.pending("waiting") is not None
    assert not (sd.root / "pending" / ".x.json.1.tmp").exists()


@pytest.mark.parametrize(
    "ident", ["../../etc/passwd", "a/b", ".hidden", "x" * 300, "é"]
)
def test_unsafe_ids_get_digest_names(sd: state.StateDir, ident: str) -> None:
    name = state.file_name(ident)
    assert name.startswith("x-") and "/" not in name
    sd.mark_deployed(ident, {})
    assert sd.is_deployed(ident)
    assert sd.marker_path(ident).parent == sd.root / "deployed"
    assert sd.deployed() == [ident]


def test_safe_ids_keep_their_name() -> None:
    ident = "35f499a7-66aa-4f52-8653-063743a75edc"
    assert state.file_name(ident) == ident


def test_one_agent_per_state_dir(sd: state.StateDir) -> None:
    with sd.lock():
        with pytest.raises(state.AgentLocked), state.StateDir(sd.root).lock():
            pass
    with sd.lock():  # released
        pass
