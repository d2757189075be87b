"""Documents carry a generation: the agent acts on none older than one it
acted on, so a late write of an older copy (a publisher paused between
reading the store and writing) neither stops a running hook nor runs what
was withdrawn since."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from swflows import exceptions, model
from swflows.agent import items
from tests.unit.test_agent_agent import Counting, Documents, item, make
from tests.unit.test_agent_cancel import Mixed, marker


def gen(generation: int, *raw: Any) -> bytes:
    """A document as swflows publishes it, of ``generation``."""
    return json.dumps(
        {"deployments": list(raw), model.DOCUMENT_GENERATION: generation}
    ).encode()


def test_an_older_document_does_not_stop_a_running_hook(tmp_path: Path) -> None:
    slow = item("slow")
    # the loop reads generation 5 listing slow; a poll while it runs reads a
    # late copy of generation 4 that predates it
    ag, rec, hook = make(tmp_path, gen(5, slow), gen(4), hook=Mixed(0.6))
    ag.step()
    assert hook.slow.cancelled == []  # type: ignore[attr-defined]
    assert rec.sent[-1] == ("slow", {"deploy_status_code": 0})
    assert marker(ag, "slow")["status_code"] == 0
    assert ag.newest.generation == 5


def test_a_newer_document_without_the_item_still_stops_it(tmp_path: Path) -> None:
    slow = item("slow")
    ag, rec, hook = make(tmp_path, gen(5, slow), gen(6), hook=Mixed())
    ag.step()
    assert hook.slow.cancelled == ["slow"]  # type: ignore[attr-defined]
    assert rec.sent == [("slow", {"deploy_signal": "started"})]
    assert ag.newest.generation == 6


def test_an_older_document_does_not_run_what_was_withdrawn(tmp_path: Path) -> None:
    # generation 7 no longer lists a (cancelled); a late copy of 6 does
    ag, rec, hook = make(tmp_path, gen(7), gen(6, item("a")))
    assert ag.step() is True
    assert ag.step() is False  # the late copy moves nothing
    assert hook.ran == []  # type: ignore[attr-defined]
    assert rec.sent == []
    assert ag.items == []


def test_the_same_generation_again_is_read(tmp_path: Path) -> None:
    ag, _rec, hook = make(tmp_path, gen(3), gen(3, item("a")))
    ag.step()
    ag.step()
    assert hook.ran == ["a"]  # type: ignore[attr-defined]


def test_documents_without_a_generation_are_always_read(tmp_path: Path) -> None:
    # Heat's documents carry none
    heat = json.dumps({"deployments": [item("h")]}).encode()
    ag, _rec, hook = make(tmp_path, gen(9), heat)
    ag.step()
    ag.step()
    assert hook.ran == ["h"]  # type: ignore[attr-defined]
    assert ag.newest.generation == 9


class Gone(Documents):
    """Answers 404 once its documents ran out of the first batch."""

    def __init__(self, *docs: Any, gone_after: int) -> None:
        super().__init__(*docs)
        self.gone_after = gone_after
        self.reads = 0

    def collect(self) -> Any:
        self.reads += 1
        if self.reads == self.gone_after:
            raise exceptions.CloudError("metadata", "not found", status=404)
        return super().collect()


def test_a_document_gone_forgets_the_generation(tmp_path: Path) -> None:
    # unenrolled, then enrolled anew: its documents count from 1 again
    ag, _rec, hook = make(tmp_path, hook=Counting())
    ag.collector = Gone(gen(40), gen(1, item("a")), gone_after=2)
    ag.step()
    with pytest.raises(exceptions.CloudError):
        ag.step()
    assert ag.newest.generation is None
    ag.step()
    assert hook.ran == ["a"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, 3), (0, 0), (-1, None), (True, None), ("3", None), (2.5, None)],
)
def test_a_malformed_generation_is_none(value: Any, expected: int | None) -> None:
    found = items.read_document({"deployments": [], "generation": value})
    assert found.generation == expected
    assert items.read_document([item("a")]).generation is None
    assert items.read_document(b"").generation is None
