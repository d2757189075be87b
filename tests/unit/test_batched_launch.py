"""New deployments launched together (:mod:`swflows.engine.batching`):
their logbooks are the ones an engine leaves at its park, each server's
metadata is published once for the deployments queued together, and a
flow whose step fails in a round goes on in an engine of its own,
failing alone (SQLite, the in-process cloud)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
import types
from collections.abc import Iterator
from typing import Any

import pytest
from taskflow import engines, task
from taskflow import states as tf_states
from taskflow import storage as tf_storage
from taskflow.patterns import linear_flow
from taskflow.persistence import models

from swflows import failpoints, flows, model, states
from swflows import transport_names as names
from swflows.engine import batching
from swflows.engine.driving import Claim
from swflows.engine.results import META_KEY
from swflows.fixture import LocalSwflows
from swflows.flows import common, deploy
from swflows.persistence import logbook
from swflows.transports import impl_poll_temp_url
from tests.unit.test_runner_fencing import until

PLAN = common.Plan(names.TEMP_URL_SIGNAL, names.POLL_TEMP_URL).to_kwargs()


def local_swflows(batch: int) -> LocalSwflows:
    return LocalSwflows(overrides={"runner": {"launch_batch": batch}})


@pytest.fixture
def local() -> Iterator[LocalSwflows]:
    with local_swflows(64) as made:
        yield made


def new_item(inputs: dict[str, Any]) -> Any:
    flow = deploy.make_flow(**PLAN)
    steps = batching._steps(flow)
    assert steps is not None
    return batching._Item(
        flow_id="f1",
        kind=deploy.NAME,
        plan=PLAN,
        inputs=inputs,
        meta={"kind": deploy.NAME},
        flow=flow,
        future=concurrent.futures.Future(),
        progressed=threading.Event(),
        publish=steps[0],
        wait=steps[1],
    )


def comparable(detail: Any) -> dict[str, dict[str, Any]]:
    found = {}
    for atom in detail:
        values = atom.to_dict()
        values.pop("uuid")
        found[atom.name] = values
    return found


def test_a_parked_logbook_is_built_as_taskflow_storage_builds_it() -> None:
    """The logbook of a flow launched in a round, at its park, is what
    TaskFlow's own storage makes of the same inputs and results."""
    inputs = {
        "deployment_id": "d1",
        "server_id": "s1",
        "source_config_id": "c1",
        "action": "CREATE",
        "input_values": {"x": 1},
        "name": "app",
        "timeout": 60,
        "generation": 1,
        "signal_transport": names.TEMP_URL_SIGNAL,
        "parent_id": None,
    }
    item = new_item(inputs)
    batching._new_logbook(item)
    results = [{"object": "o"}, "derived", 123.5, 7]
    before_wait = list(item.flow)[:4]
    assert before_wait[-1] is item.publish
    for atom, result in zip(before_wait, results, strict=True):
        batching._succeeded(item, atom, result)
    item.detail.state = tf_states.SUSPENDED

    # the same made through TaskFlow's storage, as an engine does
    detail = models.FlowDetail(item.flow.name, uuid="f1")
    engines.save_factory_details(detail, flows.FACTORIES[deploy.NAME], [], PLAN)
    detail.meta[META_KEY] = item.meta
    storage = tf_storage.Storage(detail)
    storage.inject(inputs)
    storage.ensure_atoms(list(item.flow))
    for atom in item.flow:
        if atom.inject:  # as an engine does, transient
            storage.inject_atom_args(atom.name, atom.inject, transient=True)
    for atom, result in zip(before_wait, results, strict=True):
        storage.save(atom.name, result, tf_states.SUCCESS)
        storage.set_task_progress(atom.name, 1.0)
    storage.set_flow_state(tf_states.SUSPENDED)

    assert comparable(item.detail) == comparable(detail)
    assert item.detail.state == detail.state == tf_states.SUSPENDED
    assert item.detail.meta == detail.meta
    # each step's arguments are found as TaskFlow finds them
    item.values["services"] = storage_services = object()
    storage.inject({"services": storage_services}, transient=True)
    for atom in item.flow:
        assert batching._arguments(item, atom) == storage.fetch_mapped_args(
            atom.rebind,
            atom_name=atom.name,
            optional_args=atom.optional,
            scope_walker=[[a.name for a in before_wait][::-1]],
        )


