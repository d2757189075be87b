"""The embedder contract, through a small Heat-like embedder on the dev cloud.

The embedder has its own identity (the demo user's keystoneauth1 session,
and the stack domain admin's for stack users) and its own PostgreSQL
database, where swflows keeps its tables under a prefix.  Its resources go
through CREATE/UPDATE/SUSPEND/RESUME/DELETE with ``handle_*`` and polled
``check_*_complete``, as Heat's scheduler drives them.  The server reads
its metadata from the embedder's API (POLL_SERVER_HEAT) and signals back
through it (HEAT_SIGNAL), and the embedder passes the signal to
``Swflows.signal()``.
"""

from __future__ import annotations

import functools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from cryptography import fernet

from swflows import conf as sw_conf
from swflows import states
from swflows.api import Swflows
from swflows.embedding import (
    Completion,
    Completions,
    DeploymentFailed,
    Lifecycle,
    from_session,
)
from tests.functional import conftest, db_fixtures, flowkit
from tests.functional.fakeserver import FakeServer, Responder, ok_responder
from tests.functional.flowkit import leftovers


def start_delete(lc: Lifecycle, resource_id: str) -> str:
    """Start a DELETE as Heat does; the resource it checks on."""
    lc.handle_delete(resource_id)
    return resource_id


PREFIX = "emb_swflows_"
#: the embedder's own schema revision (one of Heat's)
EMBEDDER_REV = "c6214ca60943"


@pytest.fixture
def embedder_db(request: pytest.FixtureRequest) -> Iterator[sa.Engine]:
    """The embedder's own PostgreSQL database, with a table of its own and,
    as Heat's has, its own schema history in alembic's default
    ``alembic_version``."""
    url = db_fixtures._create_database(request.config)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE resource (name VARCHAR(64) PRIMARY KEY, "
            "deployment_id VARCHAR(36), action VARCHAR(16), status VARCHAR(32))"
        )
        conn.exec_driver_sql(
            "CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)"
        )
        conn.exec_driver_sql(
            "INSERT INTO alembic_version VALUES (%(rev)s)", {"rev": EMBEDDER_REV}
        )
    yield engine
    engine.dispose()


def embedder_conf() -> Any:
    conf = sw_conf.get_conf()
    conf.set_override("poll_interval", flowkit.POLL_INTERVAL, "watcher")
    conf.set_override("max_poll_interval", flowkit.MAX_POLL_INTERVAL, "watcher")
    conf.set_override("default_deployment_signal_transport", "HEAT_SIGNAL")
    conf.set_override("default_software_config_transport", "POLL_SERVER_HEAT")
    return conf


@pytest.fixture
def sw(devcloud: dict[str, Any], embedder_db: sa.Engine) -> Iterator[Swflows]:
    ks = devcloud["keystone"]
    made = from_session(
        conftest.keystone_session(devcloud, "demo"),
        engine=embedder_db,
        table_prefix=PREFIX,
        secret_key=fernet.Fernet.generate_key(),
        conf=embedder_conf(),
        services=("compute",),
        stack_domain_session=conftest.stack_domain_admin_session(devcloud),
        stack_user_domain_id=ks["stack_user_domain_id"],
    )
    try:
        yield made
    finally:
        made.close()


