"""New flows: a flow built by one of swflows' factories, or a
developer's own (kind ``custom``), recorded and started.

Each flow gets its own logbook, holding the factory's dotted name, its JSON
arguments, the flow's version and the deployment it serves, so any process
can rebuild the flow later.  The run-time services are injected as a
transient value and never written to the logbook.  A row in the flows
table (:mod:`swflows.persistence.flow_registry`), written with the logbook
in one transaction, names the runner holding the flow, under a lease the
runner renews.

A custom flow's factory is checked here (:func:`factory_path`), before
anything is written: another process must be able to import it by name.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from taskflow import engines
from taskflow.persistence import models

from swflows import exceptions, flows
from swflows.engine import batching
from swflows.engine.driving import Claim, Driving
from swflows.engine.results import CUSTOM, META_KEY
from swflows.flows import compose
from swflows.persistence import batches, flow_registry


class Launching(Driving):
    """Builds, records and starts new flows."""

    #: new deploy flows launched in rounds (None: not yet needed, or
    #: ``[runner] launch_batch`` is 0, or flows are posted to a jobboard)
    _batching: batching.Batcher | None = None

    # -- new flows --------------------------------------------------------
    def launch(
        self, kind: str, plan: dict[str, Any], inputs: dict[str, Any]
    ) -> tuple[str, concurrent.futures.Future[str]]:
        """Build flow ``kind``, record it, and start it on the runner's threads.

        The future ends when the flow does (its error if it reverted); a
        parked flow's future ends once the watcher resumed and finished it.
        """
        try:
            factory = flows.FACTORIES[kind]
        except KeyError:
            raise exceptions.FlowError(None, f"unknown flow {kind!r}") from None
        batcher = self._batcher()
        queued = None if batcher is None else batcher.launch(kind, plan, inputs)
        if queued is not None:
            return queued
        flow = factory(**plan)
        flow_id = str(uuid.uuid4())
        deployment_id = str(inputs["deployment_id"])
        meta = {
            "kind": kind,
            "version": flows.VERSIONS[kind],
            "deployment_id": deployment_id,
        }
        return self._start(
            flow_id,
            flow,
            factory,
            plan,
            inputs,
            meta,
            server_id=str(inputs.get("server_id") or ""),
            book_name=f"swflows-{kind}-{deployment_id}",
        )

    def launch_custom(
        self,
        factory: Any,
        kwargs: dict[str, Any],
        plans: dict[str, dict[str, Any]],
    ) -> tuple[str, concurrent.futures.Future[str]]:
        """Build a developer's flow with ``factory(**kwargs)`` and start it.

        ``factory`` is a module-level callable or its dotted path, checked
        (:func:`factory_path`) before anything is written; ``kwargs`` must
        be JSON; ``plans`` are the signal transports' resolved plans, stored
        with the flow and used to build it (:func:`~swflows.flows.compose.
        planning`).  The flow's store holds only its own id.
        """
        path = factory_path(factory)
        check_json("kwargs", kwargs)
        check_json("plans", plans)
        made = load_factory(path)
        with compose.planning(plans):
            flow = made(**kwargs)
        if not hasattr(flow, "iter_links"):
            raise exceptions.ValidationError(
                "factory", f"{path} returned {type(flow).__name__}, not a flow"
            )
        flow_id = str(uuid.uuid4())
        meta = {"kind": CUSTOM, "factory": path, "plans": plans}
        return self._start(
            flow_id,
            flow,
            made,
            kwargs,
            {compose.FLOW_ID_KEY: flow_id},
            meta,
            server_id="",
            book_name=f"swflows-{CUSTOM}-{flow_id}",
        )

    def _start(
        self,
        flow_id: str,
        flow: Any,
        factory: Any,
        factory_kwargs: dict[str, Any],
        inputs: dict[str, Any],
        meta: dict[str, Any],
        *,
        server_id: str,
        book_name: str,
    ) -> tuple[str, concurrent.futures.Future[str]]:
        with self._launching_here(flow_id):
            kind = str(meta["kind"])
            # one logbook per flow, sharing the flow's id, so it is found by it
            book = models.LogBook(book_name, uuid=flow_id)
            if kind == CUSTOM:  # its outcome joins this once it ended
                book.meta = {META_KEY: {"kind": kind, "factory": meta["factory"]}}
            detail = models.FlowDetail(flow.name, uuid=flow_id)
            book.add(detail)
            engines.save_factory_details(detail, factory, [], factory_kwargs)
            detail.meta[META_KEY] = meta
            if self.jobs is not None:
                # a conductor drives it: its inputs go with its row
                batching.add_inputs(detail, inputs)
            row = flow_registry.new_row(
                flow_id,
                kind=kind,
                deployment_id=str(meta.get("deployment_id") or ""),
                server_id=server_id,
                owner=None if self.jobs is not None else self.owner,
                lease_until=self.jobs.deadline()
                if self.jobs is not None
                else time.time() + self.lease_seconds,
            )
            # its row and its logbook in one transaction: never one alone
            batches.record_new(self.registry, self.backend, [row], [book])
            try:
                if self.jobs is not None:  # a conductor drives it
                    self.jobs.post(flow_id, kind=kind, server=server_id)
                    return flow_id, concurrent.futures.Future()
                # the engine driving it here writes only while this runner
                # holds it
                backend = self.backend.fenced(flow_id, self.owner)
                engine = engines.load(
                    flow, store=inputs, flow_detail=detail, book=book, backend=backend
                )
            except BaseException:
                self.registry.remove(flow_id)
                with contextlib.suppress(Exception), self._connection() as conn:
                    conn.destroy_logbook(flow_id)
                raise
            future = self._future(flow_id)
            self._submit(
                flow_id,
                engine,
                flow,
                custom=kind == CUSTOM,
                deployment_id=str(meta.get("deployment_id") or ""),
                writes=backend,
            )
            return flow_id, future

    def _batcher(self) -> batching.Batcher | None:
        """The rounds new deploy flows are launched in, when this runner
        drives them and ``[runner] launch_batch`` is not 0."""
        if self.jobs is not None:
            return None
        return self._rounds()

    def _rounds(self) -> batching.Batcher | None:
        """The rounds, made once needed; None when ``[runner]
        launch_batch`` is 0 or the runner stops."""
        size = int(self.conf.runner.launch_batch)
        if size < 1 or self.stopping:
            return None
        with self._lock:
            if self._batching is None:
                self._batching = batching.Batcher(self, size)
            return self._batching

    def _adopt(self, flow_id: str, book: Any, detail: Any, claim: Claim) -> bool:
        """A conductor's claimed new deploy flow, launched in a round like
        a new flow of this runner's (``[runner] launch_batch``, not 0)."""
        rounds = self._rounds()
        return rounds is not None and rounds.adopt(flow_id, book, detail, claim)

    def drives_now(self, flow_id: str) -> bool | None:
        """A flow a round has is driven here, and does not go on under a
        new claim: the round parks it only while its row is this runner's
        (see :meth:`Driving.drives_now`)."""
        driven = super().drives_now(flow_id)
        rounds = self._batching
        if driven is None and rounds is not None and rounds.holds(flow_id):
            return False
        return driven

    def launching(self, deployment_id: str) -> bool:
        """Whether a new flow of ``deployment_id`` was launched here and its
        row is not written yet (it waits for a round): a group's driver
        that finds neither the flow's row nor the deployment's does not
        launch it again."""
        return self._batching is not None and self._batching.launching(deployment_id)

    def withdraw(
        self, flow_id: str, error: Callable[[BaseException], BaseException]
    ) -> BaseException | None:
        """Drop a new flow whose row could not be written and cannot have
        been (its caller gives up on it through a database outage): it ends
        with ``error(why its last write failed)``, returned, and never runs.
        None when it may be recorded, or waits for its first try."""
        if self._batching is None:
            return None
        return self._batching.withdraw(flow_id, error)

    def _unrecorded(self, flow_id: str) -> bool:
        return self._batching is not None and self._batching.unrecorded(flow_id)

    def progress_of(self, flow_id: str) -> threading.Event | None:
        event = super().progress_of(flow_id)
        if event is None and self._batching is not None:
            event = self._batching.progress_of(flow_id)
        return event

    @contextlib.contextmanager
    def _launching_here(self, flow_id: str) -> Iterator[None]:
        """While ``flow_id`` has its row and not yet its drive: its lease is
        renewed and it is nobody's orphan (see ``Takeover``)."""
        with self._lock:
            self._launching.add(flow_id)
        try:
            yield
        finally:
            with self._lock:
                self._launching.discard(flow_id)