def test_a_batched_flow_parks_as_an_engine_parks_it() -> None:
    """The same deployment launched by an engine and in a round: its
    logbook at the park holds the same steps, states, versions and
    results of the same shape."""
    parked: dict[int, dict[str, Any]] = {}
    for batch in (0, 8):
        with local_swflows(batch) as made:
            # its server has not run it yet: it stays parked
            made.agent._run = lambda raw: None  # type: ignore[method-assign]
            sw = made.sw
            config = sw.create_config("app", "#!/bin/sh\n", group="script")
            dep = sw.deploy(made.new_server(), config.id, wait=False)
            (row,) = until(
                lambda dep=dep, sw=sw: [
                    r
                    for r in sw.list_flows(deployment_id=dep.id)
                    if r.state == "PARKED"
                ],
                30,
            )
            backend = sw.store.taskflow_backend()
            with contextlib.closing(backend.get_connection()) as conn:
                detail = conn.get_logbook(row.id).find(row.id)
            assert detail.state == tf_states.SUSPENDED
            parked[batch] = {
                name: {
                    **{k: v for k, v in values.items() if k != "results"},
                    "results": shape(values["results"]),
                }
                for name, values in comparable(detail).items()
            }
    assert parked[8] == parked[0]
    states_seen = {name: v["state"] for name, v in parked[8].items()}
    assert list(states_seen.values()).count(tf_states.SUCCESS) == 5  # 4 + inputs


def ran_configs(local: LocalSwflows) -> list[str]:
    """The derived configs the servers ran, one per deployment run."""
    return sorted(str(item.id) for item in local.agent.ran)


def shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    return type(value).__name__


def test_deployments_launched_together_share_their_servers_publishes(
    local: LocalSwflows,
) -> None:
    """30 deployments to 3 servers queued behind one round: each runs once,
    and each server's metadata is published once a round for all of its
    deployments in it, not once each."""
    sw = local.sw
    writes: list[str] = []
    writes_to = local.objects.on_write

    def record(container: str, name: str, body: bytes) -> None:
        if container == impl_poll_temp_url.DEFAULT_CONTAINER and b"deployments" in body:
            writes.append(name)
        if writes_to is not None:
            writes_to(container, name, body)

    local.objects.on_write = record
    config = sw.create_config("app", "#!/bin/sh\n", group="script")
    servers = [local.new_server() for _ in range(3)]
    held, release = threading.Event(), threading.Event()

    def hold_first(name: str) -> None:
        if not held.is_set():
            held.set()
            release.wait(30)

    batcher = sw.runner._batcher()
    assert batcher is not None
    with failpoints.armed("deployment.create", hold_first):
        pool = concurrent.futures.ThreadPoolExecutor(30)
        try:
            made = [
                pool.submit(sw.deploy, servers[i % 3], config.id, wait=False)
                for i in range(30)
            ]
            assert held.wait(30)
            # all 30 launched: those not in the held round wait for the next
            until(lambda: len(batcher._items) == 30, 30)
            release.set()
            ids = [future.result(60).id for future in made]
        finally:
            release.set()
            pool.shutdown()
    for dep_id in ids:
        assert sw.wait(dep_id, timeout=60).status == states.COMPLETE
    assert ran_configs(local) == sorted(str(sw.show(i).config_id) for i in ids)
    # one publish per server for each round: 6, and more only when a
    # publish is written again because the next round wrote rows of its
    # server meanwhile (the copy published is kept current); never one
    # for each deployment
    assert len(writes) < 30 // 2, writes
    assert not sw.list_flows()


