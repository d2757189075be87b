"""A deploy reads what it needs once: the server's record once in the API,
no look before a write that looks for itself, and a step run again after a
crash keeps what its first run stored (SQLite)."""

from __future__ import annotations

import dataclasses
import datetime
import re
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from swflows import derive, exceptions, model, states
from swflows import transport_names as names
from swflows.engine import batching
from swflows.fixture import LocalSwflows
from swflows.persistence import Store, batches, logbook
from swflows.tasks import deployment as deployment_tasks
from tests.unit.test_persistence_store import derived_config, source_config


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as made:
        yield made


class Statements:
    """The statements each thread ran on a store's SQLite connections."""

    def __init__(self, engine: sa.Engine) -> None:
        self.by_thread: dict[int, list[str]] = {}
        self._lock = threading.Lock()
        sa.event.listen(engine, "connect", self._traced)
        # connections the pool holds already are traced too
        engine.dispose()

    def _traced(self, dbapi_conn: Any, _: Any) -> None:
        dbapi_conn.set_trace_callback(self._seen)

    def _seen(self, sql: str) -> None:
        with self._lock:
            self.by_thread.setdefault(threading.get_ident(), []).append(sql)

    def of(self, thread: int, pattern: str) -> list[str]:
        with self._lock:
            found = list(self.by_thread.get(thread, []))
        return [sql for sql in found if re.match(pattern, sql, re.S)]


def test_a_deploy_reads_its_servers_record_once() -> None:
    """Its signal transport (the server's agent) and its config transport
    (the server's enrolled one) come from one read of the server's row."""
    with LocalSwflows() as local:
        sw = local.sw
        server = local.new_server()
        config = sw.create_config("app", "#!/bin/sh\n", group="script")
        seen = Statements(sw.store.engine)
        dep = sw.deploy(server, config.id, wait=False)
        here = threading.get_ident()
        servers = seen.of(here, r"SELECT\b.*\sFROM swflows_servers\s")
        assert len(servers) == 1, servers
        assert sw.wait(dep.id, timeout=60).status == states.COMPLETE


def new_deployment(
    config_id: str | None, source_id: str | None, server_id: str = "srv"
) -> model.Deployment:
    return model.Deployment(
        id=model.new_id(),
        server_id=server_id,
        action="CREATE",
        status=states.IN_PROGRESS,
        config_id=config_id,
        source_config_id=source_id,
    )


def test_a_deployment_row_is_checked_against_its_configs_at_once(
    store: Store,
) -> None:
    """Both configs a deployment names are looked for in one statement, and
    the one missing is named; a new deployment whose configs are there is
    inserted without that look (the database's keys check them)."""
    source = store.create_config(source_config())
    seen = Statements(store.engine)
    for field, config_id, source_id in (
        ("config_id", "missing", source.id),
        ("source_config_id", source.id, "gone"),
    ):
        dep = new_deployment(config_id, source_id)
        with pytest.raises(exceptions.ConfigNotFound) as err:
            store.create_deployment(dep)
        assert err.value.field == field
    made = store.create_deployment(new_deployment(source.id, source.id))
    assert store.get_deployment(made.id).config_id == source.id
    looks = seen.of(threading.get_ident(), r"SELECT swflows_configs\.id\s+FROM")
    assert len(looks) == 2, looks


def test_a_new_deployment_is_written_without_a_read_first(store: Store) -> None:
    """A new deployment (its configs there) is its server's bump, returning
    the new version, and its row's insert: no look for the id or the
    configs, and no read of the server; a new config is its insert."""
    config = store.create_config(source_config())
    first = store.create_deployment(new_deployment(config.id, config.id))
    seen = Statements(store.engine)
    here = threading.get_ident()
    again = store.create_config(derived_config())
    made = store.create_deployment(new_deployment(again.id, config.id))
    assert seen.of(here, r"SELECT\b") == []
    assert len(seen.of(here, r"UPDATE swflows_servers\b.*RETURNING")) == 1
    assert len(seen.of(here, r"INSERT INTO swflows_deployments\b")) == 1
    assert len(seen.of(here, r"INSERT INTO swflows_configs\b")) == 1
    assert store.get_server("srv").metadata_version == 2
    # the same id again is read the careful way, and returned as stored
    assert store.create_deployment(made).id == made.id
    assert store.create_config(again).id == again.id
    with pytest.raises(exceptions.ValidationError, match="different content"):
        store.create_deployment(dataclasses.replace(first, config_id=again.id))
    assert store.get_server("srv").metadata_version == 2