class Embedder:
    """A Heat-like service: its resources, its API, its scheduler."""

    def __init__(self, sw: Swflows, engine: sa.Engine) -> None:
        self.sw = sw
        self.engine = engine
        self.lifecycle = Lifecycle(sw)

    # -- its own API, which servers reach ------------------------------------
    def metadata(self, server_id: str) -> dict[str, Any]:
        """POLL_SERVER_HEAT: what the server's collector reads."""
        return {"deployments": self.sw.server_metadata(server_id)}

    def signal(self, config_id: str, body: bytes) -> bool:
        """HEAT_SIGNAL (or a CFN-style signal): handed to swflows as is."""
        with self.engine.connect() as conn:
            ids = [
                r[0] for r in conn.exec_driver_sql("SELECT deployment_id FROM resource")
            ]
        for deployment_id in ids:
            if deployment_id and self.sw.show(deployment_id).config_id == config_id:
                return self.sw.signal(deployment_id, body)
        raise LookupError(config_id)

    # -- its resources ------------------------------------------------------
    def _record(
        self, name: str, deployment_id: str | None, action: str, status: str
    ) -> None:
        with self.engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM resource WHERE name = :n"), {"n": name})
            conn.execute(
                sa.text("INSERT INTO resource VALUES (:n, :d, :a, :s)"),
                {"n": name, "d": deployment_id, "a": action, "s": status},
            )

    def run(
        self,
        name: str,
        action: str,
        start: Callable[[], str | None],
        check: Callable[[str | None], bool],
        resource_id: str,
        timeout: float = 120,
    ) -> str | None:
        """handle_<action>, then check_<action>_complete until done, as
        Heat's scheduler steps a resource.  As in Heat, the resource's id
        (its deployment's) is recorded before the action starts, so a
        signal finds the resource however soon it comes."""
        self._record(name, resource_id, action, "IN_PROGRESS")
        started = start()
        if started != resource_id:  # replaced, or nothing to do
            self._record(name, started, action, "IN_PROGRESS")
        deadline = time.monotonic() + timeout
        try:
            while not check(started):
                assert time.monotonic() < deadline, f"{action} of {name} timed out"
                time.sleep(0.2)
        except DeploymentFailed:
            self._record(name, started, action, "FAILED")
            raise
        self._record(name, started, action, "COMPLETE")
        return started


class Server(FakeServer):
    """A server whose agent polls the embedder and signals through it."""

    def __init__(
        self, embedder: Embedder, server_id: str, responder: Responder = ok_responder
    ) -> None:
        super().__init__(embedder.sw, server_id, responder)
        self.embedder = embedder

    def read_metadata(self) -> dict[str, Any]:
        return self.embedder.metadata(self.server_id)

    def send(self, item: dict[str, Any], answer: dict[str, Any]) -> None:
        inputs = {i["name"]: i.get("value") for i in item["inputs"]}
        assert inputs["deploy_signal_transport"] == "HEAT_SIGNAL"
        assert inputs["deploy_user_id"] and inputs["deploy_password"]
        self.embedder.signal(item["id"], json.dumps(answer).encode())


def embedder_rows(engine: sa.Engine) -> list[tuple[str, str, str]]:
    with engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT name, action, status FROM resource")
        return [tuple(row) for row in rows]


def suspendable(sw: Swflows) -> Any:
    return sw.create_config(
        "app",
        {
            "configs": [
                {
                    "actions": ["CREATE", "UPDATE"],
                    "config": "install",
                    "tool": "script",
                },
                {"actions": ["SUSPEND"], "config": "stop", "tool": "script"},
                {"actions": ["RESUME"], "config": "start", "tool": "script"},
                {"actions": ["DELETE"], "config": "remove", "tool": "script"},
            ]
        },
        group="component",
        inputs=[{"name": "foo"}],
        outputs=[{"name": "result"}],
    )


