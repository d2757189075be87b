"""undeploy: run the DELETE action when the config has one, then remove all.

Removes the deployment row (republishing the server's metadata without it),
its derived configs and its stack user.  The DELETE action's outcome is
recorded before the row goes; a FAILED DELETE does not keep the row.  A
failure once the row is gone cannot bring it back: the revert then finishes
the removal, so no config or stack user is left without its deployment.
"""

from __future__ import annotations

from typing import Any

from taskflow.patterns import linear_flow

from swflows.flows import common
from swflows.tasks import config, deployment, identity

NAME = "undeploy"
VERSION = 1


def make_flow(run_delete_action: bool = False, **plan_kwargs: Any) -> linear_flow.Flow:
    plan = common.Plan.from_kwargs(plan_kwargs)
    flow = linear_flow.Flow(f"swflows.{NAME}")
    if run_delete_action:
        common.add_signal_setup(flow, NAME, plan)
        flow.add(deployment.StartAction(NAME, **common.publishing_options(plan)))
        common.add_publish_and_wait(flow, NAME, plan)
        flow.add(
            config.DeleteDerivedConfig(
                NAME,
                discriminator="previous",
                rebind={"config_id": "previous_config_id"},
            )
        )
    current = "derived_config_id" if run_delete_action else "current_config_id"
    flow.add(
        deployment.DeleteDeployment(
            NAME,
            stack_user=plan.needs_stack_user,
            rebind={"config_id": current},
            **common.publishing_options(plan),
        )
    )
    flow.add(
        config.DeleteDerivedConfig(
            NAME, discriminator="current", rebind={"config_id": current}
        )
    )
    if plan.needs_stack_user:
        flow.add(identity.DeleteStackUser(NAME))
    return flow
