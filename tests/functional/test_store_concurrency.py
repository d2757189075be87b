"""Many writers on one server: no lost write, exact versions, current copy.

Runs on a SQLite file and on PostgreSQL.
"""

from __future__ import annotations

import concurrent.futures
import random
import threading
import time
from typing import Any

from swflows import model
from swflows.persistence import ServerMetadata, Store
from tests.functional.db_fixtures import *  # noqa: F403 (fixtures)
from tests.unit.test_persistence_store import deployment, derived_config, raw_rows

DEPLOYMENTS = 200
THREADS = 16
SERVER = "busy-server"


def expected_document(store: Store, live: dict[int, str]) -> list[str]:
    """Derived config ids of the live deployments, by name then creation."""
    seq = {
        row["id"]: row["server_seq"]
        for row in raw_rows(store, store.tables.deployments)
    }
    names = {c.id: c.name for c in store.list_configs(include_derived=True)}
    deps = {d.id: d for d in store.list_deployments(server_id=SERVER)}
    assert set(deps) == set(live.values())
    ordered = sorted(deps.values(), key=lambda d: (names[d.config_id or ""], seq[d.id]))
    return [d.config_id for d in ordered if d.config_id]


def test_create_update_delete_race_on_one_server(store: Store) -> None:
    rng = random.Random(1731032)
    first, second = [], []
    for i in range(DEPLOYMENTS):
        # few names, so equal names (ties) are common
        first.append(derived_config(f"cfg-{i % 13:02d}", password=f"pw-{i}"))
        second.append(derived_config(f"cfg-{(i * 7) % 11:02d}", password=None))
    for config in first + second:
        store.create_config(config, derived=True)
    doomed = set(rng.sample(range(DEPLOYMENTS), DEPLOYMENTS // 2))
    ids = {i: model.new_id() for i in range(DEPLOYMENTS)}

    def life(i: int) -> None:
        dep = deployment(SERVER, config_id=first[i].id, id=ids[i], name=f"d{i}")
        store.create_deployment(dep)
        time.sleep(rng.random() / 1000)
        store.update_deployment(ids[i], config_id=second[i].id, generation=1)
        if i in doomed:
            store.delete_deployment(ids[i])

    order = list(range(DEPLOYMENTS))
    rng.shuffle(order)
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        futures = [pool.submit(life, i) for i in order]
        errors = [f.exception() for f in futures if f.exception() is not None]
    elapsed = time.perf_counter() - started
    assert errors == []

    live = {i: ids[i] for i in range(DEPLOYMENTS) if i not in doomed}
    metadata = store.server_metadata(SERVER)
    assert sorted(item["id"] for item in metadata.deployments) == sorted(
        second[i].id for i in live
    )
    assert [item["id"] for item in metadata.deployments] == expected_document(
        store, live
    )
    names = [item["name"] for item in metadata.deployments]
    assert names == sorted(names)
    writes = DEPLOYMENTS + DEPLOYMENTS + len(doomed)  # create, update, delete
    assert metadata.version == writes
    assert store.get_server(SERVER).metadata_version == writes
    assert all(d.generation == 1 for d in store.list_deployments(server_id=SERVER))
    print(
        f"\n{store.engine.dialect.name}: {writes} writes from {THREADS} threads "
        f"in {elapsed:.2f} s"
    )


def test_publishers_leave_the_current_document(store: Store) -> None:
    """Writers publish after each write; the last copy put is the store's."""
    configs = [
        store.create_config(derived_config(f"c{i}", password=None), derived=True)
        for i in range(6)
    ]
    published: dict[str, Any] = {}
    put_lock = threading.Lock()
    rng = random.Random(46132999)
    stale_puts = [0]

    def put(metadata: ServerMetadata) -> None:
        time.sleep(rng.random() / 500)  # the PUT takes a while
        with put_lock:
            published["version"] = metadata.version
            published["document"] = metadata.deployments

    def publish_by_hand() -> None:
        """read (version, doc) -> put -> mark_published; again if stale."""
        while True:
            metadata = store.server_metadata(SERVER)
            put(metadata)
            if store.mark_published(SERVER, metadata.version):
                return
            if store.get_server(SERVER).metadata_version == metadata.version:
                return  # someone confirmed this very version; our copy is it
            stale_puts[0] += 1

    def writer(worker: int) -> None:
        mine: list[str] = []
        for step in range(12):
            if mine and step % 3 == 2:
                store.delete_deployment(mine.pop(0))
            elif mine and step % 3 == 1:
                store.update_deployment(
                    mine[-1], config_id=configs[(worker + step) % 6].id
                )
            else:
                dep = store.create_deployment(
                    deployment(SERVER, config_id=configs[worker % 6].id)
                )
                mine.append(dep.id)
            if worker % 2:
                publish_by_hand()
            else:
                store.publish(SERVER, put)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(writer, w) for w in range(8)]
        errors = [f.exception() for f in futures if f.exception() is not None]
    assert errors == []
    final = store.server_metadata(SERVER)
    assert published["document"] == final.deployments
    assert published["version"] == final.version
    assert store.get_server(SERVER).published_version == final.version
    print(f"\n{store.engine.dialect.name}: {stale_puts[0]} stale copies re-published")
