"""A runner that lost a flow while one of its steps ran writes nothing more
to the flow's logbook and runs no further step: the new owner resumes from
a logbook only it writes (an embedded runner on SQLite, no cloud)."""

from __future__ import annotations

import contextlib
import threading
import time
import types
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from taskflow import engines, task
from taskflow import states as tf_states
from taskflow.patterns import linear_flow

from swflows.api import Swflows
from swflows.clients.cloud import Clients
from swflows.engine import conductor
from swflows.fixture import LocalSwflows
from swflows.persistence import flow_registry as flow_rows

#: per gate: set when the held step started, and what let it end
STARTED: dict[str, threading.Event] = {}
GATES: dict[str, threading.Event] = {}
#: (gate, step) of every step that ran to its end
RAN: list[tuple[str, str]] = []


class Hold(task.Task):  # type: ignore[misc]
    def __init__(self, name: str, gate: str) -> None:
        super().__init__(name=name, inject={"gate": gate}, provides=f"{name}_done")

    def execute(self, gate: str) -> str:
        if self.name == "fence.held":
            STARTED[gate].set()
            GATES[gate].wait(30)
        RAN.append((gate, self.name))
        return "done"


def gated(gate: str) -> Any:
    """Three steps; the middle one waits for its gate."""
    return linear_flow.Flow("fence").add(
        Hold("fence.before", gate), Hold("fence.held", gate), Hold("fence.after", gate)
    )


@pytest.fixture
def local() -> Iterator[LocalSwflows]:
    with LocalSwflows() as made:
        yield made


def until(check: Any, seconds: float) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"not within {seconds} s")


def test_a_step_ending_after_its_flow_was_taken_over_writes_nothing(
    local: LocalSwflows,
) -> None:
    gate = "taken-over"
    STARTED[gate], GATES[gate] = threading.Event(), threading.Event()
    sw = local.sw
    flow_id = sw.run_flow(gated, gate=gate)
    assert STARTED[gate].wait(30)
    registry = flow_rows.FlowRegistry(sw.store)
    # another runner takes the flow over, as after this one's lease ran out
    assert registry.claim(
        flow_id,
        "other-runner",
        lease_until=time.time() + 600,
        now=time.time() + 3600,
        from_states=(flow_rows.RUNNING,),
    )
    GATES[gate].set()
    until(lambda: sw.runner.drives_now(flow_id) is None, 30)
    # the step ran, but its end is not this runner's to write, and the
    # next step did not run: the flow is the new owner's, row and logbook
    assert (gate, "fence.held") in RAN
    assert (gate, "fence.after") not in RAN
    row = registry.get(flow_id)
    assert row is not None
    assert (row.state, row.owner) == (flow_rows.RUNNING, "other-runner")
    backend = sw.store.taskflow_backend()
    with contextlib.closing(backend.get_connection()) as conn:
        detail = conn.get_logbook(flow_id).find(flow_id)
    steps = {atom.name: atom.state for atom in detail}
    assert steps["fence.before"] == tf_states.SUCCESS
    assert steps["fence.held"] == tf_states.RUNNING
    assert steps["fence.after"] == tf_states.PENDING
    assert sw.runner.failures["record end"] == 0


