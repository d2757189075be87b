"""Custom flows on the dev cloud: composed from the catalogue, refused up
front when they could not be resumed, parked, resumed by another runner,
cancelled.  The servers are :class:`FakeServer` threads signalling the way
the agent does (``test_examples.py`` runs the examples with the agent)."""

from __future__ import annotations

import contextlib
import math
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from taskflow import engines as tf_engines
from taskflow import task
from taskflow.patterns import linear_flow, unordered_flow

from examples import backup_verify, maintenance, rolling
from swflows import exceptions, model, states
from swflows.api import Swflows
from swflows.engine import runner as runner_mod
from swflows.flows import compose
from swflows.persistence import flow_registry as flow_rows
from tests.functional import flowkit
from tests.functional.fakeserver import FakeServer
from tests.functional.flowkit import leftovers
from tests.functional.test_runner import instance, until

WAIT = 60

sw = flowkit.sw


def component_config(sw: Swflows) -> model.Config:
    """A component config with the actions the examples trigger."""
    entries = [
        {"actions": [action], "config": f"run {action}", "tool": "script"}
        for action in ("CREATE", "BACKUP", "VERIFY", "UPGRADE")
    ]
    return sw.create_config(
        "db",
        {"configs": entries},
        group="component",
        inputs=[
            {"name": "label", "default": "manual"},
            {"name": "archive", "default": ""},
            {"name": "broken", "default": "no"},
        ],
        outputs=[{"name": "archive"}, {"name": "checksum"}],
    )


def responder(item: dict[str, Any]) -> dict[str, Any]:
    """What the server's scripts would signal: BACKUP gives an archive,
    VERIFY a checksum of the archive it was given, UPGRADE fails where
    ``broken`` is yes."""
    values = {i["name"]: i.get("value") for i in item["inputs"]}
    action = values.get("deploy_action")
    outputs: dict[str, Any] = {}
    if action == "BACKUP":
        outputs["archive"] = f"/backups/{values['label']}.tar"
    if action == "VERIFY":
        outputs["checksum"] = f"sha256:{values['archive']}"
    failed = action == "UPGRADE" and values.get("broken") == "yes"
    return {
        **outputs,
        "deploy_stdout": f"ran {action}",
        "deploy_stderr": "boom" if failed else "",
        "deploy_status_code": 1 if failed else 0,
    }


def silent(item: dict[str, Any]) -> dict[str, Any] | None:
    """A server whose triggered actions never end (CREATE does)."""
    values = {i["name"]: i.get("value") for i in item["inputs"]}
    return responder(item) if values.get("deploy_action") == "CREATE" else None


@contextlib.contextmanager
def servers(sw: Swflows, count: int, answer: Any = responder) -> Iterator[list[str]]:
    ids = [str(uuid.uuid4()) for _ in range(count)]
    with contextlib.ExitStack() as stack:
        for server_id in ids:
            stack.enter_context(FakeServer(sw, server_id, answer))
        yield ids


def deployed(sw: Swflows, server_ids: list[str], **inputs: Any) -> list[str]:
    config = component_config(sw)
    made = []
    for server_id in server_ids:
        dep = sw.deploy(server_id, config.id, input_values=inputs, timeout=WAIT)
        assert dep.status == states.COMPLETE, dep.status_reason
        made.append(dep.id)
    return made


def logbook_steps(sw: Swflows) -> int:
    tables = sw.runner.backend.tables
    with sw.runner.backend.engine.connect() as conn:
        return len(conn.execute(tables.flowdetails.select()).fetchall())


def parked_flow(sw: Swflows, flow_id: str) -> flow_rows.FlowRow | None:
    row = sw.runner.registry.get(flow_id)
    return row if row is not None and row.state == flow_rows.PARKED else None


def triggered(flow_id: str, *names: str) -> list[str]:
    return [compose.trigger_deployment_id(flow_id, name) for name in names]


