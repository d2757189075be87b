"""A deploy made again: the same call under the deployment id it chose
finds the deployment it made (even before its flow wrote it) instead of
making another; another call under that id is refused."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from swflows import exceptions, model, projects
from swflows.api.base import FIRST_GENERATION
from swflows.api.results import Results

if TYPE_CHECKING:
    from oslo_context.context import RequestContext


class Idempotence(Results):
    """What :meth:`~swflows.api.deployments.Deployments.deploy` does when
    its caller chose the deployment's id."""

    def _deployed_already(
        self,
        context: RequestContext | None,
        deployment_id: str,
        inputs: Mapping[str, Any],
    ) -> list[str] | None:
        """For a deploy made again under the id it chose: the unfinished
        flows of the deployment it made (none once they ended), or None
        when there is no such deployment.  Raises DeploymentExists when
        the deployment under that id is not this call's."""
        try:
            found: model.Deployment | None = self.store.get_deployment(deployment_id)
        except exceptions.DeploymentNotFound:
            found = None
        rows = self.runner.registry.find(deployment_id=deployment_id)
        if found is None and not rows:
            return None
        self._visible(
            context, projects.DEPLOYMENT, deployment_id, "swflows:deployment:show"
        )
        made: Mapping[str, Any] | None
        if found is not None:
            made = {
                "server_id": found.server_id,
                "source_config_id": found.source_config_id,
                "action": found.action,
                "input_values": found.input_values,
                "generation": found.generation,
            }
        else:  # its flow has not written it yet: what it was launched with
            made = next(
                (self.runner.inputs_of(row.id) for row in rows if row.kind == "deploy"),
                None,
            )
        if made is not None:
            # hidden inputs' values are sealed, each time anew: compare them open
            differs = _differences(
                {**made, "input_values": self._open(made.get("input_values"))},
                {**inputs, "input_values": self._open(inputs.get("input_values"))},
            )
            if differs:
                raise exceptions.DeploymentExists(deployment_id, "; ".join(differs))
        return [row.id for row in rows]

    def _open(self, values: Mapping[str, Any] | None) -> dict[str, Any]:
        return self._opened_values(values or {})

    def _again(
        self,
        deployment_id: str,
        flow_ids: list[str],
        wait: bool,
        wait_timeout: float | None,
    ) -> model.Deployment:
        """The deployment a deploy made again returns: as :meth:`deploy`
        would, starting nothing."""
        if wait:
            return self.wait(deployment_id, wait_timeout)
        if not flow_ids:
            return self.show(deployment_id)
        future: concurrent.futures.Future[str] = concurrent.futures.Future()
        return self._result(deployment_id, (flow_ids[0], future), False, wait_timeout)


#: what makes a deploy the same call as the one that made a deployment
_SAME_CALL = (
    ("server_id", "server"),
    ("source_config_id", "config"),
    ("action", "action"),
    ("input_values", "input values"),
)


def _differences(made: Mapping[str, Any], asked: Mapping[str, Any]) -> list[str]:
    """How a deploy asked differs from the one that made a deployment
    (its action and inputs only while no later action changed them)."""
    later = int(made.get("generation") or FIRST_GENERATION) > FIRST_GENERATION
    found = []
    for key, what in _SAME_CALL:
        if later and key in ("action", "input_values"):
            continue
        if made.get(key) != asked.get(key):
            if key == "input_values":
                found.append("other input values")
            else:
                found.append(f"{what} {made.get(key)}, not {asked.get(key)}")
    return found


__all__ = ["Idempotence"]
