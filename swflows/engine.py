"""The runner: runs swflows' flows with persistence in the store's database.

Each flow gets its own logbook, holding the factory's dotted name, its JSON
arguments, the flow's version and the deployment it serves, so any process
can rebuild the flow later.  The run-time services are injected as a
transient value and never written to the logbook.  A finished flow's
logbook is removed: the deployment row is the lasting record.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import uuid
from collections.abc import Iterator
from typing import Any

from taskflow import engines
from taskflow import states as tf_states
from taskflow.persistence import models

from swflows import exceptions, flows
from swflows.services import SERVICES_KEY, Services

LOG = logging.getLogger(__name__)

#: the logbook meta key holding swflows' own description of a flow
META_KEY = "swflows"


class Runner:
    """Runs flows for one :class:`~swflows.services.Services`."""

    def __init__(self, services: Services, *, max_workers: int = 8) -> None:
        self.services = services
        self.backend = services.store.taskflow_backend()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="swflows-runner"
        )

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        with contextlib.closing(self.backend.get_connection()) as conn:
            yield conn

    def run(self, kind: str, plan: dict[str, Any], inputs: dict[str, Any]) -> str:
        """Build flow ``kind`` and run it to its end in this thread."""
        engine, flow_id = self._load_new(kind, plan, inputs)
        self._run(engine, flow_id)
        return flow_id

    def submit(
        self, kind: str, plan: dict[str, Any], inputs: dict[str, Any]
    ) -> concurrent.futures.Future[str]:
        """Build flow ``kind`` now and run it on the runner's threads."""
        engine, flow_id = self._load_new(kind, plan, inputs)

        def go() -> str:
            self._run(engine, flow_id)
            return flow_id

        return self._executor.submit(go)

    def _load_new(
        self, kind: str, plan: dict[str, Any], inputs: dict[str, Any]
    ) -> tuple[Any, str]:
        try:
            factory = flows.FACTORIES[kind]
        except KeyError:
            raise exceptions.FlowError(None, f"unknown flow {kind!r}") from None
        flow = factory(**plan)
        flow_id = str(uuid.uuid4())
        # one logbook per flow, sharing the flow's id, so it is found by it
        book = models.LogBook(
            f"swflows-{kind}-{inputs.get('deployment_id')}", uuid=flow_id
        )
        detail = models.FlowDetail(flow.name, uuid=flow_id)
        book.add(detail)
        engines.save_factory_details(detail, factory, [], plan)
        detail.meta[META_KEY] = {
            "kind": kind,
            "version": flows.VERSIONS[kind],
            "deployment_id": inputs.get("deployment_id"),
        }
        with self._connection() as conn:
            conn.save_logbook(book)
        engine = engines.load(
            flow, store=inputs, flow_detail=detail, book=book, backend=self.backend
        )
        engine.storage.inject({SERVICES_KEY: self.services}, transient=True)
        return engine, flow_id

    def _run(self, engine: Any, flow_id: str) -> None:
        try:
            engine.run()
        finally:
            state = engine.storage.get_flow_state()
            if state in (tf_states.SUCCESS, tf_states.REVERTED):
                self._forget(flow_id)

    def _forget(self, flow_id: str) -> None:
        with self._connection() as conn:
            try:
                conn.destroy_logbook(flow_id)
            except Exception:  # already gone is fine; anything else is logged
                LOG.debug("logbook %s not removed", flow_id, exc_info=True)


__all__ = ["META_KEY", "Runner"]
