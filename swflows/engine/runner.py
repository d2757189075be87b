"""The runner: drives flows with persistence, parks them, resumes them.

A :class:`Runner` is made of the parts of the :mod:`swflows.engine`
package, one concept each:

* :mod:`~swflows.engine.launching`: new flows, recorded and started, and
  the checks of a custom flow's factory;
* :mod:`~swflows.engine.driving`: driving a flow on the runner's threads,
  parking it at a wait, cancelling it, recording how it ended;
* :mod:`~swflows.engine.takeover`: resuming parked flows and those whose
  runner died, and renewing this runner's leases;
* :mod:`~swflows.engine.results`: the outcomes of flows, for
  :meth:`Runner.wait` and a custom flow's stored result.

A developer's own flow (:meth:`Runner.launch_custom`, kind ``custom``) is
run the same way.  It may hold several waits, on several deployments: its
row names the deployment it awaits now.  Its outcome (the values its steps
provided, or its error) stays in its logbook's meta after it ended, until
:meth:`Runner.forget_result`.

A database outage loses no flow (:data:`~swflows.engine.driving.
RECORD_RETRY_SECONDS`); resuming one flow never stops the others.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable

from swflows.engine import faults, jobboard, liveness
from swflows.engine.driving import parks_after, suspend
from swflows.engine.election import Election
from swflows.engine.launching import (
    Launching,
    check_json,
    factory_path,
    load_factory,
)
from swflows.engine.results import CUSTOM, META_KEY, FlowCancelled, stored_error
from swflows.engine.takeover import MAX_TAKEOVERS, Takeover
from swflows.engine.watcher import Watcher
from swflows.persistence import flow_registry as flow_rows
from swflows.services import Services

LOG = logging.getLogger(__name__)


class Runner(Takeover, Launching):
    """Runs, parks and resumes flows for one :class:`Services`.

    ``start()`` begins the signal watcher and lease renewal, and (with
    ``[runner] resume_on_start``) resumes the flows interrupted by a crash.
    With ``[coordination] backend_url``, the runners sharing the database
    elect the one whose watcher looks at parked flows (:attr:`election`);
    the others' watchers stand by.
    """

    def __init__(
        self,
        services: Services,
        *,
        workers: int | None = None,
        jobs: jobboard.Jobs | None = None,
    ) -> None:
        super().__init__(services, workers=workers)
        self._threads: list[threading.Thread] = []
        self.liveness = liveness.Liveness()
        self.watcher = Watcher(self)
        #: the watcher's election among the runners sharing the database
        #: (None: no ``[coordination] backend_url``, this watcher watches)
        self.election: Election | None = None
        backend_url = self.conf.coordination.backend_url
        if not backend_url and self.conf.jobboard.enabled:
            # conductors and posters elect their one watcher on the board's server
            backend_url = jobboard.election_url(self.conf.jobboard.backend_url)
        if backend_url:
            self.election = Election(
                backend_url,
                self.watcher.role(),
                member_id=self.owner,
                timeout=int(self.conf.coordination.leader_timeout),
                on_elected=self.watcher.wake,
                on_revoked=self.watcher.wake,
                liveness=self.liveness,
            )
        #: with ``[jobboard] enabled``: flows are posted as jobs for
        #: conductors, not driven here (unless this is a conductor's runner)
        self.jobs = jobs
        if jobs is None and self.conf.jobboard.enabled:
            board = jobboard.Board.from_conf(self.conf).connect()
            self.jobs = jobboard.Jobs(self, board)

    # -- lifecycle --------------------------------------------------------
    def start(self) -> None:
        """Start the watcher and lease renewal; resume interrupted flows."""
        if self._threads:
            return
        if self.conf.runner.resume_on_start:
            self.resume_interrupted()
        if self.election is not None:
            self.election.start()
        for target, name in (
            (self.watcher.run_forever, "swflows-watcher"),
            (self._renew_forever, "swflows-leases"),
        ):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def close(self, by: float | None = None) -> None:
        """Stop: running flows are suspended and released for any runner.

        Every part is stopped, whatever stopping another raised (a flow
        whose logbook another runner holds now, a backend out of reach):
        what failed is logged, never raised.  ``by`` (a ``time.monotonic``
        deadline) bounds the waits for its threads and for leaving the
        election, shared rather than one after another.  Closing again does
        nothing (a conductor closes its runner, then the Swflows that holds
        it closes it too: a second leave would wait for a board out of
        reach all over again).
        """
        if self._stopping.is_set():
            return
        self._stopping.set()
        self.watcher.wake()
        with self._lock:
            drives = list(self._drives.values())

        def step(what: str, call: Callable[[], object]) -> None:
            try:
                call()
            except liveness.FATAL:
                raise
            except BaseException as exc:
                LOG.warning("closing the runner: %s: %s", what, faults.describe(exc))

        if self._batching is not None:
            # rounds under way end first: their flows park or go to engines
            step("launching new flows", functools.partial(self._batching.stop, by))
            with self._lock:
                drives = list(self._drives.values())
        for drive in drives:
            step(f"suspending flow {drive.flow_id}", functools.partial(suspend, drive))
        step("stopping its threads", functools.partial(self._executor.shutdown, True))
        for thread in self._threads:
            left = 10.0 if by is None else max(0.1, by - time.monotonic())
            thread.join(timeout=left)
        self._threads.clear()
        if self.election is not None:
            # a standby watches from its next tick
            seconds = None if by is None else max(1.0, by - time.monotonic())
            step("leaving the election", functools.partial(self.election.stop, seconds))
        if self.jobs is not None:
            step("closing the jobboard", self.jobs.close_board)

    def resume_ended(self, deployment_id: str) -> None:
        """Resume at once, on the runner's threads, the parked flows of a
        deployment whose action just ended (a signal pushed through the API,
        a cancel), rather than at the watcher's next look.

        Nothing is waited for and nothing is raised: the watcher, woken
        too, resumes whatever this could not.
        """
        self.watcher.wake()
        self.offload(functools.partial(self._resume_ended, deployment_id))

    def offload(self, job: Callable[[], object]) -> bool:
        """Queue ``job`` on the runner's worker threads; False if they are
        shut down.  It waits there behind the flows being driven."""
        if self.stopping:
            return False
        try:
            self._executor.submit(job)
        except RuntimeError:
            return False
        return True

    def _resume_ended(self, deployment_id: str) -> None:
        try:
            rows = self.registry.find(
                states=[flow_rows.PARKED], deployment_id=deployment_id
            )
            for row in rows:
                if Watcher.ended(row):
                    self.resume_parked(row.id, dict(row.waiting or {}) or None)
        except Exception as exc:  # the watcher's next look tries again
            self.failures["resume ended"] += 1
            LOG.warning(
                "deployment %s: its flow is left to the watcher: %s",
                deployment_id,
                faults.describe(exc),
            )

    @property
    def driving(self) -> int:
        """How many flows an engine of this runner drives now."""
        with self._lock:
            return len(self._drives)


__all__ = [
    "CUSTOM",
    "MAX_TAKEOVERS",
    "META_KEY",
    "FlowCancelled",
    "Runner",
    "check_json",
    "factory_path",
    "load_factory",
    "parks_after",
    "stored_error",
]
