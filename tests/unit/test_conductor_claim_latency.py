"""An idle conductor claims a job posted while it rests at once, not at its
next listing: on a Redis board it probes the board's count of posts, on a
ZooKeeper board the board tells it.  Counted in calls, not timed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from swflows.api import Swflows
from swflows.clients.cloud import Clients
from swflows.engine import conductor
from swflows.fixture import LocalSwflows
from tests.unit.test_runner_fencing import MemoryBoard

REST_PROBES = round(conductor.POLL_SECONDS / conductor.PROBE_SECONDS)


class TellingBoard(MemoryBoard):
    """A board that tells of each job posted, as ZooKeeper's does, and has
    no count of posts to probe."""

    def __init__(self) -> None:
        super().__init__()
        self.told: list[Any] = []

    def posted(self) -> int | None:
        return None

    def on_posted(self, callback: Any) -> bool:
        self.told.append(callback)
        return True

    def post(self, flow_id: str, name: str, server: str = "") -> str:
        made = super().post(flow_id, name, server)
        for callback in self.told:
            callback()
        return made


@pytest.fixture
def sw() -> Iterator[Swflows]:
    with LocalSwflows() as local:
        made = Swflows(local.store, Clients(), local.conf, start=False)
        try:
            yield made
        finally:
            made.close()


def resting(sw: Swflows, board: MemoryBoard, **kwargs: Any) -> conductor.Conductor:
    """A conductor on ``board`` whose last pass found nothing to claim (its
    threads not started: each rest is called here)."""
    driver = conductor.Conductor(sw, board=board, **kwargs)  # type: ignore[arg-type]
    assert driver.claim_some() == []
    board.probes = 0
    return driver


class PostingOnProbe(MemoryBoard):
    """Posts a job as the ``at``-th probe is made."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at = at

    def posted(self) -> int | None:
        if self.probes + 1 == self.at:
            self.post("flow", "job")
        return super().posted()


def test_a_rest_with_nothing_posted_probes_until_the_next_listing(
    sw: Swflows,
) -> None:
    board = MemoryBoard()
    resting(sw, board, workers=2).resting.rest()
    # every PROBE_SECONDS of POLL_SECONDS (the last slice may be cut short)
    assert REST_PROBES - 2 <= board.probes <= REST_PROBES


def test_a_job_posted_during_a_rest_ends_it_at_the_next_probe(sw: Swflows) -> None:
    board = PostingOnProbe(at=3)
    resting(sw, board, workers=2).resting.rest()
    assert board.probes == 3  # not the rest's whole count


def test_a_full_conductor_does_not_probe(sw: Swflows) -> None:
    board = MemoryBoard()
    driver = resting(sw, board, workers=1)
    driver._held["job"] = object()  # its one slot taken
    driver.resting.rest()
    assert board.probes == 0


def test_a_board_that_tells_wakes_the_rest(sw: Swflows) -> None:
    board = TellingBoard()
    driver = resting(sw, board, workers=2)
    board.on_posted(driver.wake)  # as start() registers it
    board.post("flow", "job")
    assert driver._wake.is_set()
    driver.resting.rest()  # returns at once: woken, nothing probed
    assert board.probes == 0 and not driver._wake.is_set()


def test_a_started_conductor_is_told_of_posts(sw: Swflows) -> None:
    board = TellingBoard()
    driver = conductor.Conductor(sw, board=board, workers=2)  # type: ignore[arg-type]
    driver.start()
    try:
        assert board.told == [driver.wake]
    finally:
        driver.close()


class CountingClaims(MemoryBoard):
    """Records which jobs each claim was tried on, by their name; a claim of
    a job named in ``lost`` finds it just claimed by another conductor."""

    def __init__(self) -> None:
        super().__init__()
        self.tried: list[str] = []
        self.lost: set[str] = set()

    def claim(self, job: Any, who: str) -> bool:
        if who != "other":
            self.tried.append(job.name)
            if job.name in self.lost:
                super().claim(job, "other")
        return bool(super().claim(job, who))


