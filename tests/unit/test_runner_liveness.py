"""Background loops that cannot die, and show that they live: a runner and
a conductor that meet a logbook another process holds now (a paused
conductor continued) stop the flow and go on; every loop survives one
iteration's error, a :class:`BaseException` included; ``close()`` always
finishes; a conductor names its stale loops (SQLite, an in-memory board)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest

from swflows import failpoints
from swflows.api import Swflows
from swflows.clients.cloud import Clients
from swflows.engine import conductor, election, liveness
from swflows.fixture import LocalSwflows
from swflows.persistence import flow_registry as flow_rows
from swflows.persistence import logbook
from tests.unit.test_runner_fencing import (
    GATES,
    RAN,
    STARTED,
    MemoryBoard,
    gated,
    until,
)

#: what a paused process meets when it writes to a flow taken over meanwhile
FENCED = logbook.FlowFenced("f-1", "me:1:x", "other:2:y")


@pytest.fixture
def local() -> Iterator[LocalSwflows]:
    with LocalSwflows(overrides={"runner": {"lease_seconds": 1.0}}) as made:
        yield made


def new_gate(name: str) -> str:
    STARTED[name], GATES[name] = threading.Event(), threading.Event()
    return name


def take_over(sw: Swflows, flow_id: str) -> None:
    """Another runner owns the flow's row (and so its logbook) now."""
    assert flow_rows.FlowRegistry(sw.store).claim(
        flow_id,
        "other-runner",
        lease_until=time.time() + 600,
        now=time.time() + 3600,
        from_states=(flow_rows.RUNNING,),
    )


def steal_claims(board: MemoryBoard, who: str) -> None:
    """Another conductor holds the claims ``who`` held."""
    with board._lock:
        for job_id, owner in list(board._claims.items()):
            if owner == who:
                board._claims[job_id] = "other-conductor"


# -- a runner meeting a fenced logbook ---------------------------------------
def test_losing_a_flow_whose_logbook_is_another_runners_raises_nothing(
    local: LocalSwflows,
) -> None:
    gate = new_gate("lose-fenced")
    sw = local.sw
    flow_id = sw.run_flow(gated, gate=gate)
    assert STARTED[gate].wait(30)
    take_over(sw, flow_id)
    try:
        sw.runner.lose(flow_id)  # its suspend's write is refused
        assert sw.runner.drives_now(flow_id) is False
    finally:
        GATES[gate].set()
    until(lambda: sw.runner.drives_now(flow_id) is None, 30)
    assert (gate, "fence.after") not in RAN


def test_losing_a_flow_not_started_yet_raises_nothing_and_it_never_runs() -> None:
    with LocalSwflows(overrides={"runner": {"workers": 1}}) as made:
        sw = made.sw
        busy, queued = new_gate("one-worker"), new_gate("queued")
        first = sw.run_flow(gated, gate=busy)
        assert STARTED[busy].wait(30)
        second = sw.run_flow(gated, gate=queued)  # waits for the one worker
        take_over(sw, second)
        try:
            sw.runner.lose(second)  # its engine has not been compiled
        finally:
            GATES[busy].set()
        sw.wait_flow(first, timeout=30)
        until(lambda: sw.runner.drives_now(second) is None, 30)
        assert not [step for g, step in RAN if g == queued]
        row = flow_rows.FlowRegistry(sw.store).get(second)
        assert row is not None and row.owner == "other-runner"


def test_a_heartbeat_meeting_a_fenced_logbook_goes_on_and_close_finishes(
    local: LocalSwflows,
) -> None:
    gate = new_gate("heartbeat-fenced")
    sw = Swflows(local.store, Clients(), local.conf, start=False)
    board = MemoryBoard(claim_expiry=0.6)
    driver = conductor.Conductor(sw, board=board, workers=2)  # type: ignore[arg-type]
    driver.start()
    try:
        flow_id = sw.run_flow(gated, gate=gate)
        assert STARTED[gate].wait(30)
        claims = next(t for t in driver._threads if t.name == "swflows-claims")
        # paused, continued: its claim and its flow's row are others' now
        steal_claims(board, driver.name)
        take_over(sw, flow_id)
        until(lambda: driver.runner.drives_now(flow_id) is False, 10)
        beats = driver.runner.liveness["claims"]
        seen = beats.last_ok
        until(lambda: beats.last_ok > seen + 0.5, 10)  # it beats on
        assert claims.is_alive()
        assert beats.failures == 0
        assert driver.runner.failures["extend claims"] == 0
        assert driver.runner.liveness.stale() == []
        # a drive still stopping, its suspend refused: close finishes all
        assert driver.runner.drives_now(flow_id) is False
        threading.Timer(0.3, GATES[gate].set).start()
        driver.close()
    finally:
        GATES[gate].set()
        driver.close()
        sw.close()
    assert driver.runner._executor._shutdown
    assert not any(t.is_alive() for t in (claims,))
    assert driver.name not in board.conductors()  # retired from the board
    assert (gate, "fence.after") not in RAN


