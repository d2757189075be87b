"""Tasks for derived configs: one per deployment action, the agent's key."""

from __future__ import annotations

import logging
from typing import Any

from swflows import derive, exceptions
from swflows.clients.identity import StackUser
from swflows.services import Services
from swflows.tasks import base
from swflows.transports.base import SignalRef

LOG = logging.getLogger(__name__)

#: seconds a source config read by this process (the deploy that started
#: the flow read it) is taken as it was: configs never change
SOURCE_MAX_AGE = 5.0


class DeriveConfig(base.TransportTask):
    """Build and store the derived config for this action.

    Its id is derived from (deployment id, generation): a re-run after a
    crash finds the config the first run stored and returns it unchanged
    (looked for as it is stored, in the same transaction).
    """

    default_provides = "derived_config_id"

    def execute(
        self,
        services: Services,
        deployment_id: str,
        generation: int,
        server_id: str,
        source_config_id: str | None,
        action: str,
        input_values: dict[str, Any],
        name: str | None,
        timeout: int,
        signal_store: dict[str, Any],
        stack_user: dict[str, Any] | None,
    ) -> str:
        source = (
            # as the deploy read it moments ago: the deployment's row, written
            # next, is checked against the stored configs
            services.store.get_config(source_config_id, max_age=SOURCE_MAX_AGE)
            if source_config_id
            else None
        )
        transport = services.signal_transport(
            self.transport_name, self.transport_options
        )
        ref = SignalRef(deployment_id, generation, timeout)
        pairs = transport.agent_inputs(
            services, ref, signal_store, StackUser.from_dict(stack_user)
        )
        if transport.waits:
            pairs = [*pairs, *derive.started_signal_input()]
        derived = derive.derive(
            source,
            deployment_id=deployment_id,
            generation=generation,
            server_id=server_id,
            action=action,
            # hidden inputs' values come sealed; open only here, for the
            # config the server reads (stored with them sealed again)
            input_values=services.store.open_values(input_values),
            signal_transport=self.transport_name,
            transport_inputs=pairs,
            name=name,
        )
        # a run again (after a crash) keeps the config its first run stored
        return services.store.create_config(
            derived, derived=True, keep_existing=True
        ).id

    def revert(
        self,
        result: Any,
        services: Services,
        deployment_id: str,
        generation: int,
        **kwargs: Any,
    ) -> None:
        # keyed by (deployment, generation): found even if never recorded
        config_id = derive.derived_config_id(deployment_id, generation)

        def remove() -> None:
            try:
                delete_config(services, config_id)
            except exceptions.ConfigInUse as exc:
                # its action ran to its end and the deployment keeps it
                LOG.info("derived config %s stays: %s", config_id, exc)

        base.revert_quietly(f"derived config {config_id}", remove)


class DeleteDerivedConfig(base.Task):
    """Delete a derived config nothing references any more."""

    def execute(self, services: Services, config_id: str | None) -> None:
        if config_id:
            delete_config(services, config_id)


def delete_config(services: Services, config_id: str) -> None:
    try:
        services.store.delete_config(config_id)
    except exceptions.ConfigNotFound:
        pass
