"""The group actions: group_deploy, group_show, group_delete."""

from __future__ import annotations

import logging
from typing import Any

from mistral_lib.actions import types

from swflows import exceptions, states
from swflows.api import Swflows
from swflows.embedding.mistral.actions import _SwflowsAction

LOG = logging.getLogger(__name__)


def group_outcome(shown: dict[str, Any]) -> types.Result:
    """A group whose operation ended, as a Mistral result: an error of kind
    ``group_failed`` (with the group) when it ended FAILED."""
    if shown["status"] == states.FAILED:
        return types.Result(
            error={
                "kind": "group_failed",
                "message": shown["status_reason"],
                "group": shown,
            }
        )
    return types.Result(data=shown)


class _GroupAction(_SwflowsAction):
    """A group action: synchronous; ``wait: false`` returns the group as
    soon as its operation is recorded, without following it."""

    can_wait = False

    def _limit(self) -> float | None:
        if self.wait_timeout is None:
            return None
        value = self.wait_timeout
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise exceptions.ValidationError(
                "wait_timeout", "must be a positive number"
            )
        return float(value)

    def _outcome(self, sw: Swflows, group: str) -> types.Result:
        if not self.wait:
            return types.Result(data=sw.show_group(group, context=self.request_context))
        shown = sw.wait_group(group, self._limit())
        return group_outcome(shown)


class GroupDeployAction(_GroupAction):
    """Deploy a config to a group of servers (see :mod:`swflows.api.groups`).

    The group is created if there is none of that ``name``, else
    redeployed: ``servers`` is its membership (members added are deployed,
    removed ones undeployed; when nothing else changed the others are left
    alone, so running the action again does nothing new).  The result is
    the group (``show_group``); an error ``group_failed`` when its
    operation ended FAILED (the reason names what was exceeded).
    """

    def __init__(
        self,
        name: str,
        config_id: str,
        servers: dict[str, str],
        input_values: dict[str, Any] | None = None,
        member_values: dict[str, dict[str, Any]] | None = None,
        policy: dict[str, Any] | None = None,
        signal_transport: str | None = None,
        timeout: int | None = None,
        actions: list[str] | None = None,
        config_file: str | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
    ) -> None:
        super().__init__(config_file, wait, wait_timeout)
        self.name = name
        self.config_id = config_id
        self.servers = servers
        self.input_values = input_values
        self.member_values = member_values
        self.policy = policy
        self.signal_transport = signal_transport
        self.timeout = timeout
        self.actions = actions

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        for field in ("servers", "member_values", "policy"):
            value = getattr(self, field)
            if value is not None and not isinstance(value, dict):
                raise exceptions.ValidationError(field, "must be an object")
        try:
            current = sw.show_group(self.name, context=self.request_context)
        except exceptions.GroupNotFound:
            sw.create_group(
                self.name,
                self.config_id,
                self.servers,
                input_values=self.input_values,
                member_values=self.member_values,
                policy=self.policy,
                signal_transport=self.signal_transport,
                timeout=self.timeout,
                actions=self.actions,
                wait=False,
                context=self.request_context,
            )
        else:
            sw.redeploy_group(
                current["id"],
                servers=self.servers,
                input_values=self.input_values,
                member_values=self.member_values,
                config_id=self.config_id,
                policy=self.policy,
                wait=False,
                context=self.request_context,
            )
        return self._outcome(sw, self.name)


class GroupShowAction(_GroupAction):
    """A group as it is now: status, members, outputs by member."""

    def __init__(self, name: str, config_file: str | None = None) -> None:
        super().__init__(config_file)
        self.name = name

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        return types.Result(data=sw.show_group(self.name, context=self.request_context))


class GroupDeleteAction(_GroupAction):
    """Undeploy every member of a group and remove it; the result is
    ``{"name": ..., "deleted": true}`` (an error ``group_failed`` with the
    group when a member could not be undeployed)."""

    def __init__(
        self,
        name: str,
        policy: dict[str, Any] | None = None,
        config_file: str | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
    ) -> None:
        super().__init__(config_file, wait, wait_timeout)
        self.name = name
        self.policy = policy

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        if self.policy is not None and not isinstance(self.policy, dict):
            raise exceptions.ValidationError("policy", "must be an object")
        left = sw.delete_group(
            self.name,
            policy=self.policy,
            wait=bool(self.wait),
            wait_timeout=self._limit(),
            context=self.request_context,
        )
        if left is None:
            return types.Result(data={"name": self.name, "deleted": True})
        if not self.wait:
            return types.Result(data=left)
        return group_outcome(left)
