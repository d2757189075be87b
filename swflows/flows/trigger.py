"""trigger: run any action of a deployment's config on demand.

A new deployment (``<original>-<ACTION>``) carries the action with the
original inputs overridden; the original deployment and its derived config
are left untouched.
"""

from __future__ import annotations

from typing import Any

from taskflow.patterns import linear_flow

from swflows.flows import common, deploy

NAME = "trigger"
VERSION = 1


def make_flow(**plan_kwargs: Any) -> linear_flow.Flow:
    # the same graph as deploy (a new deployment row), under its own names
    return deploy.build(NAME, common.Plan.from_kwargs(plan_kwargs))
