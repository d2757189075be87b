"""A deployment's Keystone stack user and project, named after it.

Their names are :func:`user_name`; :func:`remove_stack_user` removes both,
with the Zaqar queues of the project first.  The tasks that make and remove
them in a flow are :mod:`swflows.tasks.identity`; the watcher's sweep
removes those a step paused past its fence made again after their
deployment was deleted (:meth:`swflows.engine.sweeper.Sweeper.
sweep_stack_users`).
"""

from __future__ import annotations

import logging

from swflows import exceptions, failpoints
from swflows.clients.identity import StackUser
from swflows.services import Services
from swflows.transports import impl_heat

LOG = logging.getLogger(__name__)

#: what a stack user's and its project's names start with
PREFIX = "swflows-"


def user_name(deployment_id: str) -> str:
    return f"{PREFIX}{deployment_id}"


def deployment_of(name: str) -> str | None:
    """The deployment a stack user or project named ``name`` was made for
    (None: not a name :func:`user_name` gives)."""
    if name.startswith(PREFIX) and len(name) > len(PREFIX):
        return name[len(PREFIX) :]
    return None


def remove_stack_user(services: Services, deployment_id: str) -> None:
    """Remove the deployment's stack user and project, and first the queues
    of that project: Zaqar keeps them when Keystone deletes the project, and
    once the user is gone nothing can reach them (ZAQAR_SIGNAL's credentials
    mode makes its queues there; an agent's late signal makes them again).
    Each removal does nothing the second time, and checks the flow's fence
    first (:meth:`Services.check_fence`): a flow lost meanwhile removes
    nothing its new owner may be using.  What fails is raised."""
    users = services.clients.stack_users
    name = user_name(deployment_id)
    found = users.find_user(name)
    project = users.find_project(name)
    if found is not None and project is not None:
        user = StackUser(found.id, name, project.id)
        services.check_fence()
        purge_queues(services, user, deployment_id)
    if found is not None:
        services.check_fence()
        failpoints.hit("identity.delete")
        users.delete_user(found.id)
    if project is not None:
        services.check_fence()
        users.delete_project(project.id)


def purge_queues(services: Services, user: StackUser, deployment_id: str) -> None:
    """Delete every queue of the stack user's project, as that user."""
    try:
        zaqar = services.clients.messaging_for(
            user, impl_heat.stack_user_password(services, deployment_id)
        )
    except exceptions.NotSupported:
        return  # no Zaqar configured: no queue was made there
    for queue in zaqar.list_queues():
        zaqar.delete_queue(queue)
        LOG.info("deleted queue %s of stack project %s", queue, user.username)
