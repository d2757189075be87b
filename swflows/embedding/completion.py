"""Completion callbacks: be told when a deployment's flows have ended.

An embedder that does not poll (``check_*_complete``) registers a callback
for a deployment; one thread per :class:`Completions` looks at the flows
table (one query for every registered deployment) and calls the callback
once no flow works on the deployment any more, whichever runner finished
it.  Waiting deployments hold no thread: the same one serves them all, and
it ends when no callback is left (the next :meth:`Completions.add` starts
another).

A deployment whose action a user's composed flow runs is reported once it
is no longer IN_PROGRESS, as :meth:`~swflows.api.Swflows.wait` does: that
flow goes on after it.

Callbacks live in memory: after a restart of the embedder's process, it
registers again the deployments it still waits for (a deployment already
finished is reported at the next look).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import sqlalchemy as sa

from swflows import exceptions, model, states
from swflows.persistence import flow_registry as flow_rows

if TYPE_CHECKING:
    from swflows.api import Swflows

LOG = logging.getLogger(__name__)

ACTION_FLOWS = flow_rows.ACTION_FLOWS
#: deployments per query of a look
LOOK_CHUNK = 500


def action_flows(
    sw: Swflows, deployment_id: str | None = None
) -> list[flow_rows.FlowRow]:
    """The unfinished flows running a deployment's action (of one, or all)."""
    return [row for row in sw.list_flows(deployment_id) if row.kind in ACTION_FLOWS]


@dataclasses.dataclass(frozen=True)
class Completion:
    """How a deployment's flows ended.

    ``deployment`` is its final state, None when the flows removed it (an
    undeploy).  ``error`` is set when a flow could not finish (it was set
    aside as broken): the deployment may then still say IN_PROGRESS.
    """

    deployment_id: str
    deployment: model.Deployment | None
    error: str | None = None

    @property
    def removed(self) -> bool:
        return self.deployment is None and self.error is None


Callback = Callable[[Completion], Any]


class _Left(NamedTuple):
    """An unfinished flow, as much of it as a look needs."""

    id: str
    kind: str
    deployment_id: str
    state: str
    note: str | None


class Completions:
    """Calls back when deployments end; one thread for all of them.

    ``interval`` is the seconds between two looks (default: the watcher's
    poll interval).  With ``thread=False`` no thread is started: the
    embedder calls :meth:`check` from a loop of its own.  Use as a context
    manager, or :meth:`close` it.
    """

    def __init__(
        self, sw: Swflows, *, interval: float | None = None, thread: bool = True
    ) -> None:
        self.sw = sw
        self.use_thread = thread
        self.interval = float(
            interval if interval is not None else sw.conf.watcher.poll_interval
        )
        self._callbacks: dict[str, list[Callback]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Completions:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, deployment_id: str, callback: Callback) -> None:
        """Call ``callback(Completion)`` once no flow works on the deployment.

        A deployment already finished is reported at the next look.  The
        callback runs on this object's thread; an exception it raises is
        logged and dropped.
        """
        if self._stop.is_set():
            raise exceptions.SwflowsError("completions: closed")
        with self._lock:
            self._callbacks.setdefault(deployment_id, []).append(callback)
            if self._thread is None and self.use_thread:
                self._thread = threading.Thread(
                    target=self._run, name="swflows-completions", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def discard(self, deployment_id: str, callback: Callback) -> None:
        """Forget a callback not called yet (its caller stopped waiting)."""
        with self._lock:
            callbacks = self._callbacks.get(deployment_id)
            if callbacks is None or callback not in callbacks:
                return
            callbacks.remove(callback)
            if not callbacks:
                del self._callbacks[deployment_id]

    def pending(self) -> list[str]:
        """Deployments with a callback still to be called."""
        with self._lock:
            return sorted(self._callbacks)

    def close(self) -> None:
        """Stop looking; callbacks not yet called are dropped."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)

    def check(self) -> int:
        """Look once now; returns how many deployments were reported."""
        with self._lock:
            watched = list(self._callbacks)
        if not watched:
            return 0
        busy: dict[str, _Left] = {}
        composed: set[str] = set()
        for left in self._left(watched):
            if left.kind not in ACTION_FLOWS:
                composed.add(left.deployment_id)
            elif left.state != flow_rows.BROKEN or left.deployment_id not in busy:
                busy[left.deployment_id] = left
        reported = 0
        for deployment_id in watched:
            found = busy.get(deployment_id)
            if found is not None and found.state != flow_rows.BROKEN:
                continue
            completion = self._completion(deployment_id, found)
            if (
                found is None
                and deployment_id in composed
                and completion.deployment is not None
                and completion.deployment.status == states.IN_PROGRESS
            ):
                continue  # a user's flow runs its action: its outcome is awaited
            with self._lock:
                callbacks = self._callbacks.pop(deployment_id, [])
            for callback in callbacks:
                try:
                    callback(completion)
                except Exception:
                    LOG.exception("completion callback of %s failed", deployment_id)
            reported += 1
        return reported

    def _left(self, watched: list[str]) -> list[_Left]:
        """The unfinished flows of the watched deployments, in light
        queries (no join, no JSON; :data:`LOOK_CHUNK` deployments each): a
        look costs little however many other flows there are."""
        table = self.sw.store.tables.flows
        query = sa.select(
            table.c.id, table.c.kind, table.c.deployment_id, table.c.state, table.c.note
        )
        found: list[_Left] = []
        with self.sw.store.engine.connect() as conn:
            for start in range(0, len(watched), LOOK_CHUNK):
                chunk = watched[start : start + LOOK_CHUNK]
                rows = conn.execute(query.where(table.c.deployment_id.in_(chunk)))
                found.extend(_Left(*row) for row in rows)
        return found

    def _completion(self, deployment_id: str, broken: _Left | None) -> Completion:
        try:
            deployment: model.Deployment | None = self.sw.show(deployment_id)
        except exceptions.DeploymentNotFound:
            deployment = None
        error = None
        if broken is not None:
            error = f"flow {broken.id} was set aside: {broken.note or 'broken'}"
        return Completion(deployment_id, deployment, error)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                self.check()
            except Exception:  # the store is down: look again later
                LOG.warning("completions: could not read the flows", exc_info=True)
            with self._lock:
                if not self._callbacks:  # add() starts another
                    self._thread = None
                    return
            self._wake.wait(self.interval)


__all__ = ["ACTION_FLOWS", "Callback", "Completion", "Completions", "action_flows"]
