"""Find transports by name through the ``swflows.*_transports`` entry points."""

from __future__ import annotations

from typing import Any

from stevedore import driver

from swflows import exceptions
from swflows import transport_names as names
from swflows.transports import base

SIGNAL_NAMESPACE = "swflows.signal_transports"
CONFIG_NAMESPACE = "swflows.config_transports"


def _load(namespace: str, name: str, options: dict[str, Any] | None) -> Any:
    try:
        manager: driver.DriverManager[Any] = driver.DriverManager(
            namespace, name, invoke_on_load=True, invoke_args=(options,)
        )
    except Exception as exc:  # stevedore raises NoMatches or import errors
        raise exceptions.NotSupported(
            f"transport {name} is not available: {exc}"
        ) from None
    return manager.driver


def signal_transport(
    name: str, options: dict[str, Any] | None = None
) -> base.SignalTransport:
    """The signal transport called ``name`` (aliases accepted)."""
    canonical = names.normalize_signal_transport(name)
    if canonical == names.AUTO:
        raise exceptions.ValidationError(
            "signal_transport", "AUTO must be resolved before a flow is built"
        )
    transport: base.SignalTransport = _load(SIGNAL_NAMESPACE, canonical, options)
    return transport


def config_transport(
    name: str, options: dict[str, Any] | None = None
) -> base.ConfigTransport:
    """The config transport called ``name`` (aliases accepted)."""
    canonical = names.normalize_config_transport(name)
    transport: base.ConfigTransport = _load(CONFIG_NAMESPACE, canonical, options)
    return transport
