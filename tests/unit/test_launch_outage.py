"""A deploy launched while the database is out of reach: its caller is told
the truth.  It returns once the flow is recorded (the outage rode
through), or raises and nothing of it is ever recorded; a write that
committed though its caller saw the connection drop is not written twice
(SQLite, the in-process cloud; the outage is an OperationalError raised
where the store is reached)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy.exc
from sqlalchemy import event

from swflows import exceptions, model, states
from swflows.engine import batching
from swflows.fixture import LocalSwflows
from swflows.persistence import batches
from tests.unit.test_runner_fencing import until


def outage_error() -> sqlalchemy.exc.OperationalError:
    return sqlalchemy.exc.OperationalError(
        "INSERT", {}, ConnectionRefusedError("connection refused")
    )


class Outage:
    """The database out of reach for the runner's new flows' writes, and
    for the caller's reads of its deployment once the first of those was
    tried, until ``end()``."""

    def __init__(self, local: LocalSwflows, monkeypatch: pytest.MonkeyPatch) -> None:
        self.on = threading.Event()
        self.on.set()
        self.records: list[list[str]] = []  # the flow ids of each try
        store = local.sw.store
        shown = store.get_deployment
        recorded = batches.record_new

        def get_deployment(deployment_id: str) -> model.Deployment:
            if self.on.is_set() and self.records:  # it went as the flow launched
                raise outage_error()
            found: model.Deployment = shown(deployment_id)
            return found

        def record_new(*args: Any, **kwargs: Any) -> None:
            self.records.append([row["id"] for row in args[2]])
            if self.on.is_set():
                raise outage_error()  # before anything was written
            recorded(*args, **kwargs)

        monkeypatch.setattr(store, "get_deployment", get_deployment)
        monkeypatch.setattr(batches, "record_new", record_new)

    def end(self) -> None:
        self.on.clear()


@pytest.fixture
def local() -> Iterator[LocalSwflows]:
    with LocalSwflows(overrides={"runner": {"launch_batch": 64}}) as made:
        yield made


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_a_deploy_rides_through_an_outage_shorter_than_its_bound(
    local: LocalSwflows, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its flow waits for the database with its caller: once it is back
    the deployment is returned and completes, once.  (The caller used to
    get the outage's error while the flow went on to be recorded and run:
    a deploy its caller was told had failed.)"""
    sw = local.sw
    config = sw.create_config("app", "#!/bin/sh\n", group="script")
    server_id = local.new_server()
    outage = Outage(local, monkeypatch)
    thread, outcome = in_thread(
        lambda: sw.deploy(server_id, config.id, wait=False, wait_timeout=30)
    )
    until(lambda: len(outage.records) >= 2, 30)  # tried, and tried again
    time.sleep(0.3)
    assert thread.is_alive() and not outcome  # still waiting, not failed
    outage.end()
    thread.join(30)
    assert outcome and isinstance(outcome[0], model.Deployment), outcome
    assert sw.wait(outcome[0].id, timeout=30).status == states.COMPLETE
    assert len(local.agent.ran) == 1
    until(lambda: not sw.list_flows(), 30)


@pytest.mark.parametrize("wait", [False, True], ids=["not-blocking", "blocking"])
def test_a_deploy_given_up_in_an_outage_leaves_nothing(
    local: LocalSwflows, monkeypatch: pytest.MonkeyPatch, wait: bool
) -> None:
    """Past its bound, a deploy none of whose writes can have committed
    is withdrawn: its caller gets a FlowError saying so, and when the
    database is back nothing of it is recorded or run."""
    sw = local.sw
    config = sw.create_config("app", "#!/bin/sh\n", group="script")
    server_id = local.new_server()
    chosen = model.new_id()
    outage = Outage(local, monkeypatch)
    batcher = sw.runner._batcher()
    assert batcher is not None
    rounds: list[list[str]] = []  # each try's that did not fail: its flows
    record = batching._record

    def counted(*args: Any) -> list[Any]:
        made = record(*args)
        rounds.append([item.flow_id for item in made])
        return made

    monkeypatch.setattr(batching, "_record", counted)
    with pytest.raises(exceptions.FlowError, match="not recorded") as raised:
        sw.deploy(
            server_id, config.id, deployment_id=chosen, wait=wait, wait_timeout=1.5
        )
    assert chosen in str(raised.value)
    assert "database was unreachable" in str(raised.value)
    tries = len(outage.records)
    assert tries >= 1
    assert not batcher._items
    outage.end()
    # the round's next try (its backoff is at most 5 s) writes nothing
    until(lambda: rounds, 30)
    assert rounds == [[]]
    assert len(outage.records) == tries
    with pytest.raises(exceptions.DeploymentNotFound):
        sw.show(chosen)
    assert not sw.list_flows()
    assert not local.agent.ran
    # the same id deployed again is a new deployment, run once
    dep = sw.deploy(server_id, config.id, deployment_id=chosen, wait_timeout=30)
    assert dep.status == states.COMPLETE
    assert len(local.agent.ran) == 1


def test_a_record_that_committed_though_its_connection_dropped_is_not_made_twice(
    local: LocalSwflows, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write of a round's rows commits, then the connection drops
    before the commit is acknowledged: the next try finds them and writes
    nothing.  (It used to insert them again, fail on the duplicate, and
    tell the caller its deploy failed while the flow, recorded, ran.)"""
    sw = local.sw
    config = sw.create_config("app", "#!/bin/sh\n", group="script")
    server_id = local.new_server()
    recorded = batches.record_new
    tries: list[dict[str, Any]] = []

    def record_new(*args: Any, **kwargs: Any) -> None:
        tries.append(dict(kwargs))
        recorded(*args, **kwargs)
        if len(tries) == 1:
            raise outage_error()  # committed, then the connection dropped

    monkeypatch.setattr(batches, "record_new", record_new)
    dep = sw.deploy(server_id, config.id, wait_timeout=30)
    assert dep.status == states.COMPLETE
    assert [t["maybe_written"] for t in tries] == [False, True]
    assert len(local.agent.ran) == 1
    until(lambda: not sw.list_flows(), 30)


def test_a_flow_never_has_its_row_without_its_logbook(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A flow launched in an engine of its own (here an undeploy) has its
    row and its logbook written in one transaction: the database going
    away as the logbook is written, the clean-up failing too, leaves
    neither (a row alone was taken over later, from no logbook)."""
    with LocalSwflows(overrides={"runner": {"launch_batch": 0}}) as local:
        sw = local.sw
        config = sw.create_config("app", "#!/bin/sh\n", group="script")
        dep = sw.deploy(local.new_server(), config.id, wait_timeout=30)
        engine = sw.store._engine
        gone = threading.Event()

        def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            text = statement.lstrip().upper()
            if text.startswith("INSERT INTO") and "FLOWDETAILS" in text.split("(")[0]:
                gone.set()
            if gone.is_set() and text.startswith(("INSERT", "DELETE", "UPDATE")):
                raise outage_error()

        event.listen(engine, "before_cursor_execute", before)
        try:
            with pytest.raises(Exception) as raised:
                sw.undeploy(dep.id, wait_timeout=30)
        finally:
            event.remove(engine, "before_cursor_execute", before)
        assert gone.is_set()
        assert "connection refused" in str(raised.value)
        assert not sw.list_flows()
        assert sw.show(dep.id).status == states.COMPLETE
        sw.undeploy(dep.id, wait_timeout=30)  # the database back: it runs
        with pytest.raises(exceptions.DeploymentNotFound):
            sw.show(dep.id)