def test_close_finishes_when_suspending_a_flow_fails(local: LocalSwflows) -> None:
    gate = new_gate("close-fenced")
    sw = local.sw
    flow_id = sw.run_flow(gated, gate=gate)
    assert STARTED[gate].wait(30)
    runner = sw.runner
    threads = list(runner._threads)
    take_over(sw, flow_id)
    stopped: list[str] = []
    runner.jobs = types_jobs(stopped)
    threading.Timer(0.3, GATES[gate].set).start()
    try:
        runner.close()
    finally:
        GATES[gate].set()
    assert runner._executor._shutdown
    assert not any(t.is_alive() for t in threads)
    assert stopped == ["board closed"]
    assert (gate, "fence.after") not in RAN


def types_jobs(stopped: list[str]) -> conductor.Conductor:
    """Stands for a conductor's side of a runner, to see its board closed."""

    class Jobs:
        def close_board(self) -> None:
            stopped.append("board closed")

        def drive_done(self, flow_id: str, *, settled: bool = False) -> None:
            pass

        def reap(self, flow_id: str | None = None) -> list[str]:
            return []

    return Jobs()  # type: ignore[return-value]


# -- every loop survives one iteration's error ------------------------------
@pytest.mark.parametrize(
    ("point", "name"),
    [
        ("watcher.iteration", "watcher"),
        ("runner.renew_leases", "leases"),
        ("groups.tick", "groups"),
    ],
)
def test_a_runners_loop_survives_a_base_exception(
    local: LocalSwflows, point: str, name: str
) -> None:
    sw = local.sw  # its group driver runs beside its runner
    loop = sw.runner.liveness[name]
    with failpoints.armed(point, failpoints.fail_times(2, FENCED)):
        until(lambda: failpoints.hits(point) >= 2, 10)
        until(lambda: loop.failures == 0 and loop.last_ok > time.time() - 0.5, 10)
    assert loop.running and not loop.died
    assert sw.runner.liveness.stale() == []


def test_the_claiming_loop_survives_a_base_exception(local: LocalSwflows) -> None:
    sw = Swflows(local.store, Clients(), local.conf, start=False)
    board = MemoryBoard(claim_expiry=0.6)
    driver = conductor.Conductor(sw, board=board, workers=2)  # type: ignore[arg-type]
    with failpoints.armed("conductor.claim", failpoints.fail_times(2, FENCED)):
        driver.start()
        try:
            gate = new_gate("claimed-after-failures")
            GATES[gate].set()
            flow_id = sw.run_flow(gated, gate=gate)
            assert sw.wait_flow(flow_id, timeout=30)["state"] == "SUCCESS"
            assert driver.runner.failures["claim jobs"] == 2
            assert driver.runner.liveness["conductor"].running
        finally:
            driver.close()
            sw.close()


def test_the_election_campaign_survives_a_base_exception() -> None:
    candidate = election.Election("redis://127.0.0.1:1", "r", timeout=2)
    thread = threading.Thread(target=candidate._campaign, daemon=True)
    before = failpoints.hits("election.step")  # other tests' steps count too
    with failpoints.armed("election.step", failpoints.fail_times(2, FENCED)):
        thread.start()
        try:
            until(lambda: failpoints.hits("election.step") >= before + 4, 10)
            assert thread.is_alive()
            assert candidate.loop.failures == 0
        finally:
            candidate._stopping.set()
            thread.join(10)
    assert candidate.loop.died is False


# -- the loops' health ------------------------------------------------------
def test_a_loop_logs_a_run_of_failures_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "swflows.engine.liveness")
    loop = liveness.Loop("claims", 1.0)

    def fenced() -> None:
        raise FENCED

    for _ in range(5):
        assert not loop.run(fenced)
    assert loop.failures == 5
    assert loop.run(lambda: None)
    told = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert len(told) == 2, told
    assert "FlowFenced" in told[0]
    assert "after 5 failed" in told[1]


def test_a_loop_lets_the_process_end() -> None:
    loop = liveness.Loop("claims", 1.0)

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        loop.run(interrupted)