def test_a_deployment_naming_a_missing_config_leaves_no_server_row(
    store: Store,
) -> None:
    """Inserted at once, a deployment whose config is missing fails on the
    database's key: its server's row, made by the same transaction, goes
    with it, and the error names the config as before."""
    with pytest.raises(exceptions.ConfigNotFound) as err:
        store.create_deployment(new_deployment("missing", None, "new-srv"))
    assert err.value.field == "config_id"
    assert [s.server_id for s in store.list_servers()] == []


def test_a_derived_config_stored_before_is_kept_as_it_is(store: Store) -> None:
    """A derived config's id names its deployment's action: its action run
    again (after a crash) derives it anew, with other signal URLs, and keeps
    the one stored first, whose URLs the server may hold already."""
    first = store.create_config(derived_config(id="d-1"), derived=True)
    other = derived_config(name="again", password="other", id="d-1")
    assert store.create_config(other, derived=True, keep_existing=True) == first
    assert store.get_config("d-1") == first
    with pytest.raises(exceptions.ValidationError) as err:
        store.create_config(other, derived=True)
    assert err.value.field == "id"
    # a config stored as a source is never taken for a derived one
    source = store.create_config(source_config(id="s-1"))
    with pytest.raises(exceptions.ValidationError):
        store.create_config(
            derived_config(id=source.id), derived=True, keep_existing=True
        )


def create_step(store: Store, *, generation: int) -> float:
    task = deployment_tasks.CreateDeployment(
        "deploy", config_transport=names.POLL_TEMP_URL
    )
    services: Any = types.SimpleNamespace(store=store)
    return float(
        task.execute(
            services,
            deployment_id="dep-1",
            server_id="srv",
            derived_config_id=derive.derived_config_id("dep-1", generation),
            source_config_id=None,
            action="CREATE",
            input_values={},
            name=None,
            timeout=60,
            generation=generation,
            signal_transport=names.TEMP_URL_SIGNAL,
        )
    )


def test_a_deployment_row_stored_before_is_its_actions_start(store: Store) -> None:
    """CreateDeployment run again finds the row its first run stored, in its
    own transaction: the action started when that row was made, and the row
    is kept as it is since (a signal may have moved it on)."""
    store.create_config(
        derived_config(id=derive.derived_config_id("dep-1", 1)), derived=True
    )
    before = time.time()
    started = create_step(store, generation=1)
    assert before <= started <= time.time()
    store.update_deployment("dep-1", status=states.COMPLETE)
    time.sleep(1.05 - time.time() % 1)  # the next second: rows keep seconds
    again = create_step(store, generation=1)
    row = store.get_deployment("dep-1")
    assert row.status == states.COMPLETE
    assert row.creation_time is not None
    made = row.creation_time.replace(tzinfo=datetime.UTC)
    assert again == made.timestamp() < started + 1
    assert store.get_server("srv").metadata_version == 1  # not written again
    store.create_config(
        derived_config(id=derive.derived_config_id("dep-1", 2)), derived=True
    )
    with pytest.raises(exceptions.ValidationError) as err:
        create_step(store, generation=2)
    assert err.value.field == "deployment_id"


