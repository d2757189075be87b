"""Deployment groups: one config to many servers, released by a policy.

A group is a name, a config, members (member name -> server id), input
values shared and per member, a signal transport and a rollout policy
(:mod:`swflows.rollout`).  Its operations -- deploy, rolling redeploy
(members added are deployed, removed ones undeployed), trigger an action,
delete -- run each member as an ordinary single-server flow (deploy,
redeploy, undeploy, trigger) on the runner.  Those flows park while their
server works, as any deployment's does: a thousand members waiting hold
no thread.

How an operation is driven, and why so.  A TaskFlow graph is fixed when it
is built, whereas a rollout decides as it goes (a failure can close the
error budget, a pause holds a wave back, a member ending lets the next
start); a group flow would also hold a thread, or park and be rebuilt at
every member's end.  So the operation is a *record*, not a flow: the
group's row holds, for each member, its task, the id of the deployment it
works on and its state (PENDING, RUNNING, COMPLETE, FAILED).  A
:class:`GroupDriver` beside the runner, woken when a member's flow ends
and every poll interval, reads the states of the members' deployments,
records those that ended, asks :func:`swflows.rollout.decide` whom to
start, records them RUNNING and only then launches their flows.

Resuming after a crash (kill -9) follows from that order.  Each write is a
compare-and-set on the row; the operation is leased to one runner, and a
runner of a dead process loses it at once.  A member recorded RUNNING
whose flow cannot be found and whose deployment does not show the launch
(no row for a deploy or trigger, an older generation for a redeploy, the
row still there for an undeploy) was never launched, or its flow never
started: it is launched again, with the same deployment id, which every
flow step is idempotent on.  A member whose flow is found is left to the
runner, which resumes it.  A member's end is recorded once, so the error
budget counts it once.  A flow reverted three times (the cloud refused
its resources) makes its member FAILED.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import tenacity

from swflows import derive, exceptions, model, projects, rollout, states, trusts
from swflows.api.base import checked_input_values
from swflows.api.deployments import Deployments
from swflows.api.group_driver import GroupDriver
from swflows.persistence.groups import (
    DELETE,
    DEPLOY,
    REDEPLOY,
    TRIGGER,
    GroupRecord,
    GroupStore,
)

if TYPE_CHECKING:
    from oslo_context.context import RequestContext

    from swflows.engine import Runner

#: a member's task in an operation: the single-server flow it runs
TASKS: Final = frozenset({"deploy", "redeploy", "undeploy", "trigger"})
#: a member's name: what a Heat group calls its members ("0", "web-1")
MEMBER_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


GroupBusy = exceptions.GroupBusy


# ------------------------------------------------------------- checking
def check_members(
    servers: Any, member_values: Any = None
) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """The members (name -> server id) and their own input values, checked."""
    if not isinstance(servers, Mapping) or not servers:
        raise exceptions.ValidationError(
            "servers", "must be a non-empty mapping of member name to server id"
        )
    members: dict[str, str] = {}
    for name, server_id in servers.items():
        if not isinstance(name, str) or not MEMBER_NAME.match(name):
            raise exceptions.ValidationError(
                "servers",
                f"member name {name!r} must start with a letter or digit and "
                "hold only letters, digits, '_', '.' or '-' (at most 64)",
            )
        if not isinstance(server_id, str) or not server_id:
            raise exceptions.ValidationError(
                "servers", f"member {name}: server id {server_id!r} is not a string"
            )
        members[name] = server_id
    own: dict[str, dict[str, Any]] = {}
    for name, values in dict(member_values or {}).items():
        if name not in members:
            raise exceptions.ValidationError(
                "member_values", f"{name!r} is not a member of the group"
            )
        if not isinstance(values, Mapping):
            raise exceptions.ValidationError(
                "member_values", f"{name}: must be a mapping of input values"
            )
        own[name] = dict(values)
    return members, own


def _member(
    server_id: str,
    task: str,
    deployment_id: str,
    *,
    generation: int = 1,
    serving: bool = False,
    parent_id: str | None = None,
) -> dict[str, Any]:
    return {
        "server_id": server_id,
        "task": task,
        "deployment_id": deployment_id,
        "generation": generation,
        "parent_id": parent_id,
        "state": rollout.PENDING,
        "batch": 0,
        "serving": serving,
        "launches": 0,
        "ended_at": None,
        "reason": "",
    }


def new_operation(
    kind: str,
    action: str,
    members: dict[str, dict[str, Any]],
    policy: rollout.Policy,
    *,
    input_values: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An operation record: ``members`` released by ``policy`` in their order."""
    order = list(members)
    for name, batch in policy.assign_batches(order).items():
        members[name]["batch"] = batch
    return {
        "id": model.new_id(),
        "kind": kind,
        "action": action,
        "policy": policy.to_dict(),
        "input_values": dict(input_values or {}),
        "order": order,
        "members": members,
        "cancel": None,
        "started_at": time.time(),
        "ended_at": None,
    }