def test_a_loop_is_stale_when_it_died_or_no_iteration_succeeded_lately() -> None:
    loop = liveness.Loop("claims", 1.0)
    now = time.time()
    assert not loop.stale(now)
    assert loop.stale(now + liveness.STALE_MIN_SECONDS + 1)
    slow = liveness.Loop("sweeper", 60.0)
    assert not slow.stale(now + 170) and slow.stale(now + 190)
    slow.set_idle(True)
    assert not slow.stale(now + 1000)
    slow.set_idle(False)  # its staleness starts afresh
    assert not slow.stale(time.time() + 170)
    with loop.running_in(lambda: False):  # its thread ends, the owner runs
        pass
    assert loop.died and loop.stale(now)
    stopped = liveness.Loop("leases", 1.0)
    with stopped.running_in(lambda: True):
        pass
    assert not stopped.died


def test_conductor_list_names_a_conductors_stale_loops(local: LocalSwflows) -> None:
    sw = Swflows(local.store, Clients(), local.conf, start=False)
    board = MemoryBoard()
    driver = conductor.Conductor(sw, board=board, workers=1)  # type: ignore[arg-type]
    loops = driver.runner.liveness
    loops.loop("conductor", 0.5).ok()
    claims = loops.loop("claims", 1.0)
    with claims.running_in(lambda: False):
        pass  # its thread ended
    loops.loop("leases", 1.0).last_ok = time.time() - 3600
    driver._announce()
    found = conductor.status(board, flow_rows.FlowRegistry(sw.store))  # type: ignore[arg-type]
    assert found["conductors"][driver.name]["stale"] == ["claims", "leases"]
    assert found["conductors"][driver.name]["loops"]["claims"]["died"] is True
    sw.close()
    driver.runner.close()


def test_a_heartbeat_racing_a_drive_that_ended_loses_nothing(
    local: LocalSwflows, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flow parked while a heartbeat runs: its job was consumed after the
    heartbeat copied what it holds, so extending it fails.  That is no lost
    claim: the flow is not stopped or counted lost (it was, with a warning
    "claim lost to another conductor" on a quiet machine)."""
    sw = Swflows(local.store, Clients(), local.conf, start=False)
    board = MemoryBoard()
    driver = conductor.Conductor(sw, board=board, workers=2)  # type: ignore[arg-type]
    lost: list[str] = []
    monkeypatch.setattr(driver.runner, "lose", lost.append)
    try:
        for flow_id in ("f-ended", "f-held"):
            board.post(flow_id, flow_id)
        jobs = {board.flow_of(job): job for job in board.jobs()}
        for name, job in jobs.items():
            assert board.claim(job, driver.name)
            driver._held[str(name)] = job

        def extend(job: object, who: str) -> bool:
            if job is jobs["f-ended"]:  # its drive ends as it is extended
                with driver._lock:
                    driver._held.pop("f-ended")
                return False
            return job is not jobs["f-held"]  # and this one was taken

        monkeypatch.setattr(board, "extend", extend)
        driver.heartbeat()
        assert lost == ["f-held"]
        assert driver._lost == {"f-held"}
    finally:
        driver.close()
        sw.close()


def test_a_claim_this_conductor_does_not_drive_is_given_back(
    local: LocalSwflows,
) -> None:
    """A claim whose answer was lost (the connection cut as ZooKeeper made
    the lock node): the board says the job is this conductor's, which never
    started its flow.  No other conductor may take it, and on ZooKeeper it
    never expires: the soak saw a deploy never started.  The second reap
    that sees it gives it back; a job it drives is kept."""
    sw = Swflows(local.store, Clients(), local.conf, start=False)
    board = MemoryBoard()
    driver = conductor.Conductor(sw, board=board, workers=2)  # type: ignore[arg-type]
    try:
        for flow_id in ("f-lost-answer", "f-driven"):
            board.post(flow_id, flow_id)
        jobs = {board.flow_of(job): job for job in board.jobs()}
        for job in jobs.values():
            assert board.claim(job, driver.name)
        driver._held["f-driven"] = jobs["f-driven"]
        assert driver.reap_owners() == []  # seen once: it may be settling
        assert board.owner(jobs["f-lost-answer"]) == driver.name
        assert driver.reap_owners() == ["f-lost-answer"]
        assert board.owner(jobs["f-lost-answer"]) is None
        assert board.owner(jobs["f-driven"]) == driver.name
        assert driver.reap_owners() == []
    finally:
        sw.close()
        driver.runner.close()


def test_within_waits_its_bound_and_never_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answer = threading.Event()
    started = time.monotonic()
    assert not liveness.within(0.3, "leaving a board", answer.wait)
    assert 0.25 <= time.monotonic() - started < 2
    assert "leaving a board: no answer within 0.3 s" in caplog.text
    answer.set()

    def refused() -> None:
        raise ConnectionError("refused")

    assert liveness.within(5, "retiring", refused)  # ended in time, not raised
    assert liveness.within(5, "closing", lambda: None)