def test_a_rounds_steps_read_no_row_while_their_lease_is_surely_theirs() -> None:
    """Their rows were just written, leased to this runner: before each
    write outside the database (the signal store's), nothing is read to
    fence it while no other runner can hold the row."""
    with LocalSwflows(overrides={"runner": {"launch_batch": 64}}) as local:
        sw = local.sw
        config = sw.create_config("app", "#!/bin/sh\n", group="script")
        seen = Statements(sw.store.engine)
        made = [sw.deploy(local.new_server(), config.id) for _ in range(3)]
        assert [dep.status for dep in made] == [states.COMPLETE] * 3
        rounds = [
            thread.ident
            for thread in threading.enumerate()
            if thread.name.startswith(("swflows-launch", "swflows-round"))
            and thread.ident is not None
        ]
        assert rounds
        for ident in rounds:
            owners = seen.of(ident, r"SELECT swflows_flows\.owner\s+FROM")
            assert owners == []


def test_a_rounds_fence_reads_the_row_once_past_the_sure_share() -> None:
    """A runner paused past the sure share of its lease (another may have
    taken the row since) reads the row, and stops at one that is not its
    own."""
    reads: list[str] = []

    def holder(flow_id: str) -> str:
        reads.append(flow_id)
        return "another"

    runner: Any = types.SimpleNamespace(
        registry=types.SimpleNamespace(holder=holder), owner="me", lease_seconds=30.0
    )
    item: Any = types.SimpleNamespace(
        flow_id="f1", sure_until=time.monotonic() + 30, claim=None
    )
    fence = batching._fence(runner, item)
    fence()
    assert reads == []
    item.sure_until = time.monotonic() - 0.01
    with pytest.raises(logbook.FlowFenced):
        fence()
    assert reads == ["f1"]


def test_a_recorded_round_is_sure_of_its_rows_for_a_share_of_the_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    items: Any = [
        types.SimpleNamespace(
            withdrawn=False,
            committing=False,
            recording=False,
            recorded=False,
            flow_id=f"f{i}",
            kind="deploy",
            deployment_id=f"d{i}",
            server_id="s",
            book=None,
            sure_until=0.0,
        )
        for i in range(2)
    ]
    written: list[int] = []
    runner: Any = types.SimpleNamespace(
        lease_seconds=30.0, registry=None, backend=None, owner="me"
    )
    monkeypatch.setattr(
        batches,
        "record_new",
        lambda _registry, _backend, rows, *_, **__: written.append(len(rows)),
    )
    before = time.monotonic()
    recorded = batching._record(runner, threading.Lock(), items)
    assert written == [2] and recorded == items
    for item in items:
        assert item.recorded
        assert before + 24 <= item.sure_until <= time.monotonic() + 24


def test_a_config_read_moments_ago_is_taken_as_it_was(
    store: Store, tmp_path: Path
) -> None:
    """A burst of deploys of one config: each derive takes the source as
    this store last read it, within ``max_age``.  Deleted here, it is
    read again (not found); deleted by another process, the deployment's
    row that names it is refused."""
    config = store.create_config(source_config())
    seen = Statements(store.engine)
    here = threading.get_ident()
    first = store.get_config(config.id)
    assert store.get_config(config.id, max_age=5) == first
    reads = r"SELECT swflows_configs\.id, swflows_configs\.name"
    assert len(seen.of(here, reads)) == 1
    assert store.get_config(config.id) == first  # no max_age: read
    assert len(seen.of(here, reads)) == 2
    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as other:
        other.delete_config(config.id)
    assert store.get_config(config.id, max_age=5) == first
    with pytest.raises(exceptions.ConfigNotFound) as err:
        store.create_deployment(
            model.Deployment(
                id=model.new_id(),
                server_id="srv",
                action="CREATE",
                status=states.IN_PROGRESS,
                config_id=None,
                source_config_id=config.id,
            )
        )
    assert err.value.field == "source_config_id"
    kept = store.create_config(source_config(name="kept"))
    store.get_config(kept.id)
    store.delete_config(kept.id)
    with pytest.raises(exceptions.ConfigNotFound):
        store.get_config(kept.id, max_age=5)
