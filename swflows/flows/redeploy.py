"""redeploy: run a new action (UPDATE by default) on an existing deployment.

New inputs or a new config give a new derived config; the deployment row is
switched to it, the metadata published, and the old derived config removed
only after the new one is published.  Also serves SUSPEND and RESUME.
"""

from __future__ import annotations

from typing import Any

from taskflow.patterns import linear_flow

from swflows.flows import common
from swflows.tasks import config, deployment

NAME = "redeploy"
VERSION = 1


def make_flow(**plan_kwargs: Any) -> linear_flow.Flow:
    plan = common.Plan.from_kwargs(plan_kwargs)
    flow = linear_flow.Flow(f"swflows.{NAME}")
    common.add_signal_setup(flow, NAME, plan)
    flow.add(deployment.StartAction(NAME, **common.publishing_options(plan)))
    common.add_publish_and_wait(flow, NAME, plan)
    flow.add(
        config.DeleteDerivedConfig(
            NAME, discriminator="previous", rebind={"config_id": "previous_config_id"}
        )
    )
    return flow