def test_lifecycle_through_the_embedder(sw: Swflows, embedder_db: sa.Engine) -> None:
    emb = Embedder(sw, embedder_db)
    lc = emb.lifecycle
    config = suspendable(sw)
    server = str(uuid.uuid4())
    with Server(emb, server) as agent:
        first = str(uuid.uuid4())
        dep_id = emb.run(
            "db",
            "CREATE",
            lambda: lc.handle_create(
                server,
                config.id,
                input_values={"foo": "a"},
                timeout=60,
                deployment_id=first,
            ),
            lc.check_create_complete,
            first,
        )
        assert dep_id == first
        dep = sw.show(dep_id)
        assert dep.signal_transport == "HEAT_SIGNAL"
        assert dep.output_values["result"] == "out-a"

        assert (
            emb.run(
                "db",
                "UPDATE",
                lambda: lc.handle_update(dep_id, input_values={"foo": "b"}),
                lc.check_update_complete,
                dep_id,
            )
            == dep_id
        )
        assert sw.show(dep_id).output_values["result"] == "out-b"
        for action, handle, check in (
            ("SUSPEND", lc.handle_suspend, lc.check_suspend_complete),
            ("RESUME", lc.handle_resume, lc.check_resume_complete),
        ):
            emb.run("db", action, functools.partial(handle, dep_id), check, dep_id)
            assert sw.show(dep_id).action == action
        emb.run(
            "db",
            "DELETE",
            functools.partial(start_delete, lc, dep_id),
            lc.check_delete_complete,
            dep_id,
        )
        ran = [
            {i["name"]: i.get("value") for i in h["item"]["inputs"]}["deploy_action"]
            for h in agent.handled.values()
        ]
    assert ran == ["CREATE", "UPDATE", "SUSPEND", "RESUME", "DELETE"]
    assert emb.metadata(server) == {"deployments": []}
    assert leftovers(sw, dep_id) == {}  # the stack user went with it
    lc.handle_delete(dep_id)  # deleting again is fine
    assert lc.check_delete_complete(dep_id)

    # swflows' tables, TaskFlow's logbook and its version table too, sit
    # beside the embedder's under the prefix; the embedder's history is
    # untouched
    with embedder_db.connect() as conn:
        names = set(sa.inspect(conn).get_table_names())
        revisions = conn.exec_driver_sql("SELECT version_num FROM alembic_version")
        assert [r[0] for r in revisions] == [EMBEDDER_REV]
    assert names == {
        "resource",
        "alembic_version",
        *(
            f"{PREFIX}{name}"
            for name in (
                "configs",
                "deployments",
                "servers",
                "groups",
                "flows",
                "owners",
                "deleted",
                "installation",
                "results",
                "alembic_version",
                "tf_logbooks",
                "tf_flowdetails",
                "tf_atomdetails",
            )
        ),
    }
    assert embedder_rows(embedder_db) == [("db", "DELETE", "COMPLETE")]


def test_a_failed_action_raises_with_its_reason_kind(
    sw: Swflows, embedder_db: sa.Engine
) -> None:
    emb = Embedder(sw, embedder_db)
    lc = emb.lifecycle
    config = suspendable(sw)
    server = str(uuid.uuid4())

    def failing(item: dict[str, Any]) -> dict[str, Any]:
        return {"deploy_stdout": "", "deploy_stderr": "no", "deploy_status_code": 2}

    chosen = str(uuid.uuid4())
    with Server(emb, server, failing):
        with pytest.raises(DeploymentFailed) as failed:
            emb.run(
                "web",
                "CREATE",
                lambda: lc.handle_create(
                    server, config.id, timeout=60, deployment_id=chosen
                ),
                lc.check_create_complete,
                chosen,
            )
        assert failed.value.kind == "exit_code"
        assert failed.value.deployment.output_values["deploy_stderr"] == "no"
        assert "status code: 2" in str(failed.value)
        assert embedder_rows(embedder_db) == [("web", "CREATE", "FAILED")]
        # its DELETE fails too: the deployment is removed all the same
        emb.run(
            "web",
            "DELETE",
            functools.partial(start_delete, lc, chosen),
            lc.check_delete_complete,
            chosen,
        )
    assert leftovers(sw, chosen) == {}


