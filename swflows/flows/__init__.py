"""Flow factories, one module per operation, listed in :data:`FACTORIES`.

A flow is rebuilt from its logbook by the factory's dotted name, so these
names and the factories' JSON arguments are persisted API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from swflows.flows import deploy, redeploy, trigger, undeploy

FACTORIES: dict[str, Callable[..., Any]] = {
    deploy.NAME: deploy.make_flow,
    redeploy.NAME: redeploy.make_flow,
    undeploy.NAME: undeploy.make_flow,
    trigger.NAME: trigger.make_flow,
}

VERSIONS: dict[str, int] = {
    deploy.NAME: deploy.VERSION,
    redeploy.NAME: redeploy.VERSION,
    undeploy.NAME: undeploy.VERSION,
    trigger.NAME: trigger.VERSION,
}

__all__ = ["FACTORIES", "VERSIONS"]
