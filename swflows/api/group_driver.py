"""Drives groups' operations beside the runner (see :mod:`swflows.api.groups`).

A :class:`GroupDriver`, woken when a member's flow ends and every poll
interval, reads the states of the members' deployments, records those
that ended, asks :func:`swflows.rollout.decide` whom to start, records them
RUNNING and only then launches their flows (:func:`launch`).
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from swflows import (
    derive,
    exceptions,
    failpoints,
    metadata,
    model,
    projects,
    rollout,
    states,
    trusts,
)
from swflows.api.base import describe_fault, is_outage
from swflows.persistence import flow_registry as flow_rows
from swflows.persistence.groups import DELETE, GroupRecord, GroupStore, MemberState

if TYPE_CHECKING:
    from swflows.api.deployments import Deployments
    from swflows.engine import liveness as loops

LOG = logging.getLogger(__name__)

#: launches of one member's flow before it is FAILED
MAX_LAUNCHES: Final = 3
#: members started between two renewals of the operation's lease
RENEW_EVERY: Final = 20


# -------------------------------------------------------------- launching
def launch(
    sw: Deployments, record: GroupRecord, name: str, member: dict[str, Any]
) -> Any:
    """Start ``member``'s flow; its future (the runner's)."""
    task = member["task"]
    operation = record.operation
    action = str(operation["action"])
    deployment_id = str(member["deployment_id"])
    server_id = str(member["server_id"])
    timeout = sw._timeout(record.timeout)
    if task == "deploy":  # a new member is created, whatever the operation
        action = model.CREATE
        source = sw.store.get_config(record.config_id)
        derive.check_action(source, action, record.actions)
        # refused for a server whose agent cannot use it (Heat's, ZAQAR_SIGNAL)
        server = metadata.find_server(sw.services, server_id)
        sw._signal_transport(record.signal_transport, server_id, server=server)
        plan = sw._plan(server_id, record.signal_transport, None, server=server)
        inputs: dict[str, Any] = {
            "deployment_id": deployment_id,
            "server_id": server_id,
            "source_config_id": record.config_id,
            "action": action,
            "input_values": record.member_inputs(name),
            "name": f"{record.name}-{name}",
            "timeout": timeout,
            "generation": 1,
            "signal_transport": record.signal_transport,
            "parent_id": None,
        }
        if record.actions is not None:
            inputs["actions"] = list(record.actions)
        return sw._start("deploy", plan, inputs)[1]
    current = sw.store.get_deployment(
        member["parent_id"] if task == "trigger" else deployment_id
    )
    plan = sw._plan(current.server_id, current.signal_transport, None)
    if task == "redeploy":
        source = sw.store.get_config(record.config_id)
        derive.check_action(source, action, current.actions)
        inputs = {
            "deployment_id": deployment_id,
            "server_id": current.server_id,
            "source_config_id": record.config_id,
            "action": action,
            "input_values": record.member_inputs(name),
            "name": current.name,
            "timeout": timeout,
            "generation": int(member["generation"]),
            "signal_transport": current.signal_transport,
        }
        return sw._start("redeploy", plan, inputs)[1]
    if task == "trigger":
        source = sw.store.get_config(current.source_config_id or record.config_id)
        derive.check_action(source, action, current.actions)
        inputs = {
            "deployment_id": deployment_id,
            "server_id": current.server_id,
            "source_config_id": source.id,
            "action": action,
            "input_values": {
                **current.input_values,
                **dict(operation.get("input_values") or {}),
            },
            "name": f"{current.name or source.name}-{action}",
            "timeout": timeout,
            "generation": 1,
            "signal_transport": current.signal_transport,
            "parent_id": current.id,
        }
        return sw._start("trigger", plan, inputs)[1]
    # undeploy: DELETE runs when the config handles it, as Swflows.undeploy
    run_delete, inputs = sw._undeploy_inputs(
        current, timeout=timeout, generation=int(member["generation"])
    )
    return sw._start(
        "undeploy", {**plan.to_kwargs(), "run_delete_action": run_delete}, inputs
    )[1]


def _ended(member: dict[str, Any], found: MemberState | None) -> str | None:
    """What a RUNNING member's deployment says now: ``"ended"``, ``"running"``,
    ``"broken"`` (its flow was set aside: an operator must look, and the
    member is not started again) or ``"unlaunched"`` (its flow is gone and
    did not do its work)."""
    if found is not None and found.busy:
        return "running"  # a flow works on it: the runner has it
    task = member["task"]
    row = found if found is not None and found.status else None  # its deployment
    if task == "undeploy":
        if row is None:
            return "ended"
    elif row is not None and not (
        task == "redeploy" and row.generation < int(member["generation"])
    ):
        if row.status in states.TERMINAL:
            return "ended"
        # a flow set aside leaves it IN_PROGRESS until the reconciler
        # fails it: the member's outcome is known now
        return "broken" if row.broken is not None else "running"
    return "broken" if found is not None and found.broken is not None else "unlaunched"


# ------------------------------------------------------------------ driver
class GroupDriver:
    """Drives the operations of groups on one runner (see the module)."""

    def __init__(
        self, sw: Deployments, owner: str, *, liveness: loops.Liveness | None = None
    ) -> None:
        self.sw = sw
        self.rows = GroupStore(sw.store)
        self.owner = owner
        self.lease_seconds = float(sw.conf.runner.lease_seconds)
        self.interval = float(sw.conf.watcher.poll_interval)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._held: set[str] = set()
        self._next: float | None = None
        if liveness is None:  # the engine is loaded with the runner, not before
            from swflows.engine.liveness import Liveness

            liveness = Liveness()
        #: its health, among its runner's loops
        self.loop = liveness.loop("groups", self.interval)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run_forever, name="swflows-groups", daemon=True
            )
            self._thread.start()

    def close(self) -> None:
        """Stop; the operations held are released for any runner."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        for group_id in list(self._held):
            try:
                self.rows.release(group_id, self.owner)
            except Exception:  # the store may be closing
                LOG.debug("group %s not released", group_id, exc_info=True)
        self._held.clear()

    def wake(self) -> None:
        self._wake.set()

    def _run_forever(self) -> None:
        with self.loop.running_in(self._stopping.is_set):
            while not self._stopping.is_set():
                self.loop.run(self.tick)
                wait = self.interval
                if self._next is not None:
                    wait = max(0.05, min(wait, self._next - time.time()))
                self._wake.wait(wait)
                self._wake.clear()

    def tick(self) -> None:
        """One pass over every group whose operation runs."""
        failpoints.hit("groups.tick")
        now = time.time()
        self._next = None
        for group_id, owner, lease_until in self.rows.in_progress():
            if self._stopping.is_set():
                return
            free = (
                owner is None
                or owner == self.owner
                or lease_until is None
                or lease_until <= now
                or flow_rows.owner_is_dead(owner)
            )
            if not free:
                self._held.discard(group_id)
                continue
            if not self.rows.claim(
                group_id,
                self.owner,
                lease_until=time.time() + self.lease_seconds,
                now=now,
                dead_owner=owner if owner and owner != self.owner else None,
            ):
                self._held.discard(group_id)
                continue
            if owner and owner != self.owner:
                LOG.info("group %s: taken over from %s", group_id, owner)
            self._held.add(group_id)
            try:
                failpoints.hit("groups.advance")
                self.advance(group_id)
            except exceptions.GroupNotFound:
                self._held.discard(group_id)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException:
                LOG.exception("group %s: could not advance", group_id)

    def advance(self, group_id: str) -> None:
        """Record members that ended, start those the policy releases."""
        for _ in range(10):
            record = self.rows.get(group_id)
            if record.status != states.IN_PROGRESS:
                self._held.discard(group_id)
                return
            try:
                self._advance(record)
                return
            except exceptions.ConcurrentUpdate:
                continue  # a cancel or another write came first: again

    def _advance(self, record: GroupRecord) -> None:
        operation = copy.deepcopy(record.operation)
        members: dict[str, dict[str, Any]] = operation["members"]
        policy = rollout.Policy.from_dict(operation.get("policy"))
        running = {
            name: str(m["deployment_id"])
            for name, m in members.items()
            if m["state"] == rollout.RUNNING
        }
        found = self.rows.deployment_states(running)
        now = time.time()
        relaunch: list[str] = []
        for name in running:
            member = members[name]
            seen = _ended(member, found.get(name))
            if seen == "unlaunched" and self.sw.runner.launching(running[name]):
                seen = "running"  # its flow waits here for its row to be written
            if seen == "ended":
                self._record_end(member, now)
            elif seen == "broken":
                note = found[name].broken
                member.update(
                    state=rollout.FAILED,
                    ended_at=now,
                    reason=f"its {member['task']} flow was set aside: {note}",
                )
            elif seen == "unlaunched":
                if operation.get("cancel") is not None:
                    member.update(
                        state=rollout.FAILED,
                        ended_at=now,
                        reason="cancelled before its flow started",
                    )
                elif member["launches"] >= MAX_LAUNCHES:
                    member.update(
                        state=rollout.FAILED,
                        ended_at=now,
                        reason=f"its {member['task']} flow was reverted "
                        f"{member['launches']} times (see the runner's log)",
                    )
                else:
                    member["launches"] += 1
                    relaunch.append(name)
        cancel = operation.get("cancel")
        if cancel is not None:
            self._cancel_running(members, found, cancel)
        decision = rollout.decide(
            policy,
            [
                rollout.Member(
                    name,
                    members[name]["state"],
                    int(members[name]["batch"]),
                    members[name]["ended_at"],
                    bool(members[name]["serving"]),
                )
                for name in operation["order"]
            ],
            now,
            cancelled=operation.get("cancel"),
        )
        for name in decision.start:
            members[name]["state"] = rollout.RUNNING
            members[name]["launches"] += 1
        changes: dict[str, Any] = {"operation": operation}
        if decision.done:
            operation["ended_at"] = now
            changes.update(self._final(record, operation, decision))
        else:
            note = "" if decision.reason == "running" else f"; {decision.reason}"
            changes["status_reason"] = f"{decision.progress()}{note}"
            if decision.wake_at is not None:
                self._next = min(self._next or decision.wake_at, decision.wake_at)
        if (
            not decision.done
            and operation == record.operation
            and changes["status_reason"] == record.status_reason
        ):
            return  # nothing ended, nothing to start: no write
        if (
            decision.done
            and operation["kind"] == DELETE
            and changes["status"] == states.COMPLETE
        ):
            # its members are gone: the last thing that needed the trust;
            # then the group goes in the write that ends it (never seen
            # ended and still there), its owner row and trust record with it
            if not self._release_trust(record.id):
                return  # Keystone out of reach: tried again at the next pass
            self.rows.delete(record.id, version=record.version)
            self._held.discard(record.id)
            LOG.info("group %s deleted", record.name)
            return
        record = self.rows.update(record, **changes)  # written before launching
        if decision.done:
            self._held.discard(record.id)
            self.rows.release(record.id, self.owner)
            LOG.info(
                "group %s %s: %s", record.name, record.status, record.status_reason
            )
            return
        failures: dict[str, str] = {}
        for index, name in enumerate([*relaunch, *decision.start]):
            if index and index % RENEW_EVERY == 0 and not self._renew(record.id):
                # another runner took the operation over: the members not
                # launched yet are its to launch (they have no flow)
                LOG.warning("group %s: lease lost while starting members", record.name)
                return
            try:
                future = launch(self.sw, record, name, members[name])
            except Exception as exc:
                if is_outage(exc):
                    # the store or the cloud out of reach: never the
                    # member's failure; it is launched again at a next pass
                    LOG.warning(
                        "group %s: member %s not started, launched again later: %s",
                        record.name,
                        name,
                        describe_fault(exc),
                    )
                    continue
                if isinstance(exc, exceptions.SwflowsError):
                    task = members[name]["task"]
                    failures[name] = f"could not start its {task}: {exc}"
                    continue
                LOG.exception("group %s: member %s not started", record.name, name)
                failures[name] = f"could not start: {type(exc).__name__}: {exc}"
                continue
            future.add_done_callback(lambda _: self.wake())
        if failures:
            self._fail_members(record.id, failures)
            self.wake()

    def _release_trust(self, group_id: str) -> bool:
        """Delete the trust the group's members acted through, once they
        are gone (see :mod:`swflows.trusts`); False when Keystone is out of
        reach for now (the trust stays recorded, and the group with it)."""
        try:
            trusts.release(self.sw.services, projects.GROUP, group_id)
        except exceptions.SwflowsError as exc:
            LOG.error("group %s: its trust could not be deleted: %s", group_id, exc)
            return not is_outage(exc)
        return True

    def _renew(self, group_id: str) -> bool:
        return self.rows.claim(
            group_id,
            self.owner,
            lease_until=time.time() + self.lease_seconds,
            now=time.time(),
        )

    def _cancel_running(
        self,
        members: Mapping[str, dict[str, Any]],
        found: Mapping[str, MemberState],
        reason: str,
    ) -> None:
        """End the running members' actions FAILED (``cancelled``): those
        whose flow had not started its action when the cancel came too."""
        for name, member in members.items():
            seen = found.get(name)
            if member["state"] != rollout.RUNNING or seen is None:
                continue
            if seen.status != states.IN_PROGRESS or seen.generation < int(
                member["generation"]
            ):
                continue
            try:
                self.sw.cancel(str(member["deployment_id"]), reason or None)
            except exceptions.SwflowsError:
                continue  # it ended meanwhile

    def _record_end(self, member: dict[str, Any], now: float) -> None:
        task = member["task"]
        if task == "undeploy":
            member.update(state=rollout.COMPLETE, ended_at=now, reason="undeployed")
            return
        try:
            found = self.sw.store.get_deployment(member["deployment_id"])
        except exceptions.DeploymentNotFound:
            member.update(state=rollout.FAILED, ended_at=now, reason="no deployment")
            return
        member.update(
            state=rollout.COMPLETE
            if found.status == states.COMPLETE
            else rollout.FAILED,
            ended_at=now,
            reason=found.status_reason,
        )

    def _fail_members(self, group_id: str, failures: Mapping[str, str]) -> None:
        for _ in range(10):
            record = self.rows.get(group_id)
            operation = copy.deepcopy(record.operation)
            for name, reason in failures.items():
                operation["members"][name].update(
                    state=rollout.FAILED, ended_at=time.time(), reason=reason
                )
            try:
                self.rows.update(record, operation=operation)
                return
            except exceptions.ConcurrentUpdate:
                continue

    @staticmethod
    def _final(
        record: GroupRecord, operation: dict[str, Any], decision: rollout.Decision
    ) -> dict[str, Any]:
        """The group's fields once its operation ended."""
        deployments = dict(record.deployments)
        for name, member in operation["members"].items():
            if member["task"] == "undeploy" and member["state"] == rollout.COMPLETE:
                deployments.pop(name, None)
        kind = operation["kind"]
        return {
            "status": decision.status,
            "status_reason": f"{kind} {decision.status}: {decision.reason}",
            "deployments": deployments,
        }
