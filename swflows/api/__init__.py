"""The public facade: configs, deploy, redeploy, undeploy, trigger, signal.

:class:`Swflows` is made of one part per concept, each a module here:
:mod:`~swflows.api.configs`, :mod:`~swflows.api.deployments` (with the
choices of :mod:`~swflows.api.plans` and the reading and waiting of
:mod:`~swflows.api.results`), :mod:`~swflows.api.flows`,
:mod:`~swflows.api.servers` and :mod:`~swflows.api.groups`, all over
:mod:`~swflows.api.base`.
"""

from __future__ import annotations

from swflows.api.configs import Configs
from swflows.api.flows import Flows
from swflows.api.groups import Groups
from swflows.api.servers import Servers


class Swflows(Configs, Flows, Servers, Groups):
    """One swflows instance: a store, a cloud and a runner.

    ``wait=True`` (the default) blocks until the deployment is terminal and
    returns it; ``wait=False`` returns the IN_PROGRESS deployment at once
    and lets the runner's threads finish the flow.

    The runner (signal watcher, lease renewal, resume of interrupted flows)
    starts with the instance; with ``start=False`` it starts at the first
    call that needs it, so an instance that only reads the store (list,
    show, outputs) runs no thread and loads no TaskFlow.
    """


__all__ = ["Swflows"]