# ------------------------------------------------------------- refusals


def nested_factory() -> Any:
    def factory() -> Any:
        return linear_flow.Flow("x")

    return factory


class Holder:
    @staticmethod
    def factory() -> Any:
        return linear_flow.Flow("x")


@pytest.mark.parametrize(
    ("factory", "kwargs", "says"),
    [
        (lambda: linear_flow.Flow("x"), {}, "lambda"),
        (nested_factory(), {}, "module-level"),
        (Holder.factory, {}, "module-level"),
        ("__main__.make_flow", {}, "__main__"),
        ("examples.no_such_module.make_flow", {}, "cannot import"),
        ("examples.rolling.no_such_factory", {}, "has no no_such_factory"),
        ("examples.rolling.stopped_at", {"result": {}, "count": 0}, "not a flow"),
        (rolling.make_flow, {"deployment_ids": {"a", "b"}}, "set, not JSON"),
        (rolling.make_flow, {"deployment_ids": ("a",)}, "tuple, not JSON"),
        (rolling.make_flow, {"deployment_ids": [b"a"]}, "bytes, not JSON"),
        (rolling.make_flow, {"input_values": {1: "a"}}, "JSON keys are strings"),
        (rolling.make_flow, {"input_values": {"x": math.nan}}, "not JSON"),
    ],
)
def test_a_flow_that_could_not_resume_is_refused_up_front(
    sw: Swflows, factory: Any, kwargs: dict[str, Any], says: str
) -> None:
    with pytest.raises(exceptions.ValidationError, match=says):
        sw.run_flow(factory, **kwargs)
    assert sw.list_flows() == []
    with contextlib.closing(sw.runner.backend.get_connection()) as conn:
        assert list(conn.get_logbooks()) == []


# -------------------------------------------------------- running them


