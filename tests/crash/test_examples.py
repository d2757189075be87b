"""Each example flow killed (SIGKILL) at a random step boundary and resumed.

A child process forked from the crash matrix's fork server runs the flow
and kills itself right before or right after one step, chosen at random
(``SWFLOWS_CRASH_SEED`` replays a choice).  A fresh Swflows in this process
then takes the flow over from the dead runner and finishes it, while
:class:`~tests.crash.scenarios.Server` threads answer the way the agent
does.  Each case checks that every triggered action's outcome was recorded
exactly once (the SQLite audit trigger of the crash matrix), the flow's
result, that no flow row nor step is left, and that Keystone, Swift and
Zaqar hold nothing of the triggered deployments.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import types
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from examples import backup_verify, maintenance, rolling
from swflows import conf as sw_conf
from swflows import states
from swflows.api import Swflows
from swflows.flows import compose
from swflows.persistence import flow_registry as flow_rows
from swflows.persistence.store import Store
from tests.crash import example_child, scenarios
from tests.functional.test_compose import component_config, responder

SEED = int(os.environ.get("SWFLOWS_CRASH_SEED") or random.randrange(2**32))
CHILD_TIMEOUT = 90
RESUME_TIMEOUT = 90


def deploy(sw: Swflows, servers: list[str], **inputs: Any) -> list[str]:
    config = component_config(sw)
    made = []
    for server in servers:
        dep = sw.deploy(server, config.id, input_values=inputs, timeout=60)
        assert dep.status == states.COMPLETE, dep.status_reason
        made.append(dep.id)
    return made


def backup_verify_case(sw: Swflows, servers: list[str], folder: Path) -> Any:
    database, verifier = deploy(sw, servers)
    kwargs = {"database": database, "verifier": verifier, "label": "crash"}

    def check(result: dict[str, Any]) -> None:
        assert result["backup"]["outputs"]["archive"] == "/backups/crash.tar"
        assert result["verify"]["outputs"]["checksum"] == "sha256:/backups/crash.tar"
        assert result["report"].endswith("verify: COMPLETE (sha256:/backups/crash.tar)")

    return backup_verify.make_flow, kwargs, ["backup", "verify"], check


def rolling_case(sw: Swflows, servers: list[str], folder: Path) -> Any:
    kwargs = {"deployment_ids": deploy(sw, servers), "action": "UPGRADE"}
    names = [f"server-{i}" for i in range(len(servers))]

    def check(result: dict[str, Any]) -> None:
        assert rolling.stopped_at(result, len(servers)) is None
        assert [result[name]["status"] for name in names] == [states.COMPLETE] * 3

    return rolling.make_flow, kwargs, names, check


def maintenance_case(sw: Swflows, servers: list[str], folder: Path) -> Any:
    tickets = folder / "tickets"
    tickets.mkdir()
    [dep] = deploy(sw, servers)
    kwargs = {"deployment_id": dep, "ticket_dir": str(tickets)}

    def check(result: dict[str, Any]) -> None:
        assert result["closed"] == states.COMPLETE
        [ticket] = tickets.iterdir()
        assert json.loads(ticket.read_text())["state"] == "closed"

    return maintenance.make_flow, kwargs, ["change"], check


CASES: dict[str, tuple[int, Callable[..., Any]]] = {
    "backup_verify": (2, backup_verify_case),
    "rolling": (3, rolling_case),
    "maintenance": (1, maintenance_case),
}


@pytest.mark.parametrize("example", sorted(CASES))
def test_killed_at_a_random_step_and_resumed(
    example: str,
    devcloud: dict[str, Any],
    fork_context: Any,
    crash_clients: Any,
    tmp_path: Path,
) -> None:
    count, setup_case = CASES[example]
    conf_path = scenarios.write_conf(devcloud, tmp_path)
    database = tmp_path / "swflows.sqlite"
    conf = sw_conf.get_conf(config_files=[str(conf_path)])
    store = Store.from_conf(conf)
    servers = [str(uuid.uuid4()) for _ in range(count)]
    services = None
    try:
        setup = Swflows(store, crash_clients, conf)
        services = setup.services
        answering = types.SimpleNamespace(services=services)
        with contextlib.ExitStack() as stack:
            for server in servers:
                stack.enter_context(
                    scenarios.Server(answering, server, responder, interval=0.05)
                )
            try:
                factory, kwargs, names, check = setup_case(setup, servers, tmp_path)
                with compose.planning(setup._plans()):
                    steps = [a.name for a in example_child.atoms(factory(**kwargs))]
            finally:
                setup.close()
            rng = random.Random(f"{SEED}-{example}")
            atom, phase = rng.choice(steps), rng.choice(("before", "after"))
            print(f"{example}: killed {phase} {atom} (SWFLOWS_CRASH_SEED={SEED})")
            scenarios.install_audit(database)
            pid = kill_child(
                fork_context, tmp_path, conf_path, factory, kwargs, atom, phase
            )
            [row] = flow_rows.FlowRegistry(store).find()
            assert row.kind == flow_rows.CUSTOM and row.state == flow_rows.RUNNING
            assert row.owner is not None and row.owner.split(":")[1] == str(pid)
            resumer = Swflows(store, crash_clients, conf)
            try:
                ended = resumer.wait_flow(row.id, RESUME_TIMEOUT)
                assert ended["state"] == "SUCCESS", ended
                check(ended["result"])
                triggered = [compose.trigger_deployment_id(row.id, n) for n in names]
                for dep_id in triggered:
                    assert resumer.show(dep_id).status == states.COMPLETE
                outcomes = [(d, s) for d, _, s, _ in scenarios.audited(database)]
                assert outcomes == [(d, states.COMPLETE) for d in triggered], outcomes
                assert resumer.list_flows() == []
                tables = resumer.runner.backend.tables
                with resumer.runner.backend.engine.connect() as conn:
                    assert conn.execute(tables.flowdetails.select()).first() is None
                assert scenarios.leftovers(services, *triggered) == {}
            finally:
                resumer.close()
    finally:
        try:
            if services is not None:
                for server in servers:
                    scenarios.remove_server_channel(services, server)
        finally:
            store.close()


def kill_child(
    ctx: Any,
    folder: Path,
    conf: Path,
    factory: Any,
    kwargs: dict[str, Any],
    atom: str,
    phase: str,
) -> int:
    report = folder / "child-report.txt"
    spec = {
        "conf": str(conf),
        "report": str(report),
        "factory": f"{factory.__module__}.{factory.__qualname__}",
        "kwargs": kwargs,
        "atom": atom,
        "phase": phase,
    }
    proc = ctx.Process(target=example_child.main, args=(spec,))
    proc.start()
    proc.join(CHILD_TIMEOUT)
    if proc.is_alive():
        proc.kill()
        proc.join()
        pytest.fail(f"the child did not reach {phase} {atom} in {CHILD_TIMEOUT} s")
    said = report.read_text() if report.exists() else ""
    assert proc.exitcode == -signal.SIGKILL, (
        f"the child was not killed {phase} {atom} (exit {proc.exitcode}): {said}"
    )
    return int(proc.pid)
