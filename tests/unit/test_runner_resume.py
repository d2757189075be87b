"""Runner corners the crash matrix (tests/crash) found: resuming a flow that
was reverting past its wait, and a wait() that comes after its flow ended."""

from __future__ import annotations

import time
from typing import Any

import pytest
from taskflow import states as tf_states

from swflows import exceptions
from swflows.engine import driving
from swflows.engine import runner as runner_mod
from swflows.persistence import flow_registry as flow_rows


class FakeStorage:
    def __init__(self, atom_states: dict[str, str]) -> None:
        self.atom_states = atom_states
        self.values = {
            "deployment_id": "gone",
            "generation": 2,
            "timeout": 60,
            "action_started": 0.0,
            "signal_store": {},
        }

    def get_atom_state(self, name: str) -> str:
        return self.atom_states[name]

    def fetch(self, name: str) -> Any:
        return self.values[name]


class FakeEngine:
    def __init__(self, storage: FakeStorage) -> None:
        self.storage = storage

    def compile(self) -> None:
        pass

    def prepare(self) -> None:
        pass


class WaitAtom:
    name = "wait"
    parks = True
    transport_name = "TEMP_URL_SIGNAL"
    transport_options: dict[str, Any] = {}


def drive(atom_states: dict[str, str]) -> driving._Drive:
    engine = FakeEngine(FakeStorage(atom_states))
    return driving._Drive("f1", engine, {"publish": WaitAtom()})


@pytest.mark.parametrize(
    "wait_state",
    [tf_states.REVERTING, tf_states.REVERTED, tf_states.FAILURE, tf_states.SUCCESS],
)
def test_a_flow_past_its_wait_is_not_parked_again(
    runner: runner_mod.Runner, wait_state: str
) -> None:
    # e.g. an undeploy killed while reverting: its row is gone, and the step
    # before the wait is still SUCCESS because it is reverted later
    resumed = drive({"publish": tf_states.SUCCESS, "wait": wait_state})
    assert runner._park_if_waiting(resumed) is False
    assert resumed.parking is False


def test_a_flow_whose_deployment_is_gone_runs_on(runner: runner_mod.Runner) -> None:
    resumed = drive({"publish": tf_states.SUCCESS, "wait": tf_states.PENDING})
    assert runner._park_if_waiting(resumed) is False
    assert resumed.parking is False


def test_wait_after_the_flow_ended_raises_its_error(
    runner: runner_mod.Runner,
) -> None:
    # a resumed flow can revert and be forgotten before anyone waits for it
    runner._future("f1")
    runner._finish("f1", RuntimeError("reverted"))
    with pytest.raises(RuntimeError, match="reverted"):
        runner.wait("f1", timeout=1)


def test_wait_after_the_flow_ended_returns(runner: runner_mod.Runner) -> None:
    runner._future("f2")
    runner._finish("f2", None)
    runner.wait("f2", timeout=1)


def test_a_wait_for_a_custom_flow_that_times_out_names_the_flow(
    runner: runner_mod.Runner,
) -> None:
    # before its first wait, a custom flow's row names no deployment
    runner.registry.add(
        "f3",
        kind=runner_mod.CUSTOM,
        deployment_id="",
        server_id="",
        owner=runner.owner,
        lease_until=time.time() + 60,
    )
    with pytest.raises(exceptions.WaitTimeout, match=r"^flow f3 still running"):
        runner.wait("f3", timeout=0)


def test_a_running_flow_asked_to_cancel_has_the_waits_it_polls_ended(
    runner: runner_mod.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # parallel branches reached two waits: it parked on one, and polls the
    # other in its thread now; a cancel must not wait for that action to end
    polling = drive({"publish": tf_states.SUCCESS, "wait": tf_states.RUNNING})
    polling.custom = True
    monkeypatch.setitem(runner._drives, "f1", polling)
    runner.registry.add(
        "f1",
        kind=runner_mod.CUSTOM,
        deployment_id="",
        server_id="",
        owner=runner.owner,
        lease_until=time.time() + 60,
    )
    ended: list[tuple[str, int, str | None]] = []
    monkeypatch.setattr(
        driving,
        "end_wait",
        lambda services, waiting, note: ended.append(
            (waiting["deployment_id"], waiting["generation"], note)
        ),
    )
    runner.renew_leases()
    assert ended == []
    runner.registry.request_cancel("f1", "cancelled: not now")
    runner.renew_leases()
    assert ended == [("gone", 2, "cancelled: not now")]


class StoppedStorage:
    """A flow's storage after a run that stopped on an error, mid-flow."""

    def get_flow_state(self) -> str:
        return str(tf_states.RUNNING)


def test_a_flow_failing_on_every_run_is_set_aside(runner: runner_mod.Runner) -> None:
    # a run that stops on an error (not a revert, not close()) releases the
    # flow; each such release counts, so it is not retried forever
    runner.registry.add(
        "f1",
        kind="deploy",
        deployment_id="d1",
        server_id="s1",
        owner=runner.owner,
        lease_until=time.time() + 30,
    )
    engine = FakeEngine(StoppedStorage())  # type: ignore[arg-type]
    for _ in range(runner_mod.MAX_TAKEOVERS):
        assert runner.registry.claim(
            "f1", runner.owner, lease_until=time.time() + 30, now=time.time()
        )
        runner._after_run(driving._Drive("f1", engine, {}), RuntimeError("boom"))
    row = runner.registry.get("f1")
    assert row is not None and row.owner is None
    assert row.takeovers == runner_mod.MAX_TAKEOVERS
    assert runner.resume_interrupted() == []
    row = runner.registry.get("f1")
    assert row is not None and row.state == flow_rows.BROKEN


class EndedStorage(StoppedStorage):
    def get_flow_state(self) -> str:
        return str(tf_states.SUCCESS)


def test_a_run_that_lost_its_flow_leaves_its_row_to_the_new_owner(
    runner: runner_mod.Runner,
) -> None:
    """A run told its lease (or job claim) was lost, whose last step ended
    as it was told, removes neither the flow's row nor its logbook: the new
    owner drives the flow from them (removing them stranded its deployment
    IN_PROGRESS with no flow to end it)."""
    runner.registry.add(
        "f1",
        kind="deploy",
        deployment_id="d1",
        server_id="s1",
        owner="another:1:x",
        lease_until=time.time() + 30,
    )
    lost = driving._Drive("f1", FakeEngine(EndedStorage()), {})  # type: ignore[arg-type]
    lost.lost = True
    runner._after_run(lost, None)
    row = runner.registry.get("f1")
    assert row is not None and row.owner == "another:1:x"


def test_a_logbook_that_cannot_be_read_is_not_taken_for_a_missing_one(
    runner: runner_mod.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a logbook that is not there means "never started": a database
    error reading it leaves the flow's row for a later takeover."""
    from taskflow import exceptions as tf_exc

    runner.registry.add(
        "f1",
        kind="deploy",
        deployment_id="d1",
        server_id="s1",
        owner=runner.owner,
        lease_until=time.time() + 30,
    )

    class Unreadable:
        def __enter__(self) -> Unreadable:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def get_logbook(self, book_id: str) -> Any:
            raise tf_exc.StorageFailure("the database went away")

    monkeypatch.setattr(runner, "_connection", Unreadable)
    with pytest.raises(tf_exc.StorageFailure):
        runner._load_and_submit("f1")
    assert runner.registry.get("f1") is not None