def test_outputs_feed_inputs_and_the_flow_parks_between(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    with instance(devcloud, tmp_path) as sw:
        with servers(sw, 2) as (db_server, check_server):
            database, verifier = deployed(sw, [db_server, check_server])
        # no server answers now: the flow parks at the backup's wait
        flow_id = sw.run_flow(
            backup_verify.make_flow, database=database, verifier=verifier
        )
        backup_id, verify_id = triggered(flow_id, "backup", "verify")
        row = until(lambda: parked_flow(sw, flow_id), what="the flow to park")
        assert (row.kind, row.deployment_id, row.server_id) == (
            flow_rows.CUSTOM,
            backup_id,
            db_server,
        )
        assert sw.runner.driving == 0
        assert sw.flow_result(flow_id)["state"] == flow_rows.PARKED
        assert [r.id for r in sw.list_flows(deployment_id=backup_id)] == [flow_id]
        backup = sw.show(backup_id)
        assert (backup.action, backup.parent_id) == ("BACKUP", database)
        with FakeServer(sw, db_server, responder):
            assert sw.wait(backup_id, timeout=WAIT).status == states.COMPLETE
            row = until(
                lambda: (
                    (found := parked_flow(sw, flow_id)) is not None
                    and found.deployment_id == verify_id
                    and found
                ),
                what="the flow to park at the verify wait",
            )
            assert row.server_id == check_server
        with FakeServer(sw, check_server, responder):
            ended = sw.wait_flow(flow_id, timeout=WAIT)
        result = ended["result"]
        assert ended["state"] == "SUCCESS" and ended["error"] is None
        assert ended["factory"] == "examples.backup_verify.make_flow"
        assert result["backup"]["outputs"]["archive"] == "/backups/nightly.tar"
        assert result["verify"]["outputs"]["checksum"] == "sha256:/backups/nightly.tar"
        assert result["report"] == (
            "backup /backups/nightly.tar: COMPLETE; "
            "verify: COMPLETE (sha256:/backups/nightly.tar)"
        )
        # the verify deployment got the backup's output as its input
        assert sw.show(verify_id).input_values["archive"] == "/backups/nightly.tar"
        assert sw.list_flows() == []
        assert logbook_steps(sw) == 0  # only the outcome is kept
        assert leftovers(sw, backup_id, verify_id) == {}
        assert sw.forget_flow(flow_id) is True
        with pytest.raises(exceptions.FlowNotFound):
            sw.flow_result(flow_id)


def test_a_new_runner_resumes_a_parked_custom_flow(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    with instance(devcloud, tmp_path) as first:
        with servers(first, 1) as (server,):
            [dep] = deployed(first, [server])
        flow_id = first.run_flow(rolling.make_flow, deployment_ids=[dep])
        until(lambda: parked_flow(first, flow_id), what="the flow to park")
    with instance(devcloud, tmp_path) as second:
        with FakeServer(second, server, responder):
            ended = second.wait_flow(flow_id, timeout=WAIT)
        assert ended["result"]["server-0"]["status"] == states.COMPLETE
        assert leftovers(second, *triggered(flow_id, "server-0")) == {}


def test_rolling_stops_at_the_first_failure(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    with instance(devcloud, tmp_path) as sw, servers(sw, 4) as hosts:
        deps = deployed(sw, hosts[:1]) + deployed(sw, hosts[1:2], broken="yes")
        deps += deployed(sw, hosts[2:])
        flow_id = sw.run_flow(rolling.make_flow, deployment_ids=deps)
        ended = sw.wait_flow(flow_id, timeout=WAIT * 2)
        result = ended["result"]
        assert ended["state"] == "SUCCESS"
        assert result["server-0"]["status"] == states.COMPLETE
        assert result["server-1"]["status"] == states.FAILED
        assert result["server-1"]["reason"]["kind"] == "exit_code"
        assert "server-2" not in result and "server-3" not in result
        assert rolling.stopped_at(result, len(deps)) == 1
        # the servers after it were left untouched: no deployment for them
        for host in hosts[2:]:
            assert [d.action for d in sw.list_deployments(server_id=host)] == ["CREATE"]
        # the one done before is not reverted
        assert sw.show(result["server-0"]["deployment_id"]).status == states.COMPLETE
        names = [f"server-{i}" for i in range(len(deps))]
        assert leftovers(sw, *triggered(flow_id, *names)) == {}


def test_cancelling_the_awaited_deployment_is_a_result(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    with instance(devcloud, tmp_path) as sw, servers(sw, 2, silent) as hosts:
        deps = deployed(sw, hosts)
        flow_id = sw.run_flow(rolling.make_flow, deployment_ids=deps)
        first, second = triggered(flow_id, "server-0", "server-1")
        until(lambda: parked_flow(sw, flow_id), what="the flow to park")
        assert sw.cancel(first, "operator").status == states.FAILED
        ended = sw.wait_flow(flow_id, timeout=WAIT)
        assert ended["result"]["server-0"]["reason"]["kind"] == "cancelled"
        assert "server-1" not in ended["result"]
        with pytest.raises(exceptions.DeploymentNotFound):
            sw.show(second)
        assert leftovers(sw, first, second) == {}


def test_cancel_flow_reverts_it_and_its_own_steps(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    tickets = tmp_path / "tickets"
    tickets.mkdir()
    with instance(devcloud, tmp_path) as sw, servers(sw, 1, silent) as (host,):
        [dep] = deployed(sw, [host])
        flow_id = sw.run_flow(
            maintenance.make_flow, deployment_id=dep, ticket_dir=str(tickets)
        )
        [change] = triggered(flow_id, "change")
        until(lambda: parked_flow(sw, flow_id), what="the flow to park")
        assert maintenance.ticket_path(str(tickets), flow_id).exists()
        sw.cancel_flow(flow_id, "change window closed")
        with pytest.raises(runner_mod.FlowCancelled, match="change window closed"):
            sw.wait_flow(flow_id, timeout=WAIT)
        ended = sw.flow_result(flow_id)
        assert ended["state"] == "REVERTED"
        assert "change window closed" in ended["error"]
        assert not maintenance.ticket_path(str(tickets), flow_id).exists()
        # the trigger it awaited ended FAILED (cancelled): kept, as any
        # outcome is, until deleted
        assert sw.show(change).status == states.FAILED
        assert sw.show(change).reason == {
            "kind": "cancelled",
            "by": "cancelled: change window closed",
        }
        assert {d.id for d in sw.list_deployments(server_id=host)} == {dep, change}
        assert sw.list_flows() == []
        assert leftovers(sw, change) == {}
        with pytest.raises(exceptions.FlowNotFound):
            sw.cancel_flow(flow_id)


def test_a_failing_step_reverts_the_developers_own(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    tickets = tmp_path / "tickets"
    tickets.mkdir()
    with instance(devcloud, tmp_path) as sw, servers(sw, 1) as (host,):
        [dep] = deployed(sw, [host])
        flow_id = sw.run_flow(
            maintenance.make_flow,
            deployment_id=dep,
            ticket_dir=str(tickets),
            action="RESTORE",  # the config has no RESTORE
        )
        with pytest.raises(exceptions.ValidationError, match="no entry for RESTORE"):
            sw.wait_flow(flow_id, timeout=WAIT)
        assert sw.flow_result(flow_id)["state"] == "REVERTED"
        assert list(tickets.iterdir()) == []
        assert leftovers(sw, *triggered(flow_id, "change")) == {}


class WaitForFile(task.Task):  # type: ignore[misc]
    """A slow step of one's own: says it started, then waits for ``gate``."""

    def __init__(self, gate: str) -> None:
        super().__init__(name="tests.WaitForFile")
        self.gate = Path(gate)

    def execute(self) -> None:
        self.gate.with_suffix(".started").touch()
        deadline = time.monotonic() + WAIT
        while not self.gate.exists() and time.monotonic() < deadline:
            time.sleep(0.05)


def slow_change(deployment_id: str, ticket_dir: str, gate: str) -> Any:
    """The maintenance example with a slow step before its trigger."""
    flow = linear_flow.Flow("tests.slow_change")
    flow.add(
        maintenance.OpenTicket(ticket_dir),
        WaitForFile(gate),
        compose.trigger_subflow(
            "change", deployment_id=deployment_id, action="UPGRADE"
        ),
    )
    return flow


def test_cancel_flow_stops_a_running_flow_at_its_next_step(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    tickets, gate = tmp_path / "tickets", tmp_path / "gate"
    tickets.mkdir()
    with instance(devcloud, tmp_path) as sw, servers(sw, 1) as (host,):
        [dep] = deployed(sw, [host])
        flow_id = sw.run_flow(
            slow_change, deployment_id=dep, ticket_dir=str(tickets), gate=str(gate)
        )
        until(lambda: gate.with_suffix(".started").exists(), what="the slow step")
        row = sw.runner.registry.get(flow_id)
        assert row is not None and row.state == flow_rows.RUNNING
        sw.cancel_flow(flow_id, "not now")
        gate.touch()  # the slow step ends; the next one is not run
        with pytest.raises(runner_mod.FlowCancelled, match="not now"):
            sw.wait_flow(flow_id, timeout=WAIT)
        assert sw.flow_result(flow_id)["state"] == "REVERTED"
        assert list(tickets.iterdir()) == []
        [change] = triggered(flow_id, "change")
        with pytest.raises(exceptions.DeploymentNotFound):
            sw.show(change)
        assert sw.list_flows() == []


def two_at_once(first: str, second: str) -> Any:
    """BACKUP on two servers, in no particular order."""
    flow = unordered_flow.Flow("tests.two_at_once")
    flow.add(
        compose.trigger_subflow("one", deployment_id=first, action="BACKUP"),
        compose.trigger_subflow("two", deployment_id=second, action="BACKUP"),
    )
    return flow


def test_two_triggers_of_an_unordered_flow(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    with instance(devcloud, tmp_path) as sw, servers(sw, 2) as hosts:
        deps = deployed(sw, hosts, label="both")
        flow_id = sw.run_flow(two_at_once, first=deps[0], second=deps[1])
        result = sw.wait_flow(flow_id, timeout=WAIT)["result"]
        assert {result[n]["outputs"]["archive"] for n in ("one", "two")} == {
            "/backups/both.tar"
        }
        assert {result[n]["server_id"] for n in ("one", "two")} == set(hosts)
        assert leftovers(sw, *triggered(flow_id, "one", "two")) == {}


#: set by the test below: the factory fails when the flow is rebuilt
REBUILD_FAILS: list[str] = []


def fails_on_rebuild(deployment_id: str) -> Any:
    if REBUILD_FAILS:
        raise RuntimeError(REBUILD_FAILS[0])
    return rolling.make_flow([deployment_id])


def test_a_flow_whose_factory_fails_on_rebuild_is_set_aside(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    with instance(devcloud, tmp_path) as first:
        with servers(first, 1) as (host,):
            [dep] = deployed(first, [host])
        flow_id = first.run_flow(fails_on_rebuild, deployment_id=dep)
        until(lambda: parked_flow(first, flow_id), what="the flow to park")
    REBUILD_FAILS.append("the graph changed")
    try:
        with instance(devcloud, tmp_path) as second:
            with FakeServer(second, host, responder):
                with pytest.raises(exceptions.FlowError, match="the graph changed"):
                    second.wait_flow(flow_id, timeout=WAIT)
            [row] = second.list_interrupted()
            assert row.id == flow_id and row.state == flow_rows.BROKEN
            assert "fails_on_rebuild" in (row.note or "")
            assert second.flow_result(flow_id)["state"] == flow_rows.BROKEN
    finally:
        REBUILD_FAILS.clear()


# ------------------------------------------- what a crash may leave behind


def test_a_parked_flow_asked_to_cancel_is_woken_by_the_watcher(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    """The canceller (or the runner that parked the flow) died after the
    request was written and before the awaited action was ended."""
    tickets = tmp_path / "tickets"
    tickets.mkdir()
    with instance(devcloud, tmp_path) as sw, servers(sw, 1, silent) as (host,):
        [dep] = deployed(sw, [host])
        flow_id = sw.run_flow(
            maintenance.make_flow, deployment_id=dep, ticket_dir=str(tickets)
        )
        [change] = triggered(flow_id, "change")
        until(lambda: parked_flow(sw, flow_id), what="the flow to park")
        assert sw.runner.registry.request_cancel(flow_id, "cancelled: by a dead one")
        with pytest.raises(runner_mod.FlowCancelled, match="by a dead one"):
            sw.wait_flow(flow_id, timeout=WAIT / 3)
        assert not maintenance.ticket_path(str(tickets), flow_id).exists()
        assert leftovers(sw, change) == {}


def test_wait_flow_raises_for_a_flow_reverted_in_another_process(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    tickets = tmp_path / "tickets"
    tickets.mkdir()
    with instance(devcloud, tmp_path) as first, servers(first, 1) as (host,):
        [dep] = deployed(first, [host])
        failing = first.run_flow(
            maintenance.make_flow,
            deployment_id=dep,
            ticket_dir=str(tickets),
            action="RESTORE",
        )
        with pytest.raises(exceptions.ValidationError):
            first.wait_flow(failing, timeout=WAIT)
    with instance(devcloud, tmp_path) as second:
        assert second.flow_result(failing)["state"] == "REVERTED"
        with pytest.raises(exceptions.FlowError, match="no entry for RESTORE"):
            second.wait_flow(failing, timeout=WAIT)


def test_a_flow_cancelled_by_a_runner_that_died_before_keeping_its_outcome(
    devcloud: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tickets = tmp_path / "tickets"
    tickets.mkdir()
    with instance(devcloud, tmp_path, runner__lease_seconds=1.0) as first:
        with servers(first, 1, silent) as (host,):
            [dep] = deployed(first, [host])
            flow_id = first.run_flow(
                maintenance.make_flow, deployment_id=dep, ticket_dir=str(tickets)
            )
            until(lambda: parked_flow(first, flow_id), what="the flow to park")

            def dies(*args: Any) -> None:
                raise RuntimeError("the runner died here")

            monkeypatch.setattr(first.runner, "_save_result", dies)
            first.cancel_flow(flow_id, "change window closed")
            until(
                lambda: (
                    first.runner.driving == 0
                    and getattr(first.runner.registry.get(flow_id), "state", None)
                    == flow_rows.RUNNING
                    and not maintenance.ticket_path(str(tickets), flow_id).exists()
                ),
                what="the flow to revert without keeping its outcome",
            )
    time.sleep(1.2)  # its lease runs out
    with instance(devcloud, tmp_path, runner__lease_seconds=1.0) as second:
        with pytest.raises(runner_mod.FlowCancelled, match="change window closed"):
            second.wait_flow(flow_id, timeout=WAIT)
        ended = second.flow_result(flow_id)
        assert ended["state"] == "REVERTED"
        assert "change window closed" in ended["error"]
        assert second.list_flows() == []


def test_a_flow_reverted_by_a_runner_that_died_before_keeping_its_error(
    devcloud: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tickets = tmp_path / "tickets"
    tickets.mkdir()
    with instance(devcloud, tmp_path, runner__lease_seconds=1.0) as first:
        with servers(first, 1) as (host,):
            [dep] = deployed(first, [host])

            def dies(*args: Any) -> None:
                raise RuntimeError("the runner died here")

            monkeypatch.setattr(first.runner, "_save_result", dies)
            flow_id = first.run_flow(
                maintenance.make_flow,
                deployment_id=dep,
                ticket_dir=str(tickets),
                action="RESTORE",  # the config has no RESTORE
            )
            until(
                lambda: (
                    first.runner.driving == 0
                    and getattr(first.runner.registry.get(flow_id), "state", None)
                    == flow_rows.RUNNING
                ),
                what="the flow to revert without keeping its outcome",
            )
    time.sleep(1.2)  # its lease runs out
    with instance(devcloud, tmp_path, runner__lease_seconds=1.0) as second:
        with pytest.raises(exceptions.FlowError, match="no entry for RESTORE"):
            second.wait_flow(flow_id, timeout=WAIT)
        assert "ValidationError" in second.flow_result(flow_id)["error"]


def test_a_flow_whose_runner_died_before_storing_its_id_resumes(
    devcloud: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner died between writing the flow's logbook and storing the
    flow's id in it, before running any step."""
    with instance(devcloud, tmp_path, runner__lease_seconds=1.0) as first:
        with servers(first, 1) as (host,):
            [dep] = deployed(first, [host])
        load = tf_engines.load

        def dies_before_storing(flow: Any, store: Any = None, **kwargs: Any) -> Any:
            return load(flow, **kwargs)

        monkeypatch.setattr(tf_engines, "load", dies_before_storing)
        monkeypatch.setattr(first.runner, "_submit", lambda *args, **kw: None)
        flow_id = first.run_flow(rolling.make_flow, deployment_ids=[dep])
        monkeypatch.undo()
    time.sleep(1.2)  # its lease runs out
    with instance(devcloud, tmp_path) as second, FakeServer(second, host, responder):
        result = second.wait_flow(flow_id, timeout=WAIT)["result"]
        assert result["server-0"]["status"] == states.COMPLETE