# ------------------------------------------------------------------ faces
def describe(sw: Deployments, record: GroupRecord) -> dict[str, Any]:
    """A group as ``show`` gives it: its status, each member's deployment
    status and reason, and its outputs keyed by member name."""
    members: dict[str, dict[str, Any]] = {}
    outputs: dict[str, dict[str, Any]] = {}
    names = list(record.servers) + [
        n for n in record.deployments if n not in record.servers
    ]
    for name in names:
        deployment_id = record.deployments.get(name)
        entry: dict[str, Any] = {
            "server_id": record.servers.get(name)
            or record.operation.get("members", {}).get(name, {}).get("server_id"),
            "deployment_id": deployment_id,
            "status": None,
            "status_reason": "",
            "action": None,
        }
        if deployment_id:
            try:
                found = sw.store.get_deployment(deployment_id)
            except exceptions.DeploymentNotFound:
                entry["status_reason"] = "not deployed"
            else:
                entry.update(
                    status=found.status,
                    status_reason=found.status_reason,
                    action=found.action,
                )
                for key, value in found.output_values.items():
                    outputs.setdefault(key, {})[name] = value
        members[name] = entry
    operation = record.operation
    op_members = operation.get("members", {})
    counts = {state: 0 for state in rollout.MEMBER_STATES}
    for member in op_members.values():
        counts[member["state"]] += 1
    return {
        "id": record.id,
        "name": record.name,
        "config_id": record.config_id,
        "status": record.status,
        "status_reason": record.status_reason,
        "action": record.action,
        "signal_transport": record.signal_transport,
        "policy": dict(record.policy),
        "servers": dict(record.servers),
        "members": members,
        "outputs": outputs,
        "operation": {
            "kind": operation.get("kind"),
            "action": operation.get("action"),
            "policy": operation.get("policy"),
            "cancel": operation.get("cancel"),
            "started_at": model.isotime(operation.get("started_at")),
            "ended_at": model.isotime(operation.get("ended_at")),
            "done": counts[rollout.COMPLETE],
            "running": counts[rollout.RUNNING],
            "failed": counts[rollout.FAILED],
            "left": counts[rollout.PENDING],
            "members": {
                name: {
                    key: m[key]
                    for key in ("task", "state", "deployment_id", "reason", "launches")
                }
                for name, m in op_members.items()
            },
        },
        "creation_time": model.isotime(record.created_at),
        "updated_time": model.isotime(record.updated_at),
    }


def wait(sw: Deployments, group: str, timeout: float | None) -> GroupRecord:
    """Block until the group's operation ended (or it was deleted: then
    GroupNotFound); WaitTimeout after ``timeout`` seconds."""
    rows = GroupStore(sw.store)
    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_result(
            lambda record: record.status == states.IN_PROGRESS
        ),
        wait=tenacity.wait_fixed(min(0.5, float(sw.conf.watcher.poll_interval))),
        stop=(
            tenacity.stop_after_delay(timeout)
            if timeout is not None
            else tenacity.stop_never
        ),
    )
    try:
        return retrying(lambda: rows.get(group))
    except tenacity.RetryError:
        raise exceptions.WaitTimeout(group, timeout or 0, group=group) from None