def test_a_step_failing_in_a_round_fails_only_its_own_deployment(
    local: LocalSwflows,
) -> None:
    """The first flow of the round fails writing its row, there and again
    in the engine it is handed to: it alone reverts, FAILED naming the
    step; the flows launched with it complete."""
    sw = local.sw
    config = sw.create_config("app", "#!/bin/sh\n", group="script")
    servers = [local.new_server() for _ in range(2)]
    failed_once = threading.Event()
    first = threading.Lock()  # a round's flows may run their steps at once

    def fail_the_first(name: str) -> None:
        thread = threading.current_thread().name
        if thread.startswith(("swflows-launch", "swflows-round")):
            with first:
                failing = not failed_once.is_set()
                failed_once.set()
            if failing:
                raise failpoints.FailpointError(name)
        if thread.startswith("swflows-runner"):  # its own engine
            raise failpoints.FailpointError(name)

    with failpoints.armed("deployment.create", fail_the_first):
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            made = [
                pool.submit(sw.deploy, servers[i % 2], config.id, wait=False)
                for i in range(6)
            ]
            outcomes: list[Any] = []
            for future in made:
                try:
                    outcomes.append(future.result(60))
                except Exception as exc:  # the failpoint's, through the flow
                    outcomes.append(exc)
    assert failed_once.is_set()
    done = [o for o in outcomes if not isinstance(o, Exception)]
    errors = [o for o in outcomes if isinstance(o, Exception)]
    # its row was never written: its caller gets the step's error
    assert len(errors) == 1, outcomes
    assert "deployment.create" in str(errors[0])
    assert len(done) == 5
    for dep in done:
        assert sw.wait(dep.id, timeout=60).status == states.COMPLETE
    assert ran_configs(local) == sorted(str(sw.show(d.id).config_id) for d in done)
    until(lambda: not sw.list_flows(), 30)


@pytest.mark.parametrize("batch", [0, 64], ids=["engine", "batched"])
def test_an_action_ended_before_its_flow_parked_is_looked_at_at_once(
    batch: int,
) -> None:
    """A signal delivered while the metadata is being published (its
    action ends before its flow parks) is not left for the watcher's next
    poll, an hour away: the delivery, or the park that finds the action
    ended, has the watcher look at once."""
    overrides = {"runner": {"launch_batch": batch}, "watcher": {"poll_interval": 3600}}
    with LocalSwflows(overrides=overrides) as local:
        local.agent._run = lambda raw: None  # type: ignore[method-assign]
        sw = local.sw
        config = sw.create_config("app", "#!/bin/sh\n", group="script")
        chosen = model.new_id()
        delivered: list[bool] = []

        def deliver(name: str) -> None:
            if not delivered:
                delivered.append(sw.signal(chosen, {"deploy_status_code": 0}))

        with failpoints.armed("metadata.publish", deliver):
            dep = sw.deploy(
                local.new_server(), config.id, deployment_id=chosen, wait_timeout=30
            )
        assert delivered == [True]
        assert dep.status == states.COMPLETE
        until(lambda: not sw.list_flows(), 30)


def test_a_group_member_waiting_for_its_round_is_not_launched_again(
    local: LocalSwflows,
) -> None:
    """A member whose flow waits for its round has neither a flow row nor
    a deployment yet: the group's driver, ticking meanwhile, does not take
    it for a flow that never started and launch it again."""
    sw = local.sw
    config = sw.create_config("app", "#!/bin/sh\n", group="script")
    servers = {f"m{i}": local.new_server() for i in range(3)}
    held, release = threading.Event(), threading.Event()

    def hold_first(name: str) -> None:
        if not held.is_set():
            held.set()
            release.wait(30)

    with failpoints.armed("deployment.create", hold_first):
        sw.create_group("fleet", config.id, servers, wait=False)
        assert held.wait(30)
        time.sleep(1.0)  # several of the driver's ticks (0.1 s here)
        release.set()
        shown = sw.wait_group("fleet", 60)
    assert shown["status"] == states.COMPLETE, shown["status_reason"]
    members = shown["operation"]["members"].values()
    assert [m["launches"] for m in members] == [1, 1, 1]
    assert len(local.agent.ran) == 3


class Noted(task.Task):  # type: ignore[misc]
    def __init__(self, name: str, ran: list[str]) -> None:
        super().__init__(name=name)
        self.ran = ran

    def execute(self) -> None:
        self.ran.append(self.name)


