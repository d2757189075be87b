"""The reconciler: no deployment is left IN_PROGRESS with nothing to end it.

An IN_PROGRESS deployment is always named by a RUNNING or PARKED flow (a
flow's row is written before its deployment's and removed only once the
flow ended it).  One that is not, once it has not changed for
``orphan_grace`` seconds, was stranded: a process that died between two
writes of a version without this check, a row written by hand, a revert
that could not reach the database and whose flow was lost since.  The
elected watcher ends each such deployment FAILED, kind ``flow_broken``
when a BROKEN flow names it (the operator finds it in ``swflows flow
list``), else ``orphaned``, withdraws it from its server's metadata and
logs it once.  The end is a compare-and-set on the deployment's status and
generation, so an action that ends or starts meanwhile is never touched.

A developer's own flow names the deployment it works on only once it
waits; while one runs, the grace is :data:`CUSTOM_GRACE_FACTOR` times
longer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from swflows import metadata, outcomes, signals
from swflows.persistence import flow_registry as flow_rows
from swflows.services import Services

LOG = logging.getLogger(__name__)

#: how many times longer the grace is while a developer's own flow runs
CUSTOM_GRACE_FACTOR = 4


class Reconciler:
    """Ends stranded IN_PROGRESS deployments (see the module)."""

    def __init__(
        self,
        services: Services,
        registry: flow_rows.FlowRegistry,
        grace: Callable[[], float],
    ) -> None:
        self.services = services
        self.registry = registry
        self.grace = grace
        #: deployments ended, by reason kind
        self.repaired: dict[str, int] = {}

    def reconcile(self) -> list[str]:
        """End the stranded deployments; their ids."""
        grace = float(self.grace())
        if flow_rows.custom_running(self.registry):
            grace *= CUSTOM_GRACE_FACTOR
        ended = []
        for deployment_id, generation, broken in flow_rows.unflowed(
            self.registry, grace
        ):
            if broken is not None:
                outcome = signals.flow_broken_outcome("(set aside)", broken)
            else:
                outcome = signals.orphaned_outcome(
                    f"no flow has driven it for {grace:.0f} s"
                )
            if not outcomes.record_outcome(
                self.services, deployment_id, generation, outcome
            ):
                continue  # it ended, or another action started, meanwhile
            kind = str(outcome.reason["kind"])
            self.repaired[kind] = self.repaired.get(kind, 0) + 1
            LOG.error(
                "deployment %s was IN_PROGRESS with no flow: ended FAILED (%s)",
                deployment_id,
                kind,
            )
            metadata.withdraw_cancelled(self.services, deployment_id)
            ended.append(deployment_id)
        return ended


__all__ = ["CUSTOM_GRACE_FACTOR", "Reconciler"]
