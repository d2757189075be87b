"""Tasks that manage a deployment's Keystone stack user.

Only flows whose signal transport makes the agent authenticate include
them.  The user and its project are named after the deployment, and the
password is re-derived from the store's secret, so a re-run finds the same
user and sets the same password; nothing secret is a task result.
"""

from __future__ import annotations

import logging
from typing import Any

from swflows import exceptions, stack_users
from swflows.clients.identity import StackUser
from swflows.services import Services
from swflows.stack_users import user_name
from swflows.tasks import base
from swflows.transports import impl_heat

LOG = logging.getLogger(__name__)


class EnsureStackUser(base.Task):
    """Create (or find) the deployment's stack project and user.

    The user lives exactly as long as its deployment row: a revert removes
    it only when no row is left (a new deployment reverted, or a removal
    that got past the row), never the user of a deployment that stays.
    """

    default_provides = "stack_user"

    def execute(self, services: Services, deployment_id: str) -> dict[str, Any]:
        users = services.clients.stack_users
        name = user_name(deployment_id)
        services.check_fence()
        project_id = users.ensure_project(name, f"swflows deployment {deployment_id}")
        services.check_fence()
        user_id = users.ensure_user(
            name, project_id, impl_heat.stack_user_password(services, deployment_id)
        )
        return StackUser(user_id, name, project_id).to_dict()

    def revert(
        self, result: Any, services: Services, deployment_id: str, **kwargs: Any
    ) -> None:
        def unused() -> bool:
            try:
                row = services.store.get_deployment(deployment_id)
            except exceptions.DeploymentNotFound:
                return True
            # kept FAILED with no action that reached its server: no agent
            # will sign in as its user
            return row.config_id is None

        if base.revert_patiently(f"deployment {deployment_id}", unused):
            delete_stack_user(services, deployment_id)
            return
        LOG.debug("deployment %s stays, and so does its stack user", deployment_id)


class DeleteStackUser(base.Task):
    """Remove the deployment's stack user and project, if any."""

    def execute(self, services: Services, deployment_id: str) -> None:
        delete_stack_user(services, deployment_id)


def delete_stack_user(services: Services, deployment_id: str) -> None:
    """Remove the deployment's stack user, its project and the project's
    queues (:func:`swflows.stack_users.remove_stack_user`).

    Nothing in a flow would remove them later, so a failure (Keystone or
    Zaqar unreachable) is not given up: the whole removal is tried again
    with the patience of a revert (:func:`swflows.tasks.base.
    revert_patiently`), then raised, and the flow is kept (BROKEN, when its
    revert raises) for an operator to see."""
    base.revert_patiently(
        f"stack user of {deployment_id}",
        lambda: stack_users.remove_stack_user(services, deployment_id),
    )