def _servers_jobs(board: CountingClaims) -> None:
    for name, server in (
        ("s1-a", "s1"),
        ("s1-b", "s1"),
        ("s2-a", "s2"),
        ("none", ""),
        ("s1-c", "s1"),
        ("s2-b", "s2"),
    ):
        board.post(f"flow-{name}", name, server)


def test_a_servers_jobs_another_conductor_holds_are_left_to_it(sw: Swflows) -> None:
    """A listing tells which jobs another conductor holds: this conductor
    tries none of those servers' jobs (two taking turns on one server's
    deployments wait on each other), and no claim of a held job (each would
    fail, one call to the board for nothing); once that conductor is done
    with the server, the next listing tries its jobs."""
    board = CountingClaims()
    _servers_jobs(board)
    first = next(job for job in board.jobs() if job.name == "s1-a")
    assert board.claim(first, "other")
    driver = conductor.Conductor(sw, board=board, workers=8)  # type: ignore[arg-type]
    driver.claim_some()
    assert board.tried == ["s2-a", "none", "s2-b"]
    assert board.consume(first, "other")
    board.post("flow-s1-d", "s1-d", "s1")
    driver.listing.at = 0.0
    board.tried.clear()
    driver.claim_some()
    assert board.tried == ["s1-b", "s1-c", "s1-d"]


def test_a_claim_lost_after_the_listing_leaves_the_servers_jobs(sw: Swflows) -> None:
    """A job another conductor claimed since the listing (its claim fails
    here) leaves the rest of its server's jobs in the same listing to that
    conductor; the next listing skips that server while the other holds
    the job."""
    board = CountingClaims()
    _servers_jobs(board)
    board.lost.add("s1-a")
    driver = conductor.Conductor(sw, board=board, workers=8)  # type: ignore[arg-type]
    driver.claim_some()
    assert board.tried == ["s1-a", "s2-a", "none", "s2-b"]
    driver.listing.at = 0.0
    board.tried.clear()
    driver.claim_some()
    assert board.tried == []


def test_a_conductors_own_jobs_in_a_listing_are_neither_tried_nor_left(
    sw: Swflows,
) -> None:
    """A Redis listing shows the jobs this conductor holds too: no claim is
    tried on them (it would fail), and their server's other jobs are still
    its to take (a round of one server's first deploy must not keep its
    next from it)."""
    board = CountingClaims()
    board.post("flow-s1-a", "s1-a", "s1")
    board.post("flow-s1-b", "s1-b", "s1")
    driver = conductor.Conductor(sw, board=board, workers=8)  # type: ignore[arg-type]
    first = next(job for job in board.jobs() if job.name == "s1-a")
    assert board.claim(first, driver.name)
    driver._held["flow-s1-a"] = first  # driven here, in a round
    board.tried.clear()
    driver.claim_some()
    assert board.tried == ["s1-b"]


def test_a_rounds_flow_handed_to_an_engine_frees_its_room_and_keeps_its_job(
    sw: Swflows,
) -> None:
    """A flow a round hands to an engine of its own (a step failed there)
    leaves the rounds' room, so a conductor never fills up with flows no
    round has; its job stays held, for the engine's drive to settle."""
    board = MemoryBoard()
    driver = conductor.Conductor(sw, board=board, workers=8)  # type: ignore[arg-type]
    driver.rounds.size = 1
    board.post("flow-1", "j1", "s1")
    (job,) = board.jobs()
    assert board.claim(job, driver.name)
    driver._held["flow-1"] = job
    claim = driver.rounds.lend("flow-1")
    assert claim is not None
    assert driver.rounds.lend("flow-2") is None  # no room left
    claim.adopted = True
    claim.done(None)
    assert driver.rounds.lend("flow-2") is not None  # its room back
    assert driver._held == {"flow-1": job}
    assert board.owner(job) == driver.name