def held_in_a_round(steps: list[str], claim: Claim, ran: list[str]) -> Any:
    """A conductor's flow of ``steps`` (the last one publishes) that a
    round holds, lent ``claim``; the round, with the runner as ``runner``."""
    flow = linear_flow.Flow("f").add(*(Noted(name, ran) for name in steps))
    item = batching._Item(
        flow_id="f1",
        kind=deploy.NAME,
        plan={},
        inputs={"deployment_id": "d1", "server_id": "s1"},
        meta={},
        flow=flow,
        future=concurrent.futures.Future(),
        progressed=threading.Event(),
        publish=list(flow)[-1],
        wait=None,
        claim=claim,
        recorded=True,
    )
    batching._add_steps(
        item, models.LogBook("b", uuid="f1"), models.FlowDetail("f", uuid="f1")
    )
    runner: Any = types.SimpleNamespace(
        services_for=lambda _: types.SimpleNamespace(fenced=lambda _: object()),
        _lock=threading.Lock(),
        _launching={"f1"},
    )
    rounds = batching.Batcher(runner, 8)
    rounds._items["f1"] = item
    return rounds


def test_a_rounds_flow_runs_no_step_once_its_claim_is_lost() -> None:
    """The claim lent by a conductor is checked before each step of a
    round, as an engine's are: once it may be another's, no step runs, and
    the flow leaves the round, its job settled by its row."""
    ran: list[str] = []

    def fence() -> None:
        if ran:  # lost once the first step ran
            raise logbook.FlowFenced("f1", "me", None)

    ended: list[bool | None] = []
    claim = Claim(fence=fence, done=ended.append)
    rounds = held_in_a_round(["one", "two", "publish"], claim, ran)
    assert rounds._run_before_publish(rounds._items["f1"]) is False
    assert ran == ["one"]
    assert ended == [False]
    assert not rounds.holds("f1") and rounds.runner._launching == set()


def test_a_rounds_flow_has_its_job_settled_while_the_round_still_holds_it() -> None:
    """A job claimed for the flow between its park and its job's settling
    (its signal came at once) finds the flow still driven here, and is
    given back: never held in the first job's place, and consumed as if
    its flow had ended with the first."""
    seen: list[tuple[bool | None, bool]] = []
    claim = Claim(
        fence=lambda: None,
        done=lambda parked: seen.append((parked, rounds.holds("f1"))),
    )
    rounds = held_in_a_round(["one", "publish"], claim, [])
    rounds._settle(rounds._items["f1"])
    assert seen == [(True, True)]
    assert not rounds.holds("f1") and rounds.runner._launching == set()


def test_a_round_runs_one_servers_flows_in_turn_and_servers_at_once() -> None:
    """Each deployment's row locks its server's until it commits: a round
    runs the flows of one server one after another, in their order, and
    those of different servers side by side."""
    runner: Any = types.SimpleNamespace(_lock=threading.Lock(), _launching=set())
    rounds = batching.Batcher(runner, 8)
    items = [
        types.SimpleNamespace(claim=object(), server_id=server, name=f"{server}{n}")
        for n in range(3)
        for server in ("a", "b")
    ]
    lock = threading.Lock()
    inside: dict[str, int] = {"a": 0, "b": 0}
    most: dict[str, int] = {"a": 0, "b": 0}
    order: list[str] = []
    # the first flows of both servers run at once, or this barrier breaks
    both = threading.Barrier(2, timeout=5)

    def run(item: Any) -> bool:
        with lock:
            inside[item.server_id] += 1
            most[item.server_id] = max(most[item.server_id], inside[item.server_id])
        if item.name in ("a0", "b0"):
            both.wait()
        time.sleep(0.01)
        with lock:
            inside[item.server_id] -= 1
            order.append(item.name)
        return bool(item.name != "b1")  # handed to an engine of its own

    rounds._run_before_publish = run  # type: ignore[method-assign]
    ready: list[Any] = rounds._begin(items)  # type: ignore[arg-type]
    assert most == {"a": 1, "b": 1}
    assert [n for n in order if n[0] == "a"] == ["a0", "a1", "a2"]
    assert [n for n in order if n[0] == "b"] == ["b0", "b1", "b2"]
    assert [item.name for item in ready] == ["a0", "a1", "a2", "b0", "b2"]
