"""Flow overhead: swflows' deploy flow against the same tasks on bare TaskFlow.

Cloud calls are excluded: the tasks get a :class:`Services` whose object
store is a dict (:class:`MemoryObjectStore`) where a signal object holds the
agent's final signal as soon as it is made.  Both sides run the very same
deploy graph (TEMP_URL_SIGNAL, POLL_TEMP_URL) with the same inputs on the
same database, alternating, so load on the machine hits both alike:

* **swflows**: :meth:`Runner.launch`, its store-backed logbook and flows
  registry, the flow parking before its wait, the watcher resuming it, and
  its logbook removed at the end;
* **stock**: ``engines.load_from_factory`` with TaskFlow's stock SQLAlchemy
  logbook, run to the end in the calling thread (the wait step reads the
  signal at once);
* **unpersisted**: the same with TaskFlow's in-memory backend, the tasks'
  own work (their store writes included): what neither logbook can save.

Also measured, as the persistence cost alone: a linear flow of five trivial
tasks on both logbooks.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import os
import pathlib
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, cast

import sqlalchemy as sa
from taskflow import engines, task
from taskflow.patterns import linear_flow
from taskflow.persistence import backends, models

from swflows import conf as sw_conf
from swflows import model, states
from swflows import transport_names as names
from swflows.api import Swflows
from swflows.clients.cloud import Clients
from swflows.clients.object_store import ObjectInfo, ObjectStore, StoredObject
from swflows.flows import deploy
from swflows.persistence import crypto
from swflows.persistence.store import Store
from swflows.services import SERVICES_KEY

PG_ADMIN_URL = os.environ.get(
    "SWFLOWS_TEST_PG_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres"
)
#: what the in-memory agent answers in every signal object
FINAL = b'{"deploy_status_code": 0, "deploy_stdout": "ok", "result": "r"}'


class MemoryObjectStore:
    """The object-store calls of the deploy flow, on a dict.

    A PUT TempURL made for an object of ``signal_container`` writes
    :data:`FINAL` there at once, as if the server's agent had answered
    before anyone looked.
    """

    def __init__(self, signal_container: str) -> None:
        self.signal_container = signal_container
        self.objects: dict[tuple[str, str], tuple[bytes, str]] = {}
        self.listing_requests = 0

    def _info(self, key: tuple[str, str]) -> tuple[bytes, str, str]:
        body, when = self.objects[key]
        return body, hashlib.md5(body).hexdigest(), when  # noqa: S324 (an ETag)

    def ensure_container(self, name: str) -> None:
        pass

    def put_object(self, container: str, name: str, body: bytes, **_: Any) -> str:
        now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
        self.objects[(container, name)] = (bytes(body), now)
        return self._info((container, name))[1]

    def get_object(self, container: str, name: str, **_: Any) -> StoredObject | None:
        if (container, name) not in self.objects:
            return None
        body, etag, when = self._info((container, name))
        return StoredObject(name, etag, when, body)

    def head_object(self, container: str, name: str) -> ObjectInfo | None:
        if (container, name) not in self.objects:
            return None
        body, etag, when = self._info((container, name))
        return ObjectInfo(name, etag, when, len(body))

    def list_objects(
        self, container: str, prefix: str | None = None
    ) -> list[ObjectInfo]:
        self.listing_requests += 1
        found = []
        for c, name in sorted(self.objects):
            if c == container and name.startswith(prefix or ""):
                info = self.head_object(c, name)
                assert info is not None
                found.append(info)
        return found

    def list_container(self, container: str) -> list[ObjectInfo]:
        """Its objects (every container is there: none is ever missing)."""
        return self.list_objects(container)

    def delete_object(self, container: str, name: str) -> bool:
        return self.objects.pop((container, name), None) is not None

    def temp_url(
        self, container: str, name: str, method: str, expires: int, **_: Any
    ) -> str:
        if container == self.signal_container and method == "PUT":
            self.put_object(container, name, FINAL)
        return f"http://memory.invalid/v1/AUTH_bench/{container}/{name}?m={method}"


@contextlib.contextmanager
def pg_database() -> Iterator[str]:
    """A PostgreSQL database of its own, dropped afterwards."""
    name = f"swflows_bench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        try:
            yield (
                sa.make_url(PG_ADMIN_URL)
                .set(database=name)
                .render_as_string(hide_password=False)
            )
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                left = conn.exec_driver_sql(
                    "SELECT count(*) FROM pg_database WHERE datname = %s", (name,)
                ).scalar_one()
            if left:
                raise RuntimeError(f"database {name} was not dropped")
    finally:
        admin.dispose()


class _Step(task.Task):  # type: ignore[misc]
    def execute(self, value: int) -> int:
        return value + 1


def linear5() -> linear_flow.Flow:
    flow = linear_flow.Flow("bench")
    for i in range(5):
        flow.add(_Step(f"step{i}", rebind={"value": f"v{i}"}, provides=f"v{i + 1}"))
    return flow


#: the watcher's poll on the swflows side (seconds; the least it may be)
POLL_INTERVAL = 0.1


class Sides:
    """Both sides on one database: ``deploy(side)`` runs one flow, in ms."""

    def __init__(self, url: str, folder: pathlib.Path) -> None:
        is_sqlite = url.startswith("sqlite")
        self.store = Store(
            url,
            secret_key=None if is_sqlite else crypto.generate_key(),
            secret_key_file=str(folder / "key") if is_sqlite else None,
        )
        self.conf = sw_conf.get_conf()
        self.conf.set_override("delivery_timeout", 0)
        self.conf.set_override("sweep_interval", 3600.0, "watcher")
        # a new flow's park asks for no look of its own: its signal, here
        # in its store at once, is read by the next poll, which comes
        # within this (a figure includes up to one)
        self.conf.set_override("poll_interval", POLL_INTERVAL, "watcher")
        self.swift = MemoryObjectStore(self.conf.signal_container)
        self.sw = Swflows(
            self.store,
            # Swift in memory: the calls the signal transport makes
            Clients(object_store=lambda: cast(ObjectStore, self.swift)),
            self.conf,
        )
        self.stock = backends.fetch({"connection": url})
        self.memory = backends.fetch({"connection": "memory://"})
        with contextlib.closing(self.stock.get_connection()) as conn:
            conn.upgrade()
        self.config = self.sw.create_config("bench", "#!/bin/sh\n", group="script")

    def close(self) -> None:
        self.sw.close()
        self.stock.close()
        self.store.close()

    def _inputs(self) -> tuple[dict[str, Any], dict[str, Any]]:
        server_id = f"bench-{uuid.uuid4()}"
        plan = self.sw._plan(server_id, names.TEMP_URL_SIGNAL, names.POLL_TEMP_URL)
        inputs: dict[str, Any] = {
            "deployment_id": model.new_id(),
            "server_id": server_id,
            "source_config_id": self.config.id,
            "action": model.CREATE,
            "input_values": {},
            "name": "bench",
            "timeout": 600,
            "generation": 1,
            "signal_transport": names.TEMP_URL_SIGNAL,
            "parent_id": None,
        }
        return plan.to_kwargs(), inputs

    def deploy_swflows(self) -> float:
        plan, inputs = self._inputs()
        started = time.perf_counter()
        _, future = self.sw.runner.launch(deploy.NAME, plan, inputs)
        future.result(timeout=120)
        took = time.perf_counter() - started
        self._check(inputs["deployment_id"])
        return took * 1000

    def deploy_stock(self) -> float:
        plan, inputs = self._inputs()
        started = time.perf_counter()
        book = models.LogBook("bench")
        with contextlib.closing(self.stock.get_connection()) as conn:
            conn.save_logbook(book)
        engine = engines.load_from_factory(
            deploy.make_flow,
            factory_kwargs=plan,
            store=inputs,
            book=book,
            backend=self.stock,
        )
        engine.storage.inject({SERVICES_KEY: self.sw.services}, transient=True)
        engine.run()
        took = time.perf_counter() - started
        self._check(inputs["deployment_id"])
        return took * 1000

    def deploy_unpersisted(self) -> float:
        """The same tasks with no logbook at all: the tasks' own work."""
        plan, inputs = self._inputs()
        started = time.perf_counter()
        engine = engines.load_from_factory(
            deploy.make_flow, factory_kwargs=plan, store=inputs, backend=self.memory
        )
        engine.storage.inject({SERVICES_KEY: self.sw.services}, transient=True)
        engine.run()
        took = time.perf_counter() - started
        self._check(inputs["deployment_id"])
        return took * 1000

    def _check(self, deployment_id: str) -> None:
        dep = self.store.get_deployment(deployment_id)
        if dep.status != states.COMPLETE:
            raise RuntimeError(f"deployment ended {dep.status}: {dep.reason}")

    def linear_swflows(self) -> float:
        return self._linear(self.store.taskflow_backend())

    def linear_stock(self) -> float:
        return self._linear(self.stock)

    @staticmethod
    def _linear(backend: Any) -> float:
        started = time.perf_counter()
        book = models.LogBook("bench")
        with contextlib.closing(backend.get_connection()) as conn:
            conn.save_logbook(book)
        engine = engines.load(linear5(), store={"v0": 0}, book=book, backend=backend)
        engine.run()
        assert engine.storage.fetch("v5") == 5
        return (time.perf_counter() - started) * 1000


