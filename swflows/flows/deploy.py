"""deploy: run a config's CREATE action on a server as a new deployment.

Stack user (when the transport needs one) -> signal store -> derived config
-> deployment row -> metadata published -> signal awaited -> signal store
removed.  A FAILED signal is a result: the flow completes with the
deployment FAILED.  An infrastructure failure reverts every step: the row,
once written, stays FAILED, naming the step and its cause (the user
deletes it); no derived config, user, object or queue is left behind.
"""

from __future__ import annotations

from typing import Any

from taskflow.patterns import linear_flow

from swflows.flows import common
from swflows.tasks import deployment

NAME = "deploy"
#: bumped whenever the graph changes; a stored flow of another version is
#: refused on resume instead of being run against a different graph
VERSION = 1


def make_flow(**plan_kwargs: Any) -> linear_flow.Flow:
    return build(NAME, common.Plan.from_kwargs(plan_kwargs))


def build(name: str, plan: common.Plan) -> linear_flow.Flow:
    """A new deployment's graph; atoms are named after flow ``name``."""
    flow = linear_flow.Flow(f"swflows.{name}")
    common.add_signal_setup(flow, name, plan)
    flow.add(deployment.CreateDeployment(name, **common.publishing_options(plan)))
    common.add_publish_and_wait(flow, name, plan)
    return flow
