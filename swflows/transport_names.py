"""Transport names, spelt as Heat spells them, and their aliases.

Pure: no I/O.  Signal transports carry a deployment's outputs back from the
server; config transports carry a server's metadata to it.  The names are
the values of Heat's ``signal_transport`` and ``software_config_transport``
properties and of the ``deploy_signal_transport`` input, so they must match
Heat's exactly.  The Kilo blueprints' names are accepted as aliases.
"""

from __future__ import annotations

from typing import Final

from swflows import exceptions

# signal transports: server -> swflows
TEMP_URL_SIGNAL: Final = "TEMP_URL_SIGNAL"
ZAQAR_SIGNAL: Final = "ZAQAR_SIGNAL"
HEAT_SIGNAL: Final = "HEAT_SIGNAL"
CFN_SIGNAL: Final = "CFN_SIGNAL"
NO_SIGNAL: Final = "NO_SIGNAL"
#: resolved through ``auto_signal_transport_order`` before a flow is built
AUTO: Final = "AUTO"

SIGNAL_TRANSPORTS: Final = (
    TEMP_URL_SIGNAL,
    ZAQAR_SIGNAL,
    HEAT_SIGNAL,
    CFN_SIGNAL,
    NO_SIGNAL,
    AUTO,
)
#: the transports a flow can use (AUTO resolved to one of them)
CONCRETE_SIGNAL_TRANSPORTS: Final = tuple(t for t in SIGNAL_TRANSPORTS if t != AUTO)

# config (metadata) transports: swflows -> server
POLL_TEMP_URL: Final = "POLL_TEMP_URL"
ZAQAR_MESSAGE: Final = "ZAQAR_MESSAGE"
POLL_SERVER_HEAT: Final = "POLL_SERVER_HEAT"

CONFIG_TRANSPORTS: Final = (POLL_TEMP_URL, ZAQAR_MESSAGE, POLL_SERVER_HEAT)

#: the blueprints' names for signal transports (``software-config-swift-signal``,
#: ``software-config-zaqar``) -> the names Heat shipped
SIGNAL_ALIASES: Final = {
    "TEMP_URL_POLL": TEMP_URL_SIGNAL,
    "ZAQAR_MESSAGE": ZAQAR_SIGNAL,
}

#: how a ZAQAR_SIGNAL agent reaches its queue
ZAQAR_AUTH_SIGNED_URL: Final = "signed_url"
ZAQAR_AUTH_CREDENTIALS: Final = "credentials"
ZAQAR_AUTH_MODES: Final = (ZAQAR_AUTH_SIGNED_URL, ZAQAR_AUTH_CREDENTIALS)

#: signal transports whose agent always authenticates as a Keystone stack user
STACK_USER_SIGNAL_TRANSPORTS: Final = frozenset({HEAT_SIGNAL, CFN_SIGNAL})


def _normalize(
    name: object, field: str, known: tuple[str, ...], aliases: dict[str, str]
) -> str:
    if not isinstance(name, str):
        raise exceptions.ValidationError(
            field, f"must be a transport name, not {type(name).__name__}"
        )
    key = name.strip().upper()
    if key in known:
        return key
    if key in aliases:
        return aliases[key]
    expected = ", ".join((*known, *aliases))
    raise exceptions.ValidationError(
        field, f"unknown transport {name!r}; expected one of {expected}"
    )


def normalize_signal_transport(name: object, field: str = "signal_transport") -> str:
    """Heat's name for the signal transport ``name`` (any case, aliases mapped)."""
    return _normalize(name, field, SIGNAL_TRANSPORTS, SIGNAL_ALIASES)


def normalize_config_transport(
    name: object, field: str = "software_config_transport"
) -> str:
    """Heat's name for the config transport ``name`` (any case).

    ``ZAQAR_MESSAGE`` is a config transport in its own right and stays as it is.
    """
    return _normalize(name, field, CONFIG_TRANSPORTS, {})


def needs_stack_user(
    signal_transport: str, zaqar_auth: str = ZAQAR_AUTH_SIGNED_URL
) -> bool:
    """Whether an agent using ``signal_transport`` needs a Keystone stack user.

    HEAT_SIGNAL and CFN_SIGNAL always do; ZAQAR_SIGNAL only when its agent
    authenticates with credentials (``zaqar_auth='credentials'``) rather
    than with a signed URL.
    """
    name = normalize_signal_transport(signal_transport)
    if name in STACK_USER_SIGNAL_TRANSPORTS:
        return True
    if name == ZAQAR_SIGNAL:
        if zaqar_auth not in ZAQAR_AUTH_MODES:
            raise exceptions.ValidationError(
                "zaqar_signal_auth",
                f"unknown mode {zaqar_auth!r}; expected one of "
                f"{', '.join(ZAQAR_AUTH_MODES)}",
            )
        return zaqar_auth == ZAQAR_AUTH_CREDENTIALS
    return False
