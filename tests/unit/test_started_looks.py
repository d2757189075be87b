"""Callers waiting for flows other processes drive to write their rows:
one look for all of them, each woken as its row is seen."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from swflows import model, states
from swflows.api.started import StartedLooks
from swflows.persistence import Store


class Rows:
    """Deployment rows appearing as a test writes them; each look counted."""

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}
        self.looks: list[list[str]] = []
        self.fail = 0
        self._lock = threading.Lock()

    def generations(self, deployment_ids: list[str]) -> dict[str, int]:
        with self._lock:
            self.looks.append(sorted(deployment_ids))
            if self.fail:
                self.fail -= 1
                raise RuntimeError("the database went away")
            return {i: g for i, g in self.rows.items() if i in deployment_ids}


def until(check: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "never"
        time.sleep(0.005)


def test_waiters_are_woken_by_one_look_as_their_rows_appear() -> None:
    rows = Rows()
    looks = StartedLooks(rows, seconds=0.01)
    woken: dict[str, float] = {}
    go = threading.Barrier(11)

    def wait(deployment_id: str) -> None:
        with looks.waiting(deployment_id, 1) as seen:
            go.wait()
            assert seen.wait(5)
            woken[deployment_id] = time.monotonic()

    threads = [threading.Thread(target=wait, args=(f"d{i}",)) for i in range(10)]
    for thread in threads:
        thread.start()
    go.wait()
    written = {}
    for i in range(10):
        rows.rows[f"d{i}"] = 1
        written[f"d{i}"] = time.monotonic()
        time.sleep(0.02)
    for thread in threads:
        thread.join(5)
    assert sorted(woken) == sorted(written)
    for deployment_id, at in woken.items():
        assert at - written[deployment_id] < 1.0
    # the looks asked for every waiter at once, not one statement each
    assert max(len(ids) for ids in rows.looks) == 10
    # nobody waits: the thread ends, and looks no more
    until(lambda: looks._thread is None)
    before = len(rows.looks)
    time.sleep(0.05)
    assert len(rows.looks) == before


def test_a_row_at_an_older_generation_wakes_nobody() -> None:
    """A redeploy waits for its own action: the row as it was before is
    not it."""
    rows = Rows()
    rows.rows["d1"] = 1
    looks = StartedLooks(rows, seconds=0.01)
    with looks.waiting("d1", 2) as seen:
        until(lambda: len(rows.looks) >= 3)
        assert not seen.is_set()
        rows.rows["d1"] = 2
        assert seen.wait(5)


def test_a_failed_look_is_followed_by_the_next() -> None:
    rows = Rows()
    rows.fail = 2
    rows.rows["d1"] = 1
    looks = StartedLooks(rows, seconds=0.01)
    with looks.waiting("d1", 1) as seen:
        assert seen.wait(5)
    assert len(rows.looks) >= 3


def test_the_store_gives_the_generations_of_the_rows_it_has(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as store:
        made = [
            store.create_deployment(
                model.Deployment(
                    id=model.new_id(),
                    server_id="srv",
                    config_id=None,
                    source_config_id=None,
                    action="CREATE",
                    status=states.IN_PROGRESS,
                    generation=generation,
                )
            )
            for generation in (1, 3)
        ]
        asked = [made[0].id, made[1].id, "never-made"]
        assert store.generations(asked) == {made[0].id: 1, made[1].id: 3}
        assert store.generations(["never-made"]) == {}
        assert store.generations([]) == {}
