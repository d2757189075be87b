"""A flow's outcome, for whoever waits for it: the runner's cache of
futures, the wait for a flow another runner may finish, and a custom
flow's result kept in its logbook's meta after it ended."""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

from taskflow import exceptions as tf_exc
from taskflow import states as tf_states

from swflows import exceptions
from swflows.engine import faults
from swflows.persistence import flow_registry as flow_rows
from swflows.persistence import logbook
from swflows.services import Services

LOG = logging.getLogger(__name__)

#: the logbook meta key holding swflows' own description of a flow
META_KEY = flow_rows.META_KEY
#: how many ended flows' outcomes a runner keeps for a wait() that comes late
FINISHED_KEPT = 1024
#: the flows-table kind of a developer's own flow
CUSTOM = flow_rows.CUSTOM


class FlowCancelled(exceptions.FlowError):
    """A custom flow was cancelled: it was stopped and reverted."""


class Results:
    """The outcomes of the flows of one runner: their futures (those
    running here, and the last :data:`FINISHED_KEPT` that ended), and the
    stored results of custom flows."""

    #: the runner's name, which its flows' rows name as their owner
    owner: str

    def __init__(self, services: Services) -> None:
        self.services = services
        self.conf = services.conf
        self.backend = services.store.taskflow_backend()
        self.registry = flow_rows.FlowRegistry(services.store)
        self._lock = threading.Lock()
        self._futures: dict[str, concurrent.futures.Future[str]] = {}
        self._finished: collections.OrderedDict[str, concurrent.futures.Future[str]] = (
            collections.OrderedDict()
        )

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        with contextlib.closing(self.backend.get_connection()) as conn:
            yield conn

    def _future(self, flow_id: str) -> concurrent.futures.Future[str]:
        with self._lock:
            future = self._futures.get(flow_id)
            if future is None or future.done():
                future = concurrent.futures.Future()
                self._futures[flow_id] = future
            return future

    def _finish(self, flow_id: str, error: BaseException | None) -> None:
        with self._lock:
            future = self._futures.pop(flow_id, None)
            if future is not None:
                self._finished[flow_id] = future
                while len(self._finished) > FINISHED_KEPT:
                    self._finished.popitem(last=False)
        if future is None or future.done():
            return
        if error is None:
            future.set_result(flow_id)
        else:
            future.set_exception(error)

    def _forget(
        self, flow_id: str, *, keep_book: bool = False, owner: str | None = None
    ) -> None:
        """Remove an ended flow's row and logbook, in one transaction (a
        custom flow's logbook stays, holding its result, without its steps);
        ``owner``: only while its row names that owner (see
        :func:`~swflows.persistence.flow_registry.end_flow`)."""
        self.backend.forget_book(flow_id)
        flow_rows.end_flow(self.registry, flow_id, keep_book=keep_book, owner=owner)

    def _record_end(self, flow_id: str, outcome: dict[str, Any] | None) -> bool:
        """Remove an ended flow's row and logbook while its row names this
        runner (:meth:`_forget`; a custom flow's ``outcome`` kept, see
        :meth:`_save_result`); False, and nothing removed, once another
        runner holds it."""
        try:
            if outcome is None:
                self._forget(flow_id, owner=self.owner)
            else:
                self._save_result(flow_id, outcome, True, owner=self.owner)
        except logbook.FlowFenced as exc:
            LOG.warning("%s", exc)
            return False
        return True

    def _save_result(
        self,
        flow_id: str,
        outcome: dict[str, Any],
        forget: bool = False,
        owner: str | None = None,
    ) -> None:
        """Write a custom flow's outcome into its logbook's meta; with
        ``forget`` (it ended), in the transaction that removes its row and
        its steps (:meth:`_forget`, ``owner`` as there)."""
        if forget:
            self.backend.forget_book(flow_id)
            flow_rows.end_flow(
                self.registry,
                flow_id,
                keep_book=True,
                result=(META_KEY, outcome),
                owner=owner,
            )
            return
        with self._connection() as conn:
            book = conn.get_logbook(flow_id, lazy=True)
            meta = dict(book.meta or {})
            meta[META_KEY] = {**dict(meta.get(META_KEY) or {}), **outcome}
            book.meta = meta
            conn.save_logbook(book)

    def _kept(self, flow_id: str) -> dict[str, Any]:
        """What the store keeps of an ended flow in its logbook's meta
        (empty when there is nothing)."""
        try:
            with self._connection() as conn:
                book = conn.get_logbook(flow_id, lazy=True)
        except Exception:
            return {}
        return dict((book.meta or {}).get(META_KEY) or {})

    def kept_error(self, flow_id: str) -> exceptions.FlowError | None:
        """The error a deploy flow that reverted the creation of its
        deployment ended with, as kept in the store for a caller in another
        process (an hour, :data:`~swflows.persistence.flow_registry.
        KEPT_FAILURE_SECONDS`); None when none is kept."""
        meta = self._kept(flow_id)
        if meta.get("kind") == CUSTOM or "state" not in meta:
            return None
        return stored_error(flow_id, meta)

    def result_of(self, flow_id: str) -> dict[str, Any] | None:
        """A custom flow's stored outcome (``state``, ``result``, ``error``,
        ``factory``); None while it has none (not ended, or unknown)."""
        meta = self._kept(flow_id)
        if meta.get("kind") != CUSTOM or "state" not in meta:
            return None
        return {
            "id": flow_id,
            "factory": meta.get("factory"),
            "state": meta["state"],
            "result": meta.get("result") or {},
            "error": meta.get("error"),
        }

    def inputs_of(self, flow_id: str) -> dict[str, Any] | None:
        """The inputs flow ``flow_id`` was launched with, from its logbook;
        None when it has none (not stored yet, or it is gone)."""
        try:
            with self._connection() as conn:
                detail = conn.get_logbook(flow_id).find(flow_id)
        except tf_exc.NotFound:
            return None
        for atom in detail or ():
            if atom.name == logbook.INJECTOR:
                return dict(atom.results or {})
        return None

    def forget_result(self, flow_id: str) -> bool:
        """Remove an ended custom flow's stored outcome; False if none."""
        if self.result_of(flow_id) is None:
            return False
        with self._connection() as conn:
            conn.destroy_logbook(flow_id)
        return True

    def wait(self, flow_id: str, timeout: float | None = None) -> None:
        """Block until flow ``flow_id`` ended (raising its error, if any).

        A flow finished by another runner is seen by its row going away.
        The wait goes on through a database outage (its flow cannot end in
        the store meanwhile), to ``timeout``.
        """
        started = time.monotonic()
        interval = float(self.conf.watcher.poll_interval)
        while True:
            rest = interval
            if timeout is not None:  # never past the caller's bound
                rest = max(0.0, min(interval, started + timeout - time.monotonic()))
            future = self._known_future(flow_id)
            if future is not None:
                try:
                    future.result(rest)
                    return
                except concurrent.futures.TimeoutError:
                    pass
            else:
                time.sleep(rest)
            # asked before the row is read: a round may write the row right
            # after a read found none, and the flow then looked ended
            unrecorded = self._unrecorded(flow_id)
            try:
                row = self.registry.get(flow_id)
            except Exception as exc:
                if not faults.is_outage(exc):
                    raise
                if timeout is not None and time.monotonic() - started >= timeout:
                    raise exceptions.WaitTimeout(
                        "", timeout, started=not self._unrecorded(flow_id)
                    ) from exc
                continue
            if row is None and unrecorded:  # launched, not yet written
                if timeout is not None and time.monotonic() - started >= timeout:
                    raise exceptions.WaitTimeout("", timeout, started=False)
                continue
            if row is None:
                future = self._known_future(flow_id)
                if future is not None:  # ended here: its outcome is being set
                    self._outcome_once_set(flow_id, future, interval)
                    return
                kept = self.kept_error(flow_id)  # ended in another process
                if kept is not None:
                    raise kept
                return
            if row.state == flow_rows.BROKEN:
                raise exceptions.FlowError(None, f"flow {flow_id}: {row.note}")
            if timeout is not None and time.monotonic() - started >= timeout:
                raise exceptions.WaitTimeout(
                    row.deployment_id,
                    timeout,
                    flow_id=flow_id if row.kind == CUSTOM else None,
                )

    def _outcome_once_set(
        self,
        flow_id: str,
        future: concurrent.futures.Future[str],
        interval: float,
    ) -> None:
        """Return (or raise the flow's error) once the outcome of a flow
        whose row is gone is set.  Its row goes before its outcome is set
        (:meth:`_record_end`, then :meth:`_finish`): on a busy machine the
        drive may be held between the two for longer than ``interval``,
        and a wait that gave up then returned as if the flow had succeeded.
        It gives up only once no drive here is ending the flow (another
        runner ended it, after this one lost it)."""
        while True:
            try:
                future.result(interval)
                return
            except concurrent.futures.TimeoutError:
                if not (future.done() or self._ending_here(flow_id)):
                    return

    def _ending_here(self, flow_id: str) -> bool:
        """Whether a drive here runs ``flow_id`` or records how it ended."""
        return False

    def _unrecorded(self, flow_id: str) -> bool:
        """Whether ``flow_id`` was launched here and its row is not written
        yet (it waits for a round, :mod:`swflows.engine.batching`)."""
        return False

    def _known_future(self, flow_id: str) -> concurrent.futures.Future[str] | None:
        """The future of a flow running here, or of one that recently ended."""
        with self._lock:
            return self._futures.get(flow_id) or self._finished.get(flow_id)


def stored_error(flow_id: str, outcome: dict[str, Any]) -> exceptions.FlowError | None:
    """The error of a custom flow that reverted, rebuilt from its stored
    outcome (:meth:`Results.result_of`) for a caller the flow did not end
    in; None unless it reverted.  Its own type is kept only for a cancel."""
    if outcome.get("state") != tf_states.REVERTED:
        return None
    text = str(outcome.get("error") or "it was reverted")
    name, _, message = text.partition(": ")
    if name == FlowCancelled.__name__ and message:
        return FlowCancelled(flow_id, message)
    return exceptions.FlowError(flow_id, text)


__all__ = [
    "CUSTOM",
    "FINISHED_KEPT",
    "META_KEY",
    "FlowCancelled",
    "Results",
    "stored_error",
]
