"""One crash case: set up, run the operation in a child killed at its kill
point, resume it in this process, and check everything the flow touched.

The parent (the pytest worker) prepares what the operation acts on with a
Swflows it then closes, and plays the server (a :class:`FakeServer` thread
that reads its metadata over the wire and signals back) for the whole case.
The child is forked from a fork server that preloaded swflows, builds its
own Swflows on the same SQLite file and runs the operation until its kill
hook SIGKILLs it.  A new Swflows in the parent then takes the flow over,
because its owner's process is dead, and resumes it from the logbook.

Each case then checks that:

* the deployment rows are in the right terminal state (or gone, where the
  flow removes the row); a revert keeps what the server ran;
* the action's outcome was recorded exactly once: a SQLite trigger added
  to the case's database logs every IN_PROGRESS -> terminal change of a
  deployment row, whichever process made it;
* the metadata the server reads through its config transport lists
  exactly the derived configs of the deployments that remain, and the
  store holds no other derived config;
* no flow row and no logbook is left;
* the real Keystone, Swift and Zaqar hold nothing of these deployments
  (counted before the child runs and after the resume).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import multiprocessing
import signal
import sqlite3
import types
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from swflows import conf as sw_conf
from swflows import derive, exceptions, metadata, stack_users, states
from swflows.api import Swflows
from swflows.clients.cloud import Clients
from swflows.persistence import flow_registry as flow_rows
from swflows.persistence.store import Store
from swflows.tasks import identity
from tests.crash import child, matrix
from tests.functional import flowkit
from tests.functional.fakeserver import FakeServer

#: seconds a deployment action may take (the fake server answers in < 1 s)
TIMEOUT = 60
#: seconds the child may run before its kill point is deemed missed
CHILD_TIMEOUT = 60
#: seconds the resumed flow may take
RESUME_TIMEOUT = 60


@dataclasses.dataclass(frozen=True)
class Row:
    """What a deployment row must hold at the end."""

    status: str
    generation: int
    action: str
    result: str

    def config_id(self, deployment_id: str) -> str:
        return derive.derived_config_id(deployment_id, self.generation)


@dataclasses.dataclass
class Case:
    """An operation to run, and the state it must end in."""

    server: str
    operation: str
    op_args: tuple[Any, ...]
    op_kwargs: dict[str, Any]
    #: the deployment the operation's flow serves
    acted_on: str
    #: every deployment involved, and its row at the end (None: gone)
    rows: dict[str, Row | None]
    #: (deployment, generation, status) of each outcome to be recorded
    outcomes: list[tuple[str, int, str]]
    #: ids the child's model.new_id returns first (trigger's new deployment)
    new_ids: list[str] = dataclasses.field(default_factory=list)


# ------------------------------------------------------------- the server


class Server(FakeServer):
    """The test server, reading its metadata over the wire only once a new
    copy was published (the store's published version of the server moved).

    Polling Swift many times a second for the whole case costs the dev
    cloud more CPU than the flows under test do.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_version: int | None = None

    def step(self) -> None:
        record = metadata.find_server(self.sw.services, self.server_id)
        version = None if record is None else record.published_version
        if version is not None and version == self._read_version:
            return
        super().step()
        self._read_version = version


# --------------------------------------------------------------- scenarios


def component_config(sw: Swflows) -> Any:
    return sw.create_config(
        "db",
        {
            "configs": [
                {"actions": ["CREATE", "UPDATE"], "config": "up", "tool": "script"},
                {"actions": ["BACKUP"], "config": "backup", "tool": "script"},
                {"actions": ["DELETE"], "config": "remove", "tool": "script"},
            ]
        },
        group="component",
        inputs=[{"name": "foo", "default": "a"}],
        outputs=[{"name": "result"}],
    )


def script_config(sw: Swflows) -> Any:
    """A config without a DELETE action."""
    return sw.create_config(
        "app",
        "#!/bin/sh\n",
        group="script",
        inputs=[{"name": "foo", "default": "a"}],
        outputs=[{"name": "result"}],
    )


def deployed(sw: Swflows, server: str, config: Any, transport: str) -> str:
    dep = sw.deploy(
        server,
        config.id,
        input_values={"foo": "a"},
        signal_transport=transport,
        timeout=TIMEOUT,
    )
    assert dep.status == states.COMPLETE, dep.status_reason
    return str(dep.id)


CREATED = Row(states.COMPLETE, 1, "CREATE", "out-a")


def setup_deploy(sw: Swflows, point: matrix.KillPoint, server: str) -> Case:
    config = component_config(sw)
    new = str(uuid.uuid4())
    # reverted after its signal (``revert``), the action stays what the
    # server ran: a deployment's outcome is never reverted away
    return Case(
        server,
        "deploy",
        (server, config.id),
        {
            "input_values": {"foo": "a"},
            "signal_transport": point.signal_transport,
            "timeout": TIMEOUT,
            "deployment_id": new,
        },
        acted_on=new,
        rows={new: CREATED},
        outcomes=[(new, 1, states.COMPLETE)],
    )


def setup_redeploy(sw: Swflows, point: matrix.KillPoint, server: str) -> Case:
    dep = deployed(sw, server, component_config(sw), point.signal_transport)
    # reverted after its signal, the action stays what the server ran
    return Case(
        server,
        "redeploy",
        (dep,),
        {"input_values": {"foo": "b"}},
        acted_on=dep,
        rows={dep: Row(states.COMPLETE, 2, "UPDATE", "out-b")},
        outcomes=[(dep, 2, states.COMPLETE)],
    )


def setup_undeploy(delete_action: bool) -> Callable[..., Case]:
    def setup(sw: Swflows, point: matrix.KillPoint, server: str) -> Case:
        config = component_config(sw) if delete_action else script_config(sw)
        dep = deployed(sw, server, config, point.signal_transport)
        # reverted or not, a removal that got past the row finishes
        return Case(
            server,
            "undeploy",
            (dep,),
            {},
            acted_on=dep,
            rows={dep: None},
            outcomes=[(dep, 2, states.COMPLETE)] if delete_action else [],
        )

    return setup


def setup_trigger(sw: Swflows, point: matrix.KillPoint, server: str) -> Case:
    dep = deployed(sw, server, component_config(sw), point.signal_transport)
    new = str(uuid.uuid4())
    return Case(
        server,
        "trigger",
        (dep, "BACKUP"),
        {"input_values": {"foo": "c"}},
        acted_on=new,
        rows={
            # kept after a revert too: the server ran it
            new: Row(states.COMPLETE, 1, "BACKUP", "out-c"),
            dep: CREATED,  # the original is untouched
        },
        outcomes=[(new, 1, states.COMPLETE)],
        new_ids=[new],
    )


#: how to set up each graph of the matrix, by its label
SCENARIOS: dict[str, Callable[[Swflows, matrix.KillPoint, str], Case]] = {
    "deploy": setup_deploy,
    "redeploy": setup_redeploy,
    "undeploy[run_delete_action=False]": setup_undeploy(False),
    "undeploy[run_delete_action=True]": setup_undeploy(True),
    "trigger": setup_trigger,
}


# ------------------------------------------------------------- the audit


#: logs every outcome recorded on a deployment row, by any process
AUDIT_SQL = """
CREATE TABLE crash_outcomes (
    deployment_id TEXT, generation INTEGER, status TEXT, reason TEXT
);
CREATE TRIGGER crash_outcomes_log AFTER UPDATE ON swflows_deployments
WHEN OLD.status = 'IN_PROGRESS' AND NEW.status <> 'IN_PROGRESS'
BEGIN
    INSERT INTO crash_outcomes
    VALUES (OLD.id, OLD.generation, NEW.status, NEW.reason);
END;
"""


def install_audit(database: Path) -> None:
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as db, db:
        db.executescript(AUDIT_SQL)


def audited(database: Path) -> list[tuple[str, int, str, Any]]:
    """Each outcome recorded: (deployment, generation, status, reason)."""
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as db:
        rows = db.execute("SELECT * FROM crash_outcomes ORDER BY rowid").fetchall()
    return [(d, g, s, json.loads(r) if r else None) for d, g, s, r in rows]


# -------------------------------------------------------------- leftovers


def leftovers(services: Any, *deployment_ids: str) -> dict[str, list[str]]:
    """What Keystone, Swift and Zaqar hold for these deployments.

    :func:`tests.functional.flowkit.leftovers`, but Swift is listed by
    prefix (signal objects are ``<deployment>/<generation>``) in the
    containers swflows writes to, instead of reading every object of every
    container of the account, which grows with every case run.
    """
    clients = services.clients
    users = clients.stack_users
    swift = clients.object_store
    containers = {services.conf.signal_container, services.conf.metadata_container}

    def mine(name: str) -> bool:
        return any(d in name for d in deployment_ids)

    found = {
        "users": sorted(u.name for u in users.list_users() if mine(u.name)),
        "projects": sorted(p.name for p in users.list_projects() if mine(p.name)),
        "objects": [
            f"{container}/{o.name}"
            for container in sorted(containers)
            for d in deployment_ids
            for o in swift.list_objects(container, prefix=d)
        ],
        "queues": flowkit.zaqar_queues(*deployment_ids),  # in every project
    }
    return {kind: names for kind, names in found.items() if names}


# ---------------------------------------------------------------- running


def fork_server() -> Any:
    """A multiprocessing context whose children fork from one process that
    imported swflows and the child module already (and has no threads)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([child.__name__])
    return ctx


def own_tenant(cloud: dict[str, Any]) -> dict[str, Any]:
    """The dev cloud as the crash matrix uses it: as Keystone's admin, so its
    queues live in the admin project and its Swift account (found in the
    catalog) is the admin project's.

    A watcher's sweep removes every signal store of its project or account
    whose deployment its own database does not know; the functional tests,
    each with its own database, share the demo project and its account
    and sweep, and would remove the stores of live crash cases (and see
    them in their own counts).
    """
    keystone = {**cloud["keystone"], "demo": cloud["keystone"]["admin"]}
    return {**cloud, "keystone": keystone}


def write_conf(
    cloud: dict[str, Any], folder: Path, options: dict[str, str] | None = None
) -> Path:
    """The case's configuration file: its database, a short lease and
    ``options`` in [DEFAULT]; its watcher looks as often as swflows allows
    (a case is one deployment waiting a moment: its time is the look's
    latency, not the looks' cost)."""
    path = flowkit.write_conf(
        own_tenant(cloud),
        folder / "swflows.conf",
        database=f"sqlite:///{folder / 'swflows.sqlite'}",
        poll_interval=0.1,
    )
    with path.open("a") as out:
        out.write("[runner]\nlease_seconds = 2\n\n[DEFAULT]\n")
        out.writelines(f"{key} = {value}\n" for key, value in (options or {}).items())
    return path


def cloud_clients(cloud: dict[str, Any], folder: Path) -> Clients:
    """Clients of the dev cloud, shared by the cases a worker runs (their
    tokens are fetched once; a child makes its own)."""
    conf = sw_conf.get_conf(config_files=[str(write_conf(cloud, folder))])
    return Clients.from_conf(conf)


def run_case(
    point: matrix.KillPoint,
    cloud: dict[str, Any],
    folder: Path,
    ctx: Any,
    clients: Clients,
) -> None:
    """Kill a child at ``point``, resume in this process, check the result."""
    conf_path = write_conf(cloud, folder, matrix.PLAN_OPTIONS.get(point.plan))
    database = folder / "swflows.sqlite"
    conf = sw_conf.get_conf(config_files=[str(conf_path)])
    store = Store.from_conf(conf)
    server_id = str(uuid.uuid4())
    services = None
    case: Case | None = None
    try:
        setup = Swflows(store, clients, conf)
        services = setup.services
        # the server, for the whole case; no runner of this process is
        # alive while the child runs
        server = types.SimpleNamespace(services=services)
        with Server(server, server_id, interval=0.05) as fake:
            try:
                case = SCENARIOS[point.variant.label](setup, point, server_id)
            finally:
                setup.close()
            existing = [d for d in case.rows if exists(setup, d)]
            assert leftovers(services, *case.rows) == owned(existing, point)
            install_audit(database)
            pid = kill_child(point, case, conf_path, folder, ctx)
            flow_id = interrupted_flow(store, case.acted_on, pid)
            resumer = Swflows(store, clients, conf)
            try:
                if point.phase == "revert":
                    with pytest.raises(Exception, match="injected after"):
                        resumer.runner.wait(flow_id, RESUME_TIMEOUT)
                else:
                    resumer.runner.wait(flow_id, RESUME_TIMEOUT)
                check(resumer, fake, case, database, point)
            finally:
                resumer.close()
    finally:
        try:
            if services is not None:
                remove_server_channel(services, server_id)
                if point.stack_users and case is not None:
                    for dep_id in case.rows:
                        identity.delete_stack_user(services, dep_id)
        finally:
            store.close()


def remove_server_channel(services: Any, server_id: str) -> None:
    """Drop the server's metadata object: the case's database goes away."""
    found = metadata.find_server(services, server_id)
    if found is not None and found.channel is not None:
        transport = services.config_transport(found.config_transport, None)
        transport.remove_channel(services, server_id, found.channel)


def kill_child(
    point: matrix.KillPoint, case: Case, conf: Path, folder: Path, ctx: Any
) -> int:
    """Run the operation in a child until it is killed; the child's pid."""
    report = folder / "child-report.txt"
    spec = {
        "conf": str(conf),
        "report": str(report),
        "kind": point.variant.kind,
        "args": [list(arg) for arg in point.variant.args],
        "plan": point.plan,
        "atom": point.atom,
        "phase": point.phase,
        "fail_atom": point.fail_atom,
        "atoms": list(point.atoms),
        "operation": case.operation,
        "op_args": list(case.op_args),
        "op_kwargs": case.op_kwargs,
        "new_ids": case.new_ids,
    }
    proc = ctx.Process(target=child.main, args=(spec,), name=f"crash-{point.id}")
    proc.start()
    proc.join(CHILD_TIMEOUT)
    if proc.is_alive():
        proc.kill()
        proc.join()
        pytest.fail(f"the child did not reach {point.id} in {CHILD_TIMEOUT} s")
    said = report.read_text() if report.exists() else ""
    assert proc.exitcode == -signal.SIGKILL, (
        f"the child was not killed at {point.id} (exit {proc.exitcode}): {said}"
    )
    return int(proc.pid)


def interrupted_flow(store: Store, deployment_id: str, pid: int) -> str:
    """The dead child's flow: still RUNNING and owned by the child."""
    rows = flow_rows.FlowRegistry(store).find(deployment_id=deployment_id)
    assert len(rows) == 1, rows
    row = rows[0]
    assert row.state == flow_rows.RUNNING, row
    assert row.owner is not None and row.owner.split(":")[1] == str(pid), row
    assert flow_rows.owner_is_dead(row.owner)
    return row.id


def exists(sw: Swflows, deployment_id: str) -> bool:
    try:
        sw.show(deployment_id)
    except exceptions.DeploymentNotFound:
        return False
    return True


def owned(deployment_ids: list[str], point: matrix.KillPoint) -> dict[str, Any]:
    """What the cloud holds for these live deployments: their stack users
    (in credentials mode), nothing else."""
    if not point.stack_users or not deployment_ids:
        return {}
    names = sorted(stack_users.user_name(d) for d in deployment_ids)
    return {"users": names, "projects": names}


def check(
    sw: Swflows,
    fake: FakeServer,
    case: Case,
    database: Path,
    point: matrix.KillPoint,
) -> None:
    # the rows: right terminal state, or gone
    for dep_id, expected in case.rows.items():
        try:
            row = sw.show(dep_id)
        except exceptions.DeploymentNotFound:
            row = None
        if expected is None:
            assert row is None, f"{dep_id} should be gone: {row}"
            continue
        assert row is not None, f"{dep_id} is gone"
        got = (row.status, row.generation, row.action, row.config_id)
        assert got == (
            expected.status,
            expected.generation,
            expected.action,
            expected.config_id(dep_id),
        ), row.status_reason
        assert row.reason == {"kind": "outputs_received"}
        assert row.output_values.get("result") == expected.result
    # the outcome recorded once, from the server's signal
    outcomes = audited(database)
    assert [(d, g, s) for d, g, s, _ in outcomes] == case.outcomes, outcomes
    assert all(reason == {"kind": "outputs_received"} for *_, reason in outcomes)
    # what the server reads over the wire, and the store's derived configs
    remaining = {d: r for d, r in case.rows.items() if r is not None}
    document = fake.read_metadata()
    published = {item["id"] for item in document["deployments"]}
    assert published == {r.config_id(d) for d, r in remaining.items()}
    # the latest copy: what the store holds for the server, item by item
    assert document["deployments"] == sw.store.server_metadata(case.server).deployments
    configs = {c.id for c in sw.list_configs(include_derived=True)}
    derived = configs - {c.id for c in sw.list_configs()}
    assert derived == {r.config_id(d) for d, r in remaining.items()}
    # no flow and no logbook left
    assert sw.list_flows() == []
    with contextlib.closing(sw.runner.backend.get_connection()) as conn:
        assert list(conn.get_logbooks()) == []
    # nothing of these deployments left on Keystone, Swift, Zaqar
    assert leftovers(sw.services, *case.rows) == owned(sorted(remaining), point)