class MemoryBoard:
    """An in-memory jobboard for one process, with the claim rules of
    TaskFlow's boards that a conductor relies on (one claimer per job;
    only the claimer extends, consumes or abandons it); :meth:`drop_claims`
    does what an expired ZooKeeper session does to a conductor's claims."""

    kind = "memory"

    def __init__(self, claim_expiry: float = 30.0) -> None:
        self.claim_expiry = claim_expiry
        self._jobs: dict[str, Any] = {}
        self._claims: dict[str, str] = {}
        self._live: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.sequence = 0
        #: calls of :meth:`posted`
        self.probes = 0

    def post(self, flow_id: str, name: str, server: str = "") -> str:
        job = types.SimpleNamespace(
            uuid=uuid.uuid4().hex, flow_id=flow_id, name=name, server=server
        )
        with self._lock:
            self._jobs[job.uuid] = job
            self.sequence += 1
        return str(job.uuid)

    def posted(self) -> int | None:
        """The jobs ever posted, as a Redis board's sequence counts them."""
        with self._lock:
            self.probes += 1
            return self.sequence

    def on_posted(self, callback: Any) -> bool:
        return False

    def jobs(self, *, only_unclaimed: bool = False) -> list[Any]:
        with self._lock:
            return [
                job
                for job in self._jobs.values()
                if not (only_unclaimed and job.uuid in self._claims)
            ]

    def claimable(self, who: str) -> tuple[list[Any], set[str]]:
        """The unclaimed jobs, and the servers of those another holds, as a
        Redis board lists them for a claim."""
        with self._lock:
            jobs = list(self._jobs.values())
            owners = dict(self._claims)
        free = [job for job in jobs if job.uuid not in owners]
        elsewhere = {
            self.server_of(job)
            for job in jobs
            if owners.get(job.uuid) not in (None, who) and self.server_of(job)
        }
        return free, elsewhere

    def listed(self) -> list[Any]:
        return self.jobs()

    def owned(self) -> list[tuple[Any, str | None]]:
        return [(job, self.owner(job)) for job in self.jobs()]

    @staticmethod
    def flow_of(job: Any) -> str | None:
        return str(job.flow_id)

    @staticmethod
    def server_of(job: Any) -> str:
        return str(getattr(job, "server", ""))

    def claim(self, job: Any, who: str) -> bool:
        with self._lock:
            if job.uuid not in self._jobs or job.uuid in self._claims:
                return False
            self._claims[job.uuid] = who
            return True

    def owner(self, job: Any) -> str | None:
        with self._lock:
            return self._claims.get(job.uuid)

    def extend(self, job: Any, who: str) -> bool:
        return self.owner(job) == who

    def _settle(self, job: Any, who: str, remove: bool) -> bool:
        with self._lock:
            if self._claims.get(job.uuid) != who:
                return False
            del self._claims[job.uuid]
            if remove:
                del self._jobs[job.uuid]
            return True

    def consume(self, job: Any, who: str) -> bool:
        return self._settle(job, who, remove=True)

    def trash(self, job: Any, who: str) -> bool:
        return self._settle(job, who, remove=True)

    def abandon(self, job: Any, who: str) -> bool:
        return self._settle(job, who, remove=False)

    def announce(self, name: str, info: dict[str, Any]) -> None:
        self._live[name] = info

    def retire(self, name: str) -> None:
        self._live.pop(name, None)

    def conductors(self) -> dict[str, dict[str, Any]]:
        return dict(self._live)

    def is_live(self, owner: str, live: dict[str, Any]) -> bool:
        return owner in live

    def close(self) -> None:
        pass

    def drop_claims(self, who: str) -> None:
        with self._lock:
            for job_id in [j for j, owner in self._claims.items() if owner == who]:
                del self._claims[job_id]


def test_a_flow_its_own_conductor_claims_again_is_not_driven_twice(
    local: LocalSwflows,
) -> None:
    gate = "claimed-again"
    STARTED[gate], GATES[gate] = threading.Event(), threading.Event()
    sw = Swflows(local.store, Clients(), local.conf, start=False)
    board = MemoryBoard()
    driver = conductor.Conductor(sw, board=board, workers=2)  # type: ignore[arg-type]
    sw.adopt_runner(driver.runner)
    try:
        claimed_again(sw, driver, board, gate)
    finally:
        driver.close()
        sw.close()


def claimed_again(
    sw: Swflows, driver: conductor.Conductor, board: MemoryBoard, gate: str
) -> None:
    board.announce(driver.name, {})
    flow_id = sw.run_flow(gated, gate=gate)
    assert driver.claim_some() == [flow_id]
    assert STARTED[gate].wait(30)
    # every claim of the conductor goes at once; it claims the job again
    # before its drive of the flow noticed
    board.drop_claims(driver.name)
    assert driver.claim_some() == [flow_id]
    assert driver.runner.driving == 1
    GATES[gate].set()
    assert sw.wait_flow(flow_id, timeout=30)["state"] == tf_states.SUCCESS
    ran = [step for g, step in RAN if g == gate]
    assert ran == ["fence.before", "fence.held", "fence.after"]
    until(lambda: board.jobs() == [], 10)  # consumed once it ended


class Noop(task.Task):  # type: ignore[misc]
    def execute(self) -> str:
        return "done"


def one_step() -> Any:
    return linear_flow.Flow("one").add(Noop("one.noop"))


def test_a_flow_being_launched_is_neither_orphaned_nor_left_to_expire(
    local: LocalSwflows, monkeypatch: pytest.MonkeyPatch
) -> None:
    # under load, a launch outlived its first lease: the runner's own
    # takeover found the row expired and not driven, took it, failed to
    # resume a flow whose inputs were not stored yet and let the row go;
    # the launch then wrote to a logbook that was nobody's (FlowFenced)
    sw = local.sw
    runner = sw.runner
    runner.lease_seconds = 0.2
    registry = flow_rows.FlowRegistry(sw.store)
    real_load = engines.load
    seen: dict[str, Any] = {}

    def slow_load(flow: Any, **kwargs: Any) -> Any:
        detail = kwargs.get("flow_detail")
        if not seen and detail is not None:
            flow_id = detail.uuid
            time.sleep(0.3)  # the launch outlives its lease
            seen["resumed"] = runner.resume_interrupted()
            before = registry.get(flow_id)
            runner.renew_leases()
            after = registry.get(flow_id)
            assert before is not None and after is not None
            seen["owner"] = after.owner
            seen["renewed"] = (after.lease_until or 0) > (before.lease_until or 0)
        return real_load(flow, **kwargs)

    monkeypatch.setattr(engines, "load", slow_load)
    flow_id = sw.run_flow(one_step)
    assert sw.wait_flow(flow_id, timeout=30)["state"] == "SUCCESS"
    assert seen == {"resumed": [], "owner": runner.owner, "renewed": True}
    assert runner.failures["resume"] == 0
