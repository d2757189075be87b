"""swflows: software-configuration deployments as resumable TaskFlow graphs.

The names below are the public API, what users import as
``from swflows import Swflows, COMPLETE, NotFound``; every other module is
importable but not promised.  Errors and statuses are loaded with the
package; the rest at first use, so that ``import swflows`` (and a short
command) loads neither TaskFlow nor SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from swflows.exceptions import (
    CloudError,
    ConcurrentUpdate,
    ConfigInUse,
    ConfigNotFound,
    DeploymentExists,
    DeploymentNotFound,
    FlowError,
    FlowLocked,
    FlowNotFound,
    InvalidTransition,
    NotFound,
    NotSupported,
    ServerInUse,
    ServerNotFound,
    SignalRejected,
    SwflowsError,
    TransportError,
    ValidationError,
    WaitTimeout,
)
from swflows.states import COMPLETE, FAILED, IN_PROGRESS, ReasonKind

if TYPE_CHECKING:
    from swflows.api import Swflows
    from swflows.clients.cloud import Clients
    from swflows.conf import get_conf
    from swflows.flows.compose import link_if_complete, trigger_subflow
    from swflows.model import Config, Deployment, InputSpec, OutputSpec
    from swflows.persistence.flow_registry import FlowRow
    from swflows.persistence.store import Store

#: public name -> the module that defines it, imported at first use
_LAZY = {
    "Swflows": "swflows.api",
    "Clients": "swflows.clients.cloud",
    "Store": "swflows.persistence.store",
    "FlowRow": "swflows.persistence.flow_registry",
    "Config": "swflows.model",
    "Deployment": "swflows.model",
    "InputSpec": "swflows.model",
    "OutputSpec": "swflows.model",
    "get_conf": "swflows.conf",
    "trigger_subflow": "swflows.flows.compose",
    "link_if_complete": "swflows.flows.compose",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'swflows' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "COMPLETE",
    "FAILED",
    "IN_PROGRESS",
    "Clients",
    "CloudError",
    "ConcurrentUpdate",
    "Config",
    "ConfigInUse",
    "ConfigNotFound",
    "Deployment",
    "DeploymentExists",
    "DeploymentNotFound",
    "FlowError",
    "FlowLocked",
    "FlowNotFound",
    "FlowRow",
    "InputSpec",
    "InvalidTransition",
    "NotFound",
    "NotSupported",
    "OutputSpec",
    "ReasonKind",
    "ServerInUse",
    "ServerNotFound",
    "SignalRejected",
    "Store",
    "Swflows",
    "SwflowsError",
    "TransportError",
    "ValidationError",
    "WaitTimeout",
    "get_conf",
    "link_if_complete",
    "trigger_subflow",
]