def alternate(
    runs: dict[str, Callable[[], float]], flows: int, warmup: int = 3
) -> dict[str, dict[str, float]]:
    for _ in range(warmup):
        for run in runs.values():
            run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(flows):
        for name, run in runs.items():
            times[name].append(run())
    return {
        name: {
            "median_ms": statistics.median(values),
            "mean_ms": statistics.fmean(values),
            "flows": len(values),
        }
        for name, values in times.items()
    }


def measure_on(url: str, folder: pathlib.Path, flows: int) -> dict[str, Any]:
    sides = Sides(url, folder)
    warmup = min(3, flows)
    try:
        deploy_: dict[str, Any] = alternate(
            {
                "stock": sides.deploy_stock,
                "swflows": sides.deploy_swflows,
                "unpersisted": sides.deploy_unpersisted,
            },
            flows,
            warmup,
        )
        linear: dict[str, Any] = alternate(
            {"stock": sides.linear_stock, "swflows": sides.linear_swflows},
            flows,
            warmup,
        )
    finally:
        sides.close()
    out: dict[str, Any] = {}
    for label, found in (("deploy", deploy_), ("linear5", linear)):
        found["ratio_median"] = (
            found["stock"]["median_ms"] / found["swflows"]["median_ms"]
        )
        found["ratio_mean"] = found["stock"]["mean_ms"] / found["swflows"]["mean_ms"]
        if "unpersisted" in found:
            # what persistence (and, for swflows, parking) adds to the tasks
            floor = found["unpersisted"]["median_ms"]
            found["added_ms"] = {
                side: found[side]["median_ms"] - floor for side in ("stock", "swflows")
            }
        out[label] = found
    return out


def run(folder: pathlib.Path, flows: int, postgresql: bool = True) -> dict[str, Any]:
    results = {
        "sqlite": measure_on(f"sqlite:///{folder / 'overhead.sqlite'}", folder, flows)
    }
    if postgresql:
        with pg_database() as url:
            results["postgresql"] = measure_on(url, folder, flows)
    return results


__all__ = ["MemoryObjectStore", "run"]
