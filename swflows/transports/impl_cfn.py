"""CFN_SIGNAL: not supported.

A CFN signal is an EC2-signed POST to Heat's CloudFormation-compatible API;
validating it needs that API and a service user allowed to call Keystone's
``/v3/ec2tokens``.  swflows has neither, so asking for this transport fails
up front with a clear error instead of leaving a deployment waiting forever.
"""

from __future__ import annotations

from typing import NoReturn

from swflows import exceptions
from swflows import transport_names as names
from swflows.clients.identity import StackUser
from swflows.transports import base

REASON = (
    "CFN_SIGNAL is not supported: it needs Heat's CloudFormation API to "
    "receive EC2-signed signals; use TEMP_URL_SIGNAL, ZAQAR_SIGNAL or "
    "HEAT_SIGNAL"
)


class CfnSignal(base.SignalTransport):
    name = names.CFN_SIGNAL

    def __init__(self, options: base.JsonDict | None = None) -> None:
        raise exceptions.NotSupported(REASON)

    def create_store(
        self, services: base.Context, ref: base.SignalRef, user: StackUser | None
    ) -> NoReturn:
        raise exceptions.NotSupported(REASON)

    def agent_inputs(
        self,
        services: base.Context,
        ref: base.SignalRef,
        store: base.JsonDict,
        user: StackUser | None,
    ) -> NoReturn:
        raise exceptions.NotSupported(REASON)

    def delete_store(self, services: base.Context, store: base.JsonDict) -> None:
        return None