def test_a_deployment_deleted_while_it_waits_is_cancelled_then_removed(
    sw: Swflows,
) -> None:
    """A stack deleted while its deployment waits for a server that never
    answers: the action in flight is cancelled, the deployment removed,
    nothing left behind (it was an InvalidTransition before)."""
    lc = Lifecycle(sw)
    config = sw.create_config("plain", "#!/bin/sh\n", group="script")
    server = str(uuid.uuid4())
    dep_id = lc.handle_create(server, config.id, timeout=300)
    assert dep_id is not None
    assert not lc.check_create_complete(dep_id)
    lc.handle_delete(dep_id)
    deadline = time.monotonic() + 60
    while not lc.check_delete_complete(dep_id):
        assert time.monotonic() < deadline, "the delete never completed"
        time.sleep(0.2)
    assert leftovers(sw, dep_id) == {}


def test_a_check_given_wait_hears_of_the_end_in_the_same_call(
    sw: Swflows, embedder_db: sa.Engine
) -> None:
    """settle() returns once the deployment is in its server's metadata; a
    check given ``wait`` returns True in the call during which the agent
    answered, where one without it returns False at once (the embedder
    then heard of the outcome only at its next check)."""
    emb = Embedder(sw, embedder_db)
    waiter = Completions(sw, interval=0.2)
    lc = Lifecycle(sw, waiter)
    config = sw.create_config("plain", "#!/bin/sh\n", group="script")
    server = str(uuid.uuid4())
    gate = threading.Event()

    def gated(item: dict[str, Any]) -> dict[str, Any]:
        assert gate.wait(120), "the test never opened the gate"
        return {"deploy_stdout": "", "deploy_stderr": "", "deploy_status_code": 0}

    dep_id = str(uuid.uuid4())
    emb._record("web", dep_id, "CREATE", "IN_PROGRESS")
    with Server(emb, server, gated):
        assert lc.handle_create(server, config.id, timeout=300, deployment_id=dep_id)
        assert lc.settle(dep_id, 60)
        [item] = emb.metadata(server)["deployments"]
        assert item["id"] == sw.show(dep_id).config_id
        assert [row.state for row in sw.list_flows(dep_id)] == ["PARKED"]
        assert not lc.check_create_complete(dep_id)
        assert not lc.check_create_complete(dep_id, wait=0.2)
        opener = threading.Timer(0.5, gate.set)
        opener.start()
        try:
            assert lc.check_create_complete(dep_id, wait=120)
        finally:
            opener.cancel()
            gate.set()
            waiter.close()
        assert sw.show(dep_id).status == states.COMPLETE
        assert waiter.pending() == []
        sw.undeploy(dep_id)
    assert leftovers(sw, dep_id) == {}


def test_an_action_the_config_does_not_handle_does_nothing(sw: Swflows) -> None:
    lc = Lifecycle(sw)
    config = sw.create_config("plain", "#!/bin/sh\n", group="script")
    server = str(uuid.uuid4())
    dep = sw.deploy(server, config.id, signal_transport="NO_SIGNAL")
    assert lc.handle_suspend(dep.id) is None
    assert lc.check_suspend_complete(None) is True
    assert sw.show(dep.id).action == "CREATE"  # untouched, as Heat leaves it
    sw.undeploy(dep.id)


def test_a_completion_callback_instead_of_polling(
    sw: Swflows, embedder_db: sa.Engine
) -> None:
    emb = Embedder(sw, embedder_db)
    config = suspendable(sw)
    server = str(uuid.uuid4())
    done = threading.Event()
    seen: list[Completion] = []

    def callback(completion: Completion) -> None:
        seen.append(completion)
        done.set()

    dep_id = str(uuid.uuid4())
    emb._record("cb", dep_id, "CREATE", "IN_PROGRESS")
    with Completions(sw) as completions, Server(emb, server):
        emb.lifecycle.handle_create(server, config.id, timeout=60, deployment_id=dep_id)
        completions.add(dep_id, callback)
        assert done.wait(90)
        assert seen[0].deployment is not None
        assert seen[0].deployment.status == states.COMPLETE
        done.clear()
        sw.undeploy(dep_id, wait=False)
        completions.add(dep_id, callback)
        assert done.wait(90)
    assert len(seen) == 2 and seen[1].removed
    assert completions.pending() == []
