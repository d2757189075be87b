"""Reading deployments, and waiting for them to end."""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import tenacity

from swflows import exceptions, model, projects, states
from swflows.api.base import FIRST_GENERATION, Base, describe_fault, is_outage
from swflows.persistence import flow_registry as flow_rows

if TYPE_CHECKING:
    from oslo_context.context import RequestContext


#: seconds between two looks of a caller for a deployment its flow has yet
#: to start, when another process drives the flow (a look also comes as
#: the instance's shared look, :mod:`swflows.api.started`, sees its row),
#: and when this one does (a look also comes as a step writing the row
#: succeeds)
POLL_STARTED_MOST = 0.5
POLL_STARTED_DRIVEN = 0.5


def started_waits(driven_here: bool) -> tenacity.wait.wait_base:
    """The rests between two looks for a flow to start the action."""
    return tenacity.wait_fixed(
        POLL_STARTED_DRIVEN if driven_here else POLL_STARTED_MOST
    )


def _until_set(event: threading.Event) -> Callable[[float], None]:
    """A sleep that ends early when ``event`` is set, and clears it."""

    def sleep(seconds: float) -> None:
        event.wait(seconds)
        event.clear()

    return sleep


class Results(Base):
    """Deployments as stored, and waiting until no flow works on them."""

    def show(
        self, deployment_id: str, *, context: RequestContext | None = None
    ) -> model.Deployment:
        found: model.Deployment = self.store.get_deployment(deployment_id)
        self._visible(
            context, projects.DEPLOYMENT, deployment_id, "swflows:deployment:show"
        )
        return found

    def outputs(
        self, deployment_id: str, *, context: RequestContext | None = None
    ) -> dict[str, Any]:
        return dict(self.show(deployment_id, context=context).output_values)

    def list_deployments(
        self,
        *,
        context: RequestContext | None = None,
        all_projects: bool = False,
        **kwargs: Any,
    ) -> list[model.Deployment]:
        """Deployments matching the filters (with ``context``, its
        project's unless ``all_projects``)."""
        self._allow(context, "swflows:deployment:list")
        listing = self._listing(context, all_projects)
        found: list[model.Deployment] = self.store.list_deployments(**kwargs, **listing)
        return found

    def wait(
        self, deployment_id: str, timeout: float | None = None
    ) -> model.Deployment:
        """Block until no flow works on the deployment any more, and return it.

        Raises WaitTimeout after ``timeout`` seconds, and DeploymentNotFound
        when the flow removed it (an undeploy).
        """
        started = time.monotonic()
        for row in self.runner.registry.find(deployment_id=deployment_id):
            left = None
            if timeout is not None:
                left = max(0.0, timeout - (time.monotonic() - started))
            if row.kind == flow_rows.CUSTOM:
                # a custom flow goes on after this deployment: its outcome is
                # what is waited for here (wait_flow waits for the flow)
                self._wait_outcome(deployment_id, left)
            else:
                self.runner.wait(row.id, left)
        return self.show(deployment_id)

    def _wait_outcome(self, deployment_id: str, timeout: float | None) -> None:
        interval = float(self.conf.watcher.poll_interval)
        started = time.monotonic()

        def rest(_: tenacity.RetryCallState) -> float:
            if timeout is None:
                return interval
            # never past the caller's bound: the last look comes at it
            return max(0.0, min(interval, started + timeout - time.monotonic()))

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_result(lambda status: status == states.IN_PROGRESS),
            wait=rest,
            stop=(
                tenacity.stop_after_delay(timeout)
                if timeout is not None
                else tenacity.stop_never
            ),
        )
        try:
            retrying(lambda: self.show(deployment_id).status)
        except tenacity.RetryError:
            raise exceptions.WaitTimeout(deployment_id, timeout or 0) from None

    def _started(self, deployment_id: str, generation: int) -> bool:
        """Whether the action of ``generation`` has been started (its
        flow wrote the deployment as it is at that generation)."""
        try:
            return self.show(deployment_id).generation >= generation
        except exceptions.DeploymentNotFound:
            return False
        except Exception as exc:
            if is_outage(exc):
                return True  # not known: the store is out of reach
            raise

    def _result(
        self,
        deployment_id: str,
        started: tuple[str, concurrent.futures.Future[str]],
        wait: bool,
        wait_timeout: float | None,
        generation: int = FIRST_GENERATION,
    ) -> model.Deployment:
        """The deployment once its flow ended (``wait``), else as soon as
        the flow started the action of ``generation`` (IN_PROGRESS, unless
        the flow already ended it) or ended.  WaitTimeout (``started``
        false) when the flow did not start it within ``wait_timeout``
        (60 s by default)."""
        flow_id, future = started
        if wait:
            try:
                self.runner.wait(flow_id, wait_timeout)
            except exceptions.WaitTimeout as exc:
                self._withdraw(deployment_id, flow_id, wait_timeout or 0)
                if exc.started and self._started(deployment_id, generation):
                    raise
                raise exceptions.WaitTimeout(
                    deployment_id, wait_timeout or 0, started=False
                ) from exc
            return self.show(deployment_id)

        def look() -> model.Deployment | None:
            ended = future.done()
            if ended:
                future.result()  # raise the flow's error, if any
            try:
                return look_stored(ended)
            except Exception as exc:
                if ended or not is_outage(exc):
                    raise
                return None  # looked at again: its flow goes on

        def look_stored(ended: bool) -> model.Deployment | None:
            try:
                found = self.show(deployment_id)
            except exceptions.DeploymentNotFound:
                if ended:
                    raise
                if progressed is None and self.runner.registry.get(flow_id) is None:
                    # it ended in another process without writing the row
                    kept = self.runner.kept_error(flow_id)
                    if kept is not None:
                        raise kept from None
                return None
            if found.generation < generation and not ended:
                return None  # the row as it was before this action
            return found

        limit = wait_timeout or 60
        # driven here: looked at again as a step writing the row succeeds
        # and when the flow ends; driven elsewhere: as the instance's
        # shared look sees the row (else every POLL_STARTED_MOST)
        progressed = self.runner.progress_of(flow_id)
        waiting: contextlib.AbstractContextManager[threading.Event]
        if progressed is not None:
            waiting = contextlib.nullcontext(progressed)
        else:
            waiting = self._started_looks.waiting(deployment_id, generation)
        with waiting as woken:
            # the first look waits for the row to be written (or the flow's
            # end), not before: a new flow here has it written by a later
            # step, a job just posted once a conductor claimed it
            future.add_done_callback(lambda _: woken.set())
            _until_set(woken)(
                POLL_STARTED_DRIVEN if progressed is not None else POLL_STARTED_MOST
            )
            retrying = tenacity.Retrying(
                retry=tenacity.retry_if_result(lambda found: found is None),
                wait=started_waits(progressed is not None),
                stop=tenacity.stop_after_delay(limit),
                retry_error_callback=lambda _: None,
                sleep=_until_set(woken),
            )
            found: model.Deployment | None = retrying(look)
        if found is None:
            self._withdraw(deployment_id, flow_id, limit)
            # its flow is recorded (a job posted) and runs later: never
            # NotFound, which would have the caller deploy it again
            raise exceptions.WaitTimeout(deployment_id, limit, started=False)
        return found

    def _withdraw(self, deployment_id: str, flow_id: str, seconds: float) -> None:
        """Raise why a new flow whose caller gives up was dropped, when it
        could be (it waits for a round here, and each try to write it
        failed before it could commit): nothing of it is kept, and it never
        runs.  Else it is recorded, or may be, or runs later."""

        def error(failure: BaseException) -> BaseException:
            made = exceptions.FlowError(
                None,
                f"deployment {deployment_id} not recorded after {seconds:g} s: "
                f"the database was unreachable ({describe_fault(failure)}); "
                "nothing of it is kept and it does not run: deploy it again",
            )
            made.__cause__ = failure
            return made

        withdrawn = self.runner.withdraw(flow_id, error)
        if withdrawn is not None:
            raise withdrawn
