"""trigger: run any action of a deployment's config on demand.

A new deployment (``<original>-<ACTION>``) carries the action with the
original inputs overridden; the original deployment and its derived config
are left untouched.
"""

from __future__ import annotations

from typing import Any

from taskflow.patterns import linear_flow

from swflows.flows import common
from swflows.tasks import deployment

NAME = "trigger"
VERSION = 1


def make_flow(**plan_kwargs: Any) -> linear_flow.Flow:
    plan = common.Plan.from_kwargs(plan_kwargs)
    flow = linear_flow.Flow(f"swflows.{NAME}")
    common.add_signal_setup(flow, NAME, plan)
    flow.add(deployment.CreateDeployment(NAME, **common.publishing_options(plan)))
    common.add_publish_and_wait(flow, NAME, plan)
    return flow