def members_of(
    sw: Deployments, record: GroupRecord, names: Sequence[str]
) -> dict[str, Any]:
    """The deployments of members ``names`` that exist, by member name."""
    out = {}
    for name in names:
        deployment_id = record.deployments.get(name)
        if not deployment_id:
            continue
        try:
            out[name] = sw.store.get_deployment(deployment_id)
        except exceptions.DeploymentNotFound:
            continue
    return out


def plan_redeploy(
    record: GroupRecord,
    current: Mapping[str, model.Deployment],
    members: Mapping[str, str],
    inputs: Mapping[str, Mapping[str, Any]],
    source_id: str,
    action: str,
    *,
    membership_only: bool,
    opened: Callable[[Mapping[str, Any]], dict[str, Any]] = dict,
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """A redeploy's members, and the group's deployments after it.

    Members that stay on their server are redeployed (left alone when only
    the membership changed, ``membership_only``, and their inputs, config
    and COMPLETE status are unchanged); new ones, and those moved to
    another server, are deployed (the moved one's old deployment
    undeployed); those no longer wanted are undeployed.  ``opened``
    gives input values with the sealed ones decrypted.
    """
    deployments = dict(record.deployments)
    planned: dict[str, dict[str, Any]] = {}
    for name, server_id in members.items():
        found = current.get(name)
        if found is not None and found.server_id == server_id:
            changed = (
                not membership_only
                or action != model.UPDATE
                or source_id != found.source_config_id
                or found.status != states.COMPLETE
                # hidden inputs' values are sealed, each time anew: compared open
                or opened(inputs[name]) != opened(found.input_values)
            )
            if not changed:
                continue  # only the membership changed: left alone
            planned[name] = _member(
                server_id,
                "redeploy",
                found.id,
                generation=found.generation + 1,
                serving=found.status == states.COMPLETE,
            )
        else:
            deployments[name] = model.new_id()
            planned[name] = _member(server_id, "deploy", deployments[name])
            if found is not None:  # moved to another server
                planned[f"{name}.old"] = _member(
                    found.server_id,
                    "undeploy",
                    found.id,
                    generation=found.generation + 1,
                )
                deployments[f"{name}.old"] = found.id
    for name, found in current.items():
        if name not in members:
            planned[name] = _member(
                found.server_id, "undeploy", found.id, generation=found.generation + 1
            )
    return planned, deployments


class Groups(Deployments):
    """Deployment groups: one config to many servers, by a rollout policy."""

    #: drives the operations, beside the runner (made with it)
    _groups: GroupDriver | None = None

    def create_group(
        self,
        name: str,
        config_id: str,
        servers: Mapping[str, str],
        *,
        input_values: Mapping[str, Any] | None = None,
        member_values: Mapping[str, Mapping[str, Any]] | None = None,
        policy: Mapping[str, Any] | None = None,
        signal_transport: str | None = None,
        timeout: int | None = None,
        actions: Sequence[str] | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
        context: RequestContext | None = None,
    ) -> dict[str, Any]:
        """Deploy ``config_id`` to every member of a new group.

        ``servers`` maps member name to server id; a member's input values
        are ``input_values`` overridden by its own in ``member_values``.
        ``policy`` is the rollout policy (:mod:`swflows.rollout`): members
        are released by ``max_concurrency``, in waves, within the
        ``max_errors`` budget.  Returns :meth:`show_group` (once the
        deployment ended, with ``wait``).  ``actions`` are the members'
        deployments' actions, as for :meth:`deploy`.
        """
        if not isinstance(name, str) or not name.strip() or len(name) > 255:
            raise exceptions.ValidationError("name", "must be a non-empty string")
        model.check_name("name", name)
        self._allow(context, "swflows:group:create")
        members, own = check_members(servers, member_values)
        parsed = rollout.Policy.from_dict(policy)
        source = self._visible_config(context, config_id)
        for server_id in members.values():
            self._check_deploy_policy(context, server_id, config_id)
        if actions is not None:
            actions = list(actions)
            if not all(isinstance(a, str) and a for a in actions):
                raise exceptions.ValidationError("actions", "must be action names")
        derive.check_action(source, model.CREATE, actions)
        for member in members:
            derive.check_values(source, {**(input_values or {}), **own.get(member, {})})
        transport = self._signal_transport(signal_transport)
        self._plan("", transport, None)
        ids = {member: model.new_id() for member in members}
        operation = new_operation(
            DEPLOY,
            model.CREATE,
            {
                member: _member(server_id, "deploy", ids[member])
                for member, server_id in members.items()
            },
            parsed,
        )
        record = GroupRecord(
            id=model.new_id(),
            name=name,
            config_id=config_id,
            servers=members,
            input_values=self._sealed_values(source, input_values or {}),
            member_values={m: self._sealed_values(source, v) for m, v in own.items()},
            signal_transport=transport,
            timeout=self._timeout(timeout) if timeout is not None else None,
            actions=actions,
            policy=parsed.to_dict(),
            deployments=ids,
            operation=operation,
            action=model.CREATE,
            status=states.IN_PROGRESS,
            status_reason=f"0 done, 0 running, 0 failed, {len(members)} left",
        )
        self._own(context, projects.GROUP, record.id)
        delegated = self._delegate(context, projects.GROUP, record.id)
        try:
            self._own_members(context, operation, record.id)
            GroupStore(self.store).create(record)
        except BaseException:
            if delegated is not None:
                self._undelegate(projects.GROUP, record.id)
            raise
        return self._group_started(record.id, wait, wait_timeout)

    def redeploy_group(
        self,
        group: str,
        *,
        servers: Mapping[str, str] | None = None,
        input_values: Mapping[str, Any] | None = None,
        member_values: Mapping[str, Mapping[str, Any]] | None = None,
        config_id: str | None = None,
        policy: Mapping[str, Any] | None = None,
        action: str = model.UPDATE,
        wait: bool = True,
        wait_timeout: float | None = None,
        context: RequestContext | None = None,
    ) -> dict[str, Any]:
        """A rolling redeploy: ``action`` (UPDATE) on every member, with the
        new inputs or config, released by the policy (``min_in_service``
        counts the members COMPLETE before it).  ``servers``, when given,
        is the new membership: members added are deployed, removed ones
        undeployed (last); when only the membership changes, the members
        that stay and whose inputs and config are unchanged and COMPLETE
        are left alone, as Heat leaves a group's unchanged members.
        ``input_values`` are merged into the shared ones; ``policy``
        replaces the group's.  Refused (GroupBusy) while
        an operation runs."""
        record = self._idle_group(group, context, "swflows:group:update")
        wanted = record.servers if servers is None else servers
        kept = {
            name: values
            for name, values in record.member_values.items()
            if isinstance(wanted, Mapping) and name in wanted
        }
        members, own = check_members(wanted, {**kept, **dict(member_values or {})})
        parsed = rollout.Policy.from_dict(
            policy if policy is not None else record.policy
        )
        source_id = config_id or record.config_id
        source = self.store.get_config(source_id)
        derive.check_action(source, action, record.actions)
        current = members_of(self, record, list(record.deployments))
        shared = self._sealed_values(source, input_values or {}, record.input_values)
        own = self._sealed_members(source, own, member_values or {})
        planned, deployments = plan_redeploy(
            record,
            current,
            members,
            {name: {**shared, **own.get(name, {})} for name in members},
            source_id,
            action,
            membership_only=servers is not None,
            opened=self._opened_values,
        )
        operation = new_operation(REDEPLOY, action, planned, parsed)
        if source_id != record.config_id:
            self._visible_config(context, source_id)
        for member in operation["members"].values():
            if member["task"] != "undeploy":
                self._check_deploy_policy(context, member["server_id"], source_id)
        return self._group_operation(
            record,
            operation,
            wait,
            wait_timeout,
            context=context,
            config_id=source_id,
            servers=members,
            member_values=own,
            input_values=shared,
            policy=parsed.to_dict(),
            deployments=deployments,
            action=action,
        )

    def trigger_group(
        self,
        group: str,
        action: str,
        *,
        input_values: Mapping[str, Any] | None = None,
        policy: Mapping[str, Any] | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
        context: RequestContext | None = None,
    ) -> dict[str, Any]:
        """Run ``action`` on every member with a deployment, each as a new
        deployment (as :meth:`trigger` does), released by the policy
        (``policy`` for this operation only).  The outcome of each is in
        :meth:`show_group`'s ``operation``; the members' own deployments
        are left as they were."""
        record = self._idle_group(group, context, "swflows:group:update")
        parsed = rollout.Policy.from_dict(
            policy if policy is not None else record.policy
        )
        current = members_of(self, record, list(record.deployments))
        if not current:
            raise exceptions.ValidationError(
                "group", f"group {record.name} has no member deployed to trigger"
            )
        source = self.store.get_config(record.config_id)
        for found in current.values():
            derive.check_action(source, action, found.actions)
        planned = {
            name: _member(
                found.server_id, "trigger", model.new_id(), parent_id=found.id
            )
            for name, found in current.items()
        }
        given = self._sealed_values(source, checked_input_values(input_values))
        operation = new_operation(TRIGGER, action, planned, parsed, input_values=given)
        for found in current.values():
            self._check_deploy_policy(context, found.server_id, record.config_id)
        return self._group_operation(
            record, operation, wait, wait_timeout, context=context
        )

    def delete_group(
        self,
        group: str,
        *,
        policy: Mapping[str, Any] | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
        context: RequestContext | None = None,
    ) -> dict[str, Any] | None:
        """Undeploy every member (DELETE runs where the config has it),
        released by the policy, then remove the group and the deployments
        of actions triggered on its members.  Returns None once
        it is gone (with ``wait``); if some member could not be undeployed
        the group stays, FAILED, and is returned."""
        record = self._idle_group(group, context, "swflows:group:delete")
        parsed = rollout.Policy.from_dict(
            policy if policy is not None else record.policy
        )
        current = members_of(self, record, list(record.deployments))
        planned = {
            name: _member(
                found.server_id,
                "undeploy",
                found.id,
                generation=found.generation + 1,
            )
            for name, found in current.items()
        }
        for name, found in current.items():  # actions triggered on it
            for child in self.store.list_deployments(parent_id=found.id):
                if child.status != states.IN_PROGRESS:
                    planned[f"{name}.{child.action}.{child.id[:8]}"] = _member(
                        child.server_id, "undeploy", child.id
                    )
        operation = new_operation(DELETE, model.DELETE, planned, parsed)
        try:
            return self._group_operation(record, operation, wait, wait_timeout)
        except exceptions.GroupNotFound:
            return None

    def cancel_group(
        self,
        group: str,
        reason: str | None = None,
        *,
        context: RequestContext | None = None,
    ) -> dict[str, Any]:
        """Stop a group's operation: no member starts any more, the running
        ones are cancelled (FAILED, kind ``cancelled``); the operation ends
        FAILED ``cancelled``.  Refused (InvalidTransition) unless it runs."""
        rows = GroupStore(self.store)
        self._visible_group(context, group, "swflows:group:update")
        for _ in range(10):
            record = rows.get(group)
            if record.status != states.IN_PROGRESS:
                raise exceptions.InvalidTransition(
                    None,
                    record.status,
                    "cancelled",
                    f"group {group} is already {record.status}: nothing to cancel",
                )
            operation = dict(record.operation)
            operation["cancel"] = reason or ""
            try:
                record = rows.update(record, operation=operation)
                break
            except exceptions.ConcurrentUpdate:
                continue
        for member in record.operation["members"].values():
            if member["state"] != "RUNNING":
                continue
            try:
                self.cancel(str(member["deployment_id"]), reason)
            except (exceptions.DeploymentNotFound, exceptions.InvalidTransition):
                continue  # not waiting: it ends by itself
        self._wake_groups()
        return describe(self, rows.get(record.id))

    def show_group(
        self, group: str, *, context: RequestContext | None = None
    ) -> dict[str, Any]:
        """A group by id or name: status and reason, each member's
        deployment status and reason, outputs as maps keyed by member name
        (``outputs[name][member]``), and its last operation's progress."""
        return describe(self, self._visible_group(context, group, "swflows:group:show"))

    def list_groups(
        self, *, context: RequestContext | None = None, all_projects: bool = False
    ) -> list[dict[str, Any]]:
        """Every group (with ``context``, its project's unless
        ``all_projects``): id, name, config, members, action, status, reason."""
        self._allow(context, "swflows:group:list")
        found = GroupStore(self.store).find(**self._listing(context, all_projects))
        return [
            {
                "id": record.id,
                "name": record.name,
                "config_id": record.config_id,
                "members": len(record.servers),
                "action": record.action,
                "status": record.status,
                "status_reason": record.status_reason,
            }
            for record in found
        ]

    def wait_group(self, group: str, timeout: float | None = None) -> dict[str, Any]:
        """Block until the group's operation ended; :meth:`show_group`."""
        self.runner  # noqa: B018 -- the driver runs beside the runner
        return describe(self, wait(self, group, timeout))

    def _visible_group(
        self, context: RequestContext | None, group: str, rule: str
    ) -> Any:
        """The group by id or name; GroupNotFound naming what was asked for
        when it is another project's."""
        record = GroupStore(self.store).get(group)
        try:
            self._visible(context, projects.GROUP, record.id, rule)
        except exceptions.GroupNotFound:
            raise exceptions.GroupNotFound(group) from None
        return record

    def _own_members(
        self,
        context: RequestContext | None,
        operation: Mapping[str, Any],
        group_id: str,
    ) -> None:
        """The deployments an operation makes are the caller's, and act
        through the group's trust when it has one."""
        delegated = self.store.get_trust(projects.GROUP, group_id) is not None
        for member in operation["members"].values():
            deployment_id = str(member["deployment_id"])
            self._own(context, projects.DEPLOYMENT, deployment_id)
            if (
                delegated
                and self.store.get_trust(projects.DEPLOYMENT, deployment_id) is None
            ):
                self.store.set_trust(
                    projects.DEPLOYMENT, deployment_id, trusts.group_ref(group_id)
                )

    def _idle_group(
        self,
        group: str,
        context: RequestContext | None = None,
        rule: str = "swflows:group:update",
    ) -> Any:
        record = self._visible_group(context, group, rule)
        if record.status == states.IN_PROGRESS:
            raise GroupBusy(record.name, record.action)
        return record

    def _group_operation(
        self,
        record: Any,
        operation: dict[str, Any],
        wait: bool,
        wait_timeout: float | None,
        context: RequestContext | None = None,
        **changes: Any,
    ) -> dict[str, Any]:
        self._own_members(context, operation, record.id)
        count = len(operation["members"])
        GroupStore(self.store).update(
            record,
            operation=operation,
            action=str(changes.pop("action", operation["action"])),
            status=states.IN_PROGRESS,
            status_reason=f"0 done, 0 running, 0 failed, {count} left",
            **changes,
        )
        return self._group_started(record.id, wait, wait_timeout)

    def _group_started(
        self, group_id: str, wait: bool, wait_timeout: float | None
    ) -> dict[str, Any]:
        self._wake_groups()
        if wait:
            return self.wait_group(group_id, wait_timeout)
        return self.show_group(group_id)

    def _runner_started(self, runner: Runner) -> None:
        super()._runner_started(runner)
        self._groups = GroupDriver(self, runner.owner, liveness=runner.liveness)
        self._groups.start()

    def _closing(self) -> None:
        if self._groups is not None:
            self._groups.close()
        super()._closing()

    def _wake_groups(self) -> None:
        self.runner  # noqa: B018 -- starts the runner and the driver
        if self._groups is not None:
            self._groups.wake()


__all__ = [
    "DELETE",
    "DEPLOY",
    "REDEPLOY",
    "TRIGGER",
    "GroupBusy",
    "Groups",
    "check_members",
    "describe",
    "new_operation",
    "wait",
]