def factory_path(factory: Any) -> str:
    """The dotted path a custom flow's factory is re-imported by.

    Refused (:class:`~swflows.exceptions.ValidationError`) unless that
    path imports this very callable: a lambda, a closure, a method, a
    function of ``__main__`` or one defined inside another is refused now,
    not when the flow resumes in another process.
    """
    if isinstance(factory, str):
        path = factory
        found = load_factory(path)
    else:
        module = getattr(factory, "__module__", None)
        qualname = getattr(factory, "__qualname__", None)
        if not callable(factory) or not module or not qualname:
            raise exceptions.ValidationError(
                "factory", f"{factory!r} is not a module-level function"
            )
        path = f"{module}.{qualname}"
        if module == "__main__":
            raise exceptions.ValidationError(
                "factory",
                f"{path} lives in __main__: another process cannot import it; "
                "move it to a module",
            )
        if "<" in qualname or "." in qualname:
            raise exceptions.ValidationError(
                "factory",
                f"{path} is not a module-level function (a lambda, closure, "
                "method or nested function cannot be re-imported by name)",
            )
        found = load_factory(path)
        if found is not factory:
            raise exceptions.ValidationError(
                "factory", f"{path} imports another object than the one given"
            )
    if not callable(found):
        raise exceptions.ValidationError("factory", f"{path} is not callable")
    return path


def load_factory(path: str) -> Any:
    """The callable at dotted ``path`` (``package.module.function``)."""
    module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute or "<" in path:
        raise exceptions.ValidationError(
            "factory", f"{path!r} is not a dotted path module.function"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise exceptions.ValidationError(
            "factory", f"cannot import {module_name} for {path}: {exc}"
        ) from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise exceptions.ValidationError(
            "factory", f"{module_name} has no {attribute}"
        ) from None


def check_json(field: str, value: Any, where: str = "") -> None:
    """Refuse anything but JSON types (dict with str keys, list, str, int,
    finite float, bool, None): a custom flow's kwargs are stored as JSON
    and must come back as they were given."""
    here = where or field
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise exceptions.ValidationError(field, f"{here} is {value}, not JSON")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            check_json(field, item, f"{here}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise exceptions.ValidationError(
                    field, f"{here} has key {key!r}: JSON keys are strings"
                )
            check_json(field, item, f"{here}.{key}")
        return
    raise exceptions.ValidationError(
        field, f"{here} is a {type(value).__name__}, not JSON"
    )


__all__ = ["Launching", "check_json", "factory_path", "load_factory"]
