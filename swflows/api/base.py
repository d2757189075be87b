"""What every part of the facade shares: the services, the runner, the store.

:class:`swflows.api.Swflows` is made of one class per concept (configs,
deployments, results, custom flows, servers, groups), each in its own
module of this package and each built on :class:`Base`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self

from swflows import exceptions
from swflows.clients.cloud import Clients
from swflows.services import Services

if TYPE_CHECKING:
    # TaskFlow loads at first use: a command that only reads the store
    # starts without it
    from swflows.engine import Runner

#: generation of a deployment's first action
FIRST_GENERATION = 1


class Base:
    """A store, a cloud and a runner (see :class:`swflows.api.Swflows`)."""

    def __init__(
        self,
        store: Any,
        clients: Clients,
        conf: Any,
        *,
        secret: bytes | None = None,
        start: bool = True,
    ) -> None:
        self.services = Services(
            store=store,
            conf=conf,
            clients=clients,
            secret=secret if secret is not None else store.derivation_key(),
        )
        self.store = store
        self.conf = conf
        self._owns_store = False
        self._runner: Runner | None = None
        if start:
            self.runner.start()

    @property
    def runner(self) -> Runner:
        """This instance's runner, made and started at first use when the
        instance was made with ``start=False``."""
        if self._runner is None:
            from swflows.engine import Runner

            self._runner = Runner(self.services)
            self._runner.start()
            self._runner_started(self._runner)
        return self._runner

    def adopt_runner(self, runner: Runner) -> None:
        """Make ``runner`` this instance's runner (a conductor's, see
        :class:`swflows.engine.conductor.Conductor`) and start it."""
        if self._runner is not None:
            raise exceptions.SwflowsError("this instance already has a runner")
        self._runner = runner
        runner.start()
        self._runner_started(runner)

    def _runner_started(self, runner: Runner) -> None:
        """Start what runs beside the runner (see :mod:`swflows.api.groups`)."""

    def _closing(self) -> None:
        """Stop what runs beside the runner, before the runner stops."""

    # -- built from options alone ---------------------------------------
    @classmethod
    def from_conf(cls, conf: Any, store: Any = None, *, start: bool = True) -> Self:
        """An instance configured by ``conf`` alone (see :mod:`swflows.conf`).

        The store is opened from ``[database]`` unless ``store`` is given, and
        the cloud clients are built from the client groups and ``[stack_user]``
        (:meth:`swflows.clients.cloud.Clients.from_conf`).  A store opened here is
        ``sw.store``, closed with the instance.  ``start`` is as for the
        constructor.
        """
        from swflows import conf as sw_conf
        from swflows.persistence.store import Store

        sw_conf.check_values(conf)
        opened = store if store is not None else Store.from_conf(conf)
        try:
            made = cls(opened, Clients.from_conf(conf), conf, start=start)
            made._owns_store = store is None
            return made
        except BaseException:
            if store is None:
                opened.close()
            raise

    def close(self) -> None:
        """Stop the runner (running flows are released for the next one),
        and close the store if :meth:`from_conf` opened it."""
        self._closing()
        if self._runner is not None:
            self._runner.close()
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _timeout(self, timeout: int | None) -> int:
        value = int(timeout if timeout is not None else self.conf.deployment_timeout)
        if value <= 0:
            raise exceptions.ValidationError("timeout", "must be a positive number")
        return value


def checked_input_values(values: Mapping[str, Any] | None) -> dict[str, Any]:
    """``input_values`` as a flow stores them: names as text, JSON values.

    Checked before a flow starts, whose stored inputs could not hold them.
    """
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise exceptions.ValidationError("input_values", "must be a mapping")
    for key, value in values.items():
        if not isinstance(key, str):
            raise exceptions.ValidationError(
                "input_values", f"names must be strings, not {type(key).__name__}"
            )
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            raise exceptions.ValidationError(
                f"input_values.{key}",
                "must have a JSON form (no NaN, infinity or non-JSON type; "
                "not nested too deeply)",
            ) from None
    return dict(values)
