"""The chaos soak: a steady stream of operations while conductors and the
elected signal watcher are killed and frozen, the machine overloaded, and
the cluster's connections to its store and its board reset, cut off or
slowed (:mod:`tests.functional.netfault`), then the invariants.

Every hook the agents run appends ``<op> <action> <pid> start`` (and
``end`` when it succeeds) to one file, the agents' own record; every
operation the stream asks for carries a tag of its own (``op``), so each
action is matched to the lines of its hook runs.  What must hold at the
end (DESIGN.md, mechanisms 7, 11 and 12):

* every action ended as asked (COMPLETE with its own output, or FAILED
  when its hook was told to fail), none left IN_PROGRESS, and an undeploy
  removed its deployment;
* each action's hook ran exactly once;
* no flow row is left, no job on the board, no thread of a conductor
  died;
* no stack user or project, Swift signal object or Zaqar queue is left
  once everything is undeployed, and no server channel once the servers
  are deleted.

A failure is a :class:`Violation` naming the deployment; the soak runs
to its end and reports them all.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import random
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from swflows import exceptions, model, projects, states
from swflows import transport_names as names
from swflows.api import Swflows
from swflows.persistence import flow_registry as flow_rows
from tests.chaos.cluster import Cluster, Proc
from tests.functional.flowkit import leftovers
from tests.functional.test_enrollment import channel_leftovers
from tests.functional.test_jobboard import Setup
from tests.functional.test_trusts import trusts_of

#: the summary lines of the runs, for pytest's terminal summary
SUMMARIES = pytest.StashKey[list[str]]()
SIGNALS = (names.TEMP_URL_SIGNAL, names.ZAQAR_SIGNAL)
CONFIG_TRANSPORTS = (names.POLL_TEMP_URL, names.ZAQAR_MESSAGE)
#: a deployment's timeout: well past any takeover, so none ends by it
TIMEOUT = 150
#: how long a call waits for a conductor to start (or end) its action
WAIT_TIMEOUT = TIMEOUT + 60
#: the group's members, one per server
GROUP = "chaos-group"
#: the soak's own deployments a server may hold before it posts only
#: actions on those it has (a group's members come on top)
MAX_PER_SERVER = 6
#: ``fail`` input of an action that succeeds
NO_FAIL = "-"
#: what the status reason of an action its hook failed says (the hook
#: exits 3 when told to fail)
HOOK_FAILED = "non-zero status code: 3"

HOOK = """#!/bin/sh
echo "$op $deploy_action $$ start $(date +%T.%N)" >> "$runs"
if [ "$fail" = "$deploy_action" ]; then echo "told to fail" >&2; exit 3; fi
sleep "$nap"
echo "$op $deploy_action $$ end $(date +%T.%N)" >> "$runs"
printf %s "$deploy_action:$op" > $heat_outputs_path.result
"""


#: seconds between two logins of the caller (tokens last an hour)
RELOGIN = 1200.0


@dataclasses.dataclass
class Action:
    """One action the stream asked for, and how it must end."""

    op: str
    kind: str  # deploy, redeploy, trigger, undeploy, group
    action: str  # CREATE, UPDATE, BACKUP, DELETE
    deployment_id: str = ""
    #: COMPLETE, FAILED, or GONE (an undeploy)
    expect: str = states.COMPLETE
    generation: int = 0
    #: whether the agent runs a hook for it (a trigger's undeploy: none)
    runs_hook: bool = True
    #: what it ended as, once seen
    ended: str | None = None
    #: a trigger's original deployment
    parent: str = ""
    #: whether the call that asked for it returned (or raised): until
    #: then its deployment is not free for another action, even once the
    #: action ended (a blocking call reads the deployment after its flow
    #: ended; an undeploy in between would have it raise
    #: DeploymentNotFound)
    returned: bool = False


@dataclasses.dataclass
class Violation:
    deployment_id: str
    what: str
    #: which invariant: outcome, not-ended, raised, hook, flow-left, leak,
    #: thread-died
    kind: str = "outcome"

    def __str__(self) -> str:
        return f"[{self.kind}] {self.deployment_id or '-'}: {self.what}"


@dataclasses.dataclass
class Report:
    seed: int
    board: str
    minutes: float
    operations: int
    faults: list[str]
    violations: list[Violation]
    #: calls that gave up waiting (a loaded machine): not violations
    slow: list[Violation] = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        return (
            f"chaos: seed={self.seed} board={self.board} minutes={self.minutes:g} "
            f"operations={self.operations} faults={len(self.faults)} "
            f"violations={len(self.violations)}"
        )

    def lines(self) -> list[str]:
        """The summary, the violations by kind, then each of them."""
        kinds = collections.Counter(v.kind for v in self.violations)
        counted = " ".join(f"{k}={n}" for k, n in sorted(kinds.items()))
        return [
            self.summary(),
            *([f"  by kind: {counted}"] if counted else []),
            *(f"  {v}" for v in self.violations),
            *(f"  (not a violation) {v}" for v in self.slow),
        ]


#: faults of the network between the cluster and its store or its board
#: (:mod:`tests.functional.netfault`): every connection reset (a restart of the
#: server), nothing passing for a while, every chunk late
NETWORK_FAULTS = (
    "store-reset",
    "store-blackhole",
    "store-slow",
    "board-reset",
    "board-blackhole",
)
#: how late each chunk to and from the store is in a ``store-slow``
SLOW_STORE_DELAY = 0.05


@dataclasses.dataclass
class Fault:
    """One fault of the seeded schedule, ``at`` seconds into the stream."""

    at: float
    kind: str  # kill, stop, kill-leader, overload, or a NETWORK_FAULTS
    target: int  # which conductor (kill, stop)
    #: frozen (stop), dead before the restart, overloaded, cut off (a
    #: blackhole), slowed
    seconds: float

    def __str__(self) -> str:
        return f"{self.kind}@{self.at:.0f}s"


def schedule(
    rng: random.Random, seconds: float, claim_expiry: int, conductors: int
) -> list[Fault]:
    """The faults: every kind in turn (shuffled per round), 5 to 10 s
    apart (a fault lasting longer delays the next)."""
    kinds = ["kill", "stop", "kill-leader", "overload", *NETWORK_FAULTS]
    faults: list[Fault] = []
    at = rng.uniform(5, 10)
    round_: list[str] = []
    while at < seconds - 5:
        if not round_:
            round_ = list(kinds)
            rng.shuffle(round_)
        kind = round_.pop()
        length = {
            "stop": claim_expiry + rng.uniform(2, 5),
            "overload": rng.uniform(5, 15),
            # past the claim expiry about half the time
            "board-blackhole": rng.uniform(1, 2 * claim_expiry),
            "store-blackhole": rng.uniform(1, 2 * claim_expiry),
            "store-slow": rng.uniform(5, 15),
        }.get(kind, rng.uniform(0.5, 3))
        faults.append(Fault(at, kind, rng.randrange(conductors), length))
        at += rng.uniform(5, 10)
    return faults


class Soak:
    """One run on one board: ``run()`` returns the :class:`Report`."""

    def __init__(
        self,
        setup: Setup,
        sw: Swflows,
        folder: Path,
        *,
        seed: int,
        minutes: float,
        servers: int = 4,
        conductors: int = 3,
        standbys: int = 2,
        claim_expiry: int,
        cloud: dict[str, Any],
        caller: Callable[[], Any],
    ) -> None:
        self.setup = setup
        self.cloud = cloud
        #: a new request context of a user of another project (demo2)
        self.login = caller
        self.caller: Any = None
        #: the trust of each deployment made by the caller
        self.trusts: dict[str, str] = {}
        self.sw = sw
        self.folder = folder
        self.seed = seed
        self.minutes = minutes
        self.rng = random.Random(seed)
        self.n_servers = servers
        self.claim_expiry = claim_expiry
        self.cluster = Cluster(setup, folder, conductors, standbys)
        self.runs = folder / "hook-runs"
        self.runs.touch()
        self.actions: list[Action] = []
        self.violations: list[Violation] = []
        self.slow_calls: list[Violation] = []
        self.done_faults: list[str] = []
        self.servers: list[str] = []
        self.keys: dict[str, str] = {}
        #: deployments the stream made (not the group's), by id: the op in
        #: flight on it (None: idle)
        self.mine: dict[str, Action | None] = {}
        self.triggered: set[str] = set()
        #: each deployment's generation, as last listed
        self.generations: dict[str, int] = {}
        self.group_id = ""
        self.group_action: Action | None = None
        self.ops = 0
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(8)
        self._pending: list[concurrent.futures.Future[None]] = []

    # ----------------------------------------------------------- the run
    def run(self) -> Report:
        t0 = time.monotonic()
        self.log(f"seed {self.seed}: starting the cluster")
        # the posting process stands down: the elected watcher is always a
        # process the soak can kill
        election = self.sw.runner.election
        assert election is not None
        election.stop()
        self.cluster.start()
        self.config = self.make_config("chaos", None)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            booted = list(
                pool.map(
                    lambda i: self.sw.create_server(
                        f"chaos-{i}",
                        "cirros",
                        "m1.tiny",
                        config_transport=CONFIG_TRANSPORTS[i % 2],
                    ),
                    range(self.n_servers),
                )
            )
        self.servers = [b["server_id"] for b in booted]
        self.keys = {b["server_id"]: b["channel"]["key"] for b in booted}
        # a third of the deploys are a caller's of another project, acting
        # through a trust: its own config, and servers that take any project's
        self.caller = self.login()
        self._caller_at = time.monotonic()
        self.caller_config = self.make_config("chaos-caller", self.caller)
        for server_id in self.servers:
            self.sw.set_deploy_policy(server_id, {"mode": "any"})
        self.log(f"cluster and {len(self.servers)} servers up")

        seconds = self.minutes * 60
        faults = schedule(
            self.rng, seconds, self.claim_expiry, len(self.cluster.conductors)
        )
        self.log("fault schedule: " + " ".join(map(str, faults)))
        start = time.monotonic()
        injector = threading.Thread(
            target=self.inject, args=(faults, start), name="chaos-faults"
        )
        injector.start()
        try:
            self.stream(start + seconds)
        finally:
            injector.join()
        self.log(f"stream ended: {self.ops} operations, faults {self.done_faults}")
        self.drain()
        self.finish()
        self.cluster.close()
        self.log(f"done in {time.monotonic() - t0:.0f} s")
        return Report(
            self.seed,
            self.setup.kind,
            self.minutes,
            self.ops,
            self.done_faults,
            self.violations,
            self.slow_calls,
        )

    def make_config(self, name: str, context: Any) -> model.Config:
        """The component config every action runs: :data:`HOOK`."""
        return self.sw.create_config(
            name,
            {
                "configs": [
                    {"actions": ["CREATE", "UPDATE"], "config": HOOK, "tool": "script"},
                    {"actions": ["BACKUP"], "config": HOOK, "tool": "script"},
                    {"actions": ["DELETE"], "config": HOOK, "tool": "script"},
                ]
            },
            group="component",
            inputs=[
                {"name": "op"},
                {"name": "runs", "default": str(self.runs)},
                {"name": "fail", "default": NO_FAIL},
                {"name": "nap", "default": "0"},
            ],
            outputs=[{"name": "result"}],
            context=context,
        )

    def log(self, text: str) -> None:
        print(f"chaos [{time.strftime('%H:%M:%S')}] {text}", flush=True)

    def slow(self, deployment_id: str, what: str) -> None:
        """A call that gave up waiting: reported, not a violation (what the
        action ended as is checked all the same)."""
        with self._lock:
            self.slow_calls.append(Violation(deployment_id, what, "slow"))
        self.log(f"slow {deployment_id}: {what}")
        self.note(f"slow {deployment_id}: {what}")

    def note(self, text: str) -> None:
        """A line of the operations' own log, ``operations.log``."""
        with self._lock, (self.folder / "operations.log").open("a") as out:
            out.write(f"{time.strftime('%H:%M:%S')} {text}\n")

    def violation(self, deployment_id: str, what: str, kind: str = "outcome") -> None:
        with self._lock:
            self.violations.append(Violation(deployment_id, what, kind))
        self.log(f"VIOLATION {deployment_id}: {what}")
        self.note(f"VIOLATION {deployment_id}: {what}")

    # -------------------------------------------------------- the faults
    def inject(self, faults: list[Fault], start: float) -> None:
        for fault in faults:
            time.sleep(max(0.0, start + fault.at - time.monotonic()))
            try:
                self.one_fault(fault)
            except Exception as exc:
                self.violation(
                    "", f"fault {fault} could not be made: {exc!r}", kind="raised"
                )

    def one_fault(self, fault: Fault) -> None:
        if fault.kind in NETWORK_FAULTS:
            self.network_fault(fault)
            return
        proc: Proc | None = self.cluster.conductors[fault.target]
        if fault.kind in ("kill", "stop"):
            # the conductor holding the most flows, if one holds any: the
            # seeded one otherwise
            proc = self.cluster.busiest(self.sw) or proc
        if fault.kind == "kill-leader":
            proc = self.cluster.leader(self.sw)
            if proc is None:
                self.log(f"{fault}: no leader among the soak's processes, skipped")
                return
        assert proc is not None
        what = f"{fault.kind} {proc.name} (pid {proc.pid})"
        if fault.kind == "overload":
            what = f"overload for {fault.seconds:.0f} s"
            subprocess.run(
                ["stress-ng", "--cpu", "2", "--timeout", f"{fault.seconds:.0f}s"],
                capture_output=True,
                check=False,
            )
        elif fault.kind == "stop":
            what += f" for {fault.seconds:.1f} s"
            self.log(f"fault: {what}")
            proc.signal(signal.SIGSTOP)
            time.sleep(fault.seconds)
            proc.signal(signal.SIGCONT)
        else:
            self.log(f"fault: {what}")
            proc.kill()
            time.sleep(fault.seconds)
            proc.start()  # on the schedule's time, started or not
            what += f", restarted as pid {proc.pid}"
        self.done_faults.append(what)
        self.log(f"fault done: {what}")

    def network_fault(self, fault: Fault) -> None:
        name, _, how = fault.kind.partition("-")
        proxy = self.cluster.proxies[name]
        if how == "reset":
            what = f"{name}: {proxy.reset()} connections reset"
        else:
            what = f"{name} {how} for {fault.seconds:.1f} s"
            self.log(f"fault: {what}")
            hold = (
                proxy.blackhole()
                if how == "blackhole"
                else proxy.slow(SLOW_STORE_DELAY)
            )
            with hold:
                time.sleep(fault.seconds)
        self.done_faults.append(what)
        self.log(f"fault done: {what}")

    # -------------------------------------------------------- the stream
    def stream(self, end: float) -> None:
        self.start_group()
        group_redeployed = False
        halfway = time.monotonic() + (end - time.monotonic()) / 2
        while time.monotonic() < end:
            self.refresh()
            if not group_redeployed and time.monotonic() > halfway:
                group_redeployed = self.redeploy_group()
            self.one_operation()
            time.sleep(self.rng.uniform(0.4, 1.4))
        for future in self._pending:
            future.result()

    def submit(self, action: Action, call: Callable[[], None]) -> None:
        self.ops += 1
        with self._lock:
            self.actions.append(action)

        def guarded() -> None:
            try:
                call()
                self.note(f"posted {action}")
            except exceptions.FlowError as exc:
                # posted, its flow failed while the call waited for its end
                action.ended = "late"
                self.violation(
                    action.deployment_id or action.parent,
                    f"{action.kind} {action.op} raised {type(exc).__name__}: {exc}",
                    kind="raised",
                )
            except exceptions.WaitTimeout as exc:
                # posted, not started (or with ``wait``, not ended) in time:
                # followed as any other (a trigger's new deployment is not
                # known: its hook only)
                self.note(f"late {action}: {exc!r}")
                self.slow(
                    action.deployment_id or action.parent,
                    f"{action.kind} {action.op}: the call gave up after "
                    f"{WAIT_TIMEOUT} s: {exc}",
                )
                if action.kind in ("trigger", "group"):
                    action.ended = "late"
            except Exception as exc:
                action.ended = "refused"
                self.note(f"refused {action}: {exc!r}")
                self.violation(
                    action.deployment_id or action.parent,
                    f"{action.kind} {action.op} raised {type(exc).__name__}: {exc}",
                    kind="raised",
                )
                with self._lock:
                    if action.deployment_id not in self.mine:
                        pass
                    elif action.kind == "deploy":
                        del self.mine[action.deployment_id]
                    else:
                        self.mine[action.deployment_id] = None
            finally:
                action.returned = True

        self._pending.append(self._pool.submit(guarded))

    def new_op(
        self, kind: str, action: str, fail: bool
    ) -> tuple[Action, dict[str, Any]]:
        op = f"o{self.ops}"
        values = {
            "op": op,
            "fail": action if fail else NO_FAIL,
            "nap": f"{self.rng.uniform(0, 3):.1f}",
        }
        expect = states.FAILED if fail else states.COMPLETE
        return Action(op, kind, action, expect=expect), values

    def one_operation(self) -> None:
        with self._lock:
            idle = [d for d, busy in self.mine.items() if busy is None]
        kinds = ["deploy", "redeploy", "trigger", "undeploy"]
        # about two deployments a server: what is left to undeploy at the
        # end stays small
        weights = [4, 3, 2, 2] if len(self.mine) < 2 * self.n_servers else [0, 3, 1, 5]
        if not idle and len(self.mine) >= MAX_PER_SERVER * self.n_servers:
            # all busy (a loaded machine): a deploy now would only pile
            # deployments up on the servers (90 each in a 30-minute run,
            # past what a ZAQAR_MESSAGE document can hold)
            return
        kind = self.rng.choices(kinds, weights)[0] if idle else "deploy"
        fail = self.rng.random() < 0.1
        # a fifth block in a thread of the pool until their action ended
        blocking = self.rng.random() < 0.2
        if kind == "deploy":
            server = self.rng.choice(self.servers)
            action, values = self.new_op(kind, model.CREATE, fail)
            action.deployment_id = model.new_id()
            action.generation = 1
            signal_transport = self.rng.choice(SIGNALS)
            context = self.fresh_caller() if self.rng.random() < 1 / 3 else None
            config = self.config if context is None else self.caller_config
            with self._lock:
                self.mine[action.deployment_id] = action

            def deploy() -> None:
                try:
                    self.sw.deploy(
                        server,
                        config.id,
                        input_values=values,
                        name=action.op,
                        signal_transport=signal_transport,
                        timeout=TIMEOUT,
                        deployment_id=action.deployment_id,
                        wait=blocking,
                        wait_timeout=WAIT_TIMEOUT,
                        context=context,
                    )
                finally:
                    if context is not None:
                        self.trust_of(action)

            self.submit(action, deploy)
            return
        target = self.rng.choice(sorted(idle))
        if kind == "redeploy" and target in self.triggered:
            kind = "trigger"  # a trigger's record has no UPDATE of its own to run
        if kind == "undeploy":
            action = Action(f"u{self.ops}", kind, model.DELETE, target)
            action.expect = "GONE"
            action.runs_hook = target not in self.triggered
            # DELETE runs with the last action's inputs: its op
            last = self.last_action(target)
            action.op = last.op if last else action.op
            with self._lock:
                self.mine[target] = action

            def undeploy() -> None:
                self.sw.undeploy(target, wait=blocking, wait_timeout=WAIT_TIMEOUT)

            self.submit(action, undeploy)
            return
        if kind == "redeploy":
            action, values = self.new_op(kind, model.UPDATE, fail)
            action.deployment_id = target
            action.generation = self.generations.get(target, 0) + 1
            with self._lock:
                self.mine[target] = action

            def redeploy() -> None:
                dep = self.sw.redeploy(
                    target,
                    input_values=values,
                    wait=blocking,
                    wait_timeout=WAIT_TIMEOUT,
                )
                action.generation = dep.generation

            self.submit(action, redeploy)
            return
        action, values = self.new_op(kind, "BACKUP", fail)
        action.parent = target
        with self._lock:
            self.mine[target] = action  # busy until the trigger is posted

        def trigger() -> None:
            try:
                dep = self.sw.trigger(
                    target,
                    "BACKUP",
                    input_values=values,
                    wait=blocking,
                    wait_timeout=WAIT_TIMEOUT,
                )
            finally:
                with self._lock:
                    self.mine[target] = None
            action.deployment_id = dep.id
            action.generation = dep.generation
            with self._lock:
                self.triggered.add(dep.id)
                self.mine[dep.id] = action

        self.submit(action, trigger)

    def trust_of(self, action: Action) -> None:
        """Record the trust of a deployment a caller made: there is one."""
        found = self.sw.store.get_trust(projects.DEPLOYMENT, action.deployment_id)
        if found is None:
            with contextlib.suppress(exceptions.DeploymentNotFound):
                self.sw.show(action.deployment_id)
                self.violation(
                    action.deployment_id, f"{action.op}: no trust made", kind="outcome"
                )
            return
        with self._lock:
            self.trusts[action.deployment_id] = found

    def last_action(self, deployment_id: str) -> Action | None:
        with self._lock:
            found = [
                a
                for a in self.actions
                if a.deployment_id == deployment_id and a.kind != "undeploy"
            ]
        return found[-1] if found else None

    def fresh_caller(self) -> Any:
        """The caller's context, logged in again every :data:`RELOGIN`
        seconds: a soak outlives a Keystone token (an hour), and a caller
        with an expired token cannot delegate."""
        if time.monotonic() - self._caller_at > RELOGIN:
            self.caller = self.login()
            self._caller_at = time.monotonic()
        return self.caller

    def refresh(self) -> None:
        """Free the deployments whose action ended, checking how it ended."""
        # flows first: a flow that ends between the two reads has removed
        # what it would remove before the deployments are read
        flowing = {
            row.deployment_id
            for row in self.sw.list_flows()
            if row.state != flow_rows.BROKEN
        }
        listed = {d.id: d for d in self.sw.list_deployments()}
        self.generations = {d: dep.generation for d, dep in listed.items()}
        with self._lock:
            busy = [(d, a) for d, a in self.mine.items() if a is not None]
        for dep_id, action in busy:
            dep = listed.get(dep_id)
            if action.kind == "undeploy":
                if dep is None:
                    action.ended = "GONE"
                    self.note(f"ended {action}")
                    with self._lock:
                        del self.mine[dep_id]
                elif (
                    dep.action == model.DELETE
                    and dep.status == states.FAILED
                    and dep_id not in flowing
                ):
                    # a FAILED DELETE is written before the row goes: only
                    # a row its flow left behind is a violation
                    action.ended = dep.status
                    self.violation(
                        dep_id,
                        f"undeploy {action.op}: DELETE {dep.status}, deployment "
                        f"left: {dep.status_reason}",
                    )
                    with self._lock:
                        self.mine[dep_id] = None
                continue
            if dep is None or dep.status == states.IN_PROGRESS:
                continue  # not written yet, or running
            if not action.generation or dep.generation < action.generation:
                continue  # its flow has not started the action yet
            if not action.returned:
                continue  # its call still reads it
            self.check_ended(action, dep)
            with self._lock:
                self.mine[dep_id] = None

    def check_ended(self, action: Action, dep: model.Deployment) -> None:
        action.ended = dep.status
        self.note(f"ended {action}: {dep.status_reason!r}")
        what = f"{action.kind} {action.op} ({action.action})"
        if dep.generation != action.generation or dep.action != action.action:
            self.violation(
                dep.id,
                f"{what}: ended as {dep.action} generation {dep.generation}, "
                f"not generation {action.generation}",
            )
        elif dep.status != action.expect:
            self.violation(
                dep.id,
                f"{what}: {dep.status}, expected {action.expect}: {dep.status_reason}",
            )
        elif dep.status == states.FAILED and HOOK_FAILED not in dep.status_reason:
            # told to fail, but it failed before its hook could
            self.violation(
                dep.id, f"{what}: FAILED, not by its hook: {dep.status_reason}"
            )
        elif dep.status == states.COMPLETE:
            result = dep.output_values.get("result")
            if result != f"{action.action}:{action.op}":
                self.violation(dep.id, f"{what}: COMPLETE with output {result!r}")

    # --------------------------------------------------------- the group
    def start_group(self) -> None:
        members = {f"m{i}": s for i, s in enumerate(self.servers)}
        action = Action("g1", "group", model.CREATE)
        self.group_action = action

        def create() -> None:
            shown = self.sw.create_group(
                GROUP,
                self.config.id,
                members,
                input_values={"nap": "1"},
                member_values={m: {"op": f"g1-{m}"} for m in members},
                policy={"max_concurrency": 2},
                signal_transport=names.TEMP_URL_SIGNAL,
                timeout=TIMEOUT,
                wait=False,
                wait_timeout=WAIT_TIMEOUT,
            )
            self.group_id = shown["id"]
            self.log(f"group {self.group_id} created (g1)")

        self.submit(action, create)

    def redeploy_group(self) -> bool:
        """Redeploy the group once its creation ended; whether it did."""
        if not self.group_id:
            return False
        shown = self.sw.show_group(self.group_id)
        if shown["status"] == states.IN_PROGRESS:
            return False
        self.check_group(shown, "g1", model.CREATE)
        action = Action("g2", "group", model.UPDATE)
        self.group_action = action
        members = list(shown["members"])

        self.log(f"group {self.group_id} redeployed (g2)")

        def redeploy() -> None:
            self.sw.redeploy_group(
                self.group_id,
                member_values={m: {"op": f"g2-{m}"} for m in members},
                wait=False,
                wait_timeout=WAIT_TIMEOUT,
            )

        self.submit(action, redeploy)
        return True

    def check_group(self, shown: dict[str, Any], op: str, action: str) -> None:
        if shown["status"] != states.COMPLETE:
            self.violation(
                self.group_id,
                f"group {op} ({action}): {shown['status']}: {shown['status_reason']}",
            )
        for name, member in shown["members"].items():
            dep_id = member["deployment_id"] or ""
            result = shown.get("outputs", {}).get("result", {}).get(name)
            if member["status"] != states.COMPLETE or result != f"{action}:{op}-{name}":
                self.violation(
                    dep_id,
                    f"group member {name} {op} ({action}): {member['status']} "
                    f"{member['action']}, output {result!r}: {member['status_reason']}",
                )

    def group_members(self) -> set[str]:
        if not self.group_id:
            return set()
        shown = self.sw.show_group(self.group_id)
        return {
            m["deployment_id"] for m in shown["members"].values() if m["deployment_id"]
        }

    # ----------------------------------------------------- after the run
    def drain(self) -> None:
        """Wait for every action to end; report those that did not."""
        bound = 3 * self.claim_expiry + 60
        deadline = time.monotonic() + bound
        for proc in self.cluster.procs:  # none left frozen, every one running
            if proc.popen and proc.popen.poll() is None:
                proc.signal(signal.SIGCONT)
            try:
                proc.wait_started()
            except AssertionError as exc:
                self.violation("", str(exc))
        while time.monotonic() < deadline:
            self.refresh()
            with self._lock:
                busy = any(a is not None for a in self.mine.values())
            group_busy = bool(self.group_id) and (
                self.sw.show_group(self.group_id)["status"] == states.IN_PROGRESS
            )
            if not busy and not group_busy:
                break
            time.sleep(1)
        self.log(f"drained in {bound - (deadline - time.monotonic()):.0f} s")
        with self._lock:
            stuck = [(d, a) for d, a in self.mine.items() if a is not None]
        for dep_id, action in stuck:
            self.violation(
                dep_id,
                f"{action.kind} {action.op} ({action.action}) not ended "
                f"{bound} s after the stream: {self.describe(dep_id)}",
                kind="not-ended",
            )
        if self.group_id:
            shown = self.sw.show_group(self.group_id)
            assert self.group_action is not None
            if shown["status"] == states.IN_PROGRESS:
                self.violation(
                    self.group_id,
                    f"group {self.group_action.op} not ended: {shown['status_reason']}",
                    kind="not-ended",
                )
                for member in shown["members"].values():
                    if member["status"] == states.IN_PROGRESS:
                        dep_id = member["deployment_id"]
                        self.violation(
                            dep_id,
                            f"group member: {self.describe(dep_id)}",
                            kind="not-ended",
                        )
            else:
                self.check_group(shown, self.group_action.op, self.group_action.action)

    def until_gone(self, dep_id: str, timeout: float) -> bool:
        """Whether the deployment is removed within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.sw.show(dep_id)
            except exceptions.DeploymentNotFound:
                return True
            time.sleep(1)
        return False

    def describe(self, dep_id: str) -> str:
        """A deployment as it stands, with its flows (the stranded ones
        have none)."""
        try:
            dep = self.sw.show(dep_id)
        except exceptions.DeploymentNotFound:
            return "deployment gone"
        rows = self.sw.list_flows(dep_id)
        flows = ", ".join(
            f"{r.kind} flow {r.id} {r.state} owner={r.owner} "
            f"takeovers={r.takeovers} note={r.note!r}"
            for r in rows
        )
        return (
            f"{dep.status} {dep.action} generation {dep.generation} "
            f"({dep.status_reason!r}); "
            + (flows or "NO FLOW: nothing will ever end it")
        )

    def finish(self) -> None:
        """Undeploy what is left, delete the servers, check the records."""
        with self._lock:
            left = [d for d in self.mine]
        members = self.group_members()
        for dep_id in left:
            try:
                if self.sw.show(dep_id).status == states.IN_PROGRESS:
                    self.sw.cancel(dep_id, "chaos soak: not ended")
            except Exception as exc:
                self.log(f"cancel {dep_id}: {exc!r}")
        finals: list[Action] = []
        for dep_id in left:
            last = self.last_action(dep_id)
            final = Action(last.op if last else "?", "undeploy", model.DELETE, dep_id)
            final.runs_hook = dep_id not in self.triggered and last is not None
            final.expect = "GONE"
            finals.append(final)
            with self._lock:
                self.actions.append(final)

        def undeploy(action: Action) -> None:
            try:
                self.sw.undeploy(action.deployment_id, wait_timeout=WAIT_TIMEOUT)
                action.ended = "GONE"
            except exceptions.WaitTimeout as exc:
                action.ended = "late"  # posted: its hook runs all the same
                self.slow(action.deployment_id, f"final undeploy: {exc}")
                gone = self.until_gone(action.deployment_id, WAIT_TIMEOUT)
                if not gone:
                    self.violation(
                        action.deployment_id,
                        f"final undeploy not ended {2 * WAIT_TIMEOUT} s after "
                        f"its call: {self.describe(action.deployment_id)}",
                        kind="not-ended",
                    )
            except exceptions.FlowError as exc:
                action.ended = "late"  # posted: its hook runs all the same
                self.violation(
                    action.deployment_id,
                    f"final undeploy did not end: {type(exc).__name__}: {exc}; "
                    + self.describe(action.deployment_id),
                    kind="not-ended",
                )
            except Exception as exc:
                self.violation(
                    action.deployment_id,
                    f"final undeploy raised {type(exc).__name__}: {exc}",
                    kind="raised",
                )

        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            list(pool.map(undeploy, finals))
        self.log(f"undeployed the {len(finals)} deployments left")
        if self.group_id:
            try:
                gone = self.sw.delete_group(
                    self.group_id,
                    policy={"max_concurrency": len(self.servers)},
                    wait_timeout=WAIT_TIMEOUT,
                )
                self.log("group deleted")
                if gone is not None:
                    self.violation(
                        self.group_id,
                        f"group delete: {gone['status_reason']}",
                        kind="raised",
                    )
            except Exception as exc:
                self.violation(
                    self.group_id, f"group delete raised {exc!r}", kind="raised"
                )
        self.check_flows()
        self.log("flows and jobs checked")
        self.check_hooks(members)
        every = {a.deployment_id for a in self.actions if a.deployment_id} | members
        self.check_leaks(every)
        self.check_processes()

    def check_flows(self) -> None:
        deadline = time.monotonic() + self.claim_expiry + 20
        while self.sw.list_flows() and time.monotonic() < deadline:
            time.sleep(0.5)
        for row in self.sw.list_flows():
            self.violation(
                row.deployment_id,
                f"{row.kind} flow {row.id} left {row.state} owner={row.owner} "
                f"takeovers={row.takeovers} note={row.note!r}",
                kind="flow-left",
            )
        board = self.setup.board()
        try:
            for job in board.jobs():
                self.violation(
                    "",
                    f"job left on the board: {job.name} {job.details}",
                    kind="flow-left",
                )
        finally:
            board.close()

    def check_hooks(self, members: set[str]) -> None:
        """Each action's hook ran once (and ended, unless told to fail)."""
        time.sleep(2)  # agents poll on: a hook run twice would show now
        started: collections.Counter[tuple[str, str]] = collections.Counter()
        ended: collections.Counter[tuple[str, str]] = collections.Counter()
        for line in self.runs.read_text().splitlines():
            parts = line.split()
            if len(parts) < 4:
                continue
            count = started if parts[3] == "start" else ended
            count[(parts[0], parts[1])] += 1
        wanted: dict[tuple[str, str], Action] = {}
        for action in self.actions:
            if action.kind == "group" or not action.runs_hook:
                continue
            if action.ended in (None, "refused"):
                continue  # reported already
            wanted[(action.op, action.action)] = action
        redeployed = any(
            a.kind == "group" and a.op == "g2" and a.ended != "refused"
            for a in self.actions
        )
        last = "g2" if redeployed else "g1"
        group_ops = {(f"g1-m{i}", "CREATE") for i in range(len(self.servers))}
        group_ops |= {(f"{last}-m{i}", "DELETE") for i in range(len(self.servers))}
        if redeployed:
            group_ops |= {(f"g2-m{i}", "UPDATE") for i in range(len(self.servers))}
        for key in sorted(set(started) | set(wanted)):
            if key in group_ops:
                continue
            asked = wanted.get(key)
            dep_id = asked.deployment_id if asked else ""
            n = started[key]
            if asked is None:
                self.violation(
                    "",
                    f"hook {key[0]} {key[1]} ran {n} times, asked never",
                    kind="hook",
                )
            elif n != 1:
                self.violation(
                    dep_id, f"hook {key[0]} {key[1]} ran {n} times", kind="hook"
                )
            elif asked.expect != states.FAILED and ended[key] != 1:
                self.violation(
                    dep_id, f"hook {key[0]} {key[1]} started, never ended", kind="hook"
                )
        for key in sorted(group_ops):
            if started[key] != 1:
                self.violation(
                    "",
                    f"group hook {key[0]} {key[1]} ran {started[key]} times",
                    kind="hook",
                )

    def check_leaks(self, every: set[str]) -> None:
        self.log(f"{len(self.trusts)} deployments acted through a trust")
        if self.trusts and self.caller is not None:
            left = trusts_of(self.cloud, str(self.caller.user_id))
            for dep_id, trust in sorted(self.trusts.items()):
                if trust in left:
                    self.violation(dep_id, f"leaked trust {trust}", kind="leak")
        # a signal sent late (an agent's retry) may have brought a store
        # back after its undeploy: the elected watcher's next sweep (a day
        # apart here) removes it; one sweep now, as it would
        sweeper = self.sw.runner.watcher.sweeper
        late = sweeper.sweep()
        self.log(f"stores late signals brought back, swept: {len(late)}")
        # a step paused past its fence may have made a stack user again
        # after its deployment was undeployed: that sweep removes it too
        again = sweeper.sweep_stack_users()
        self.log(f"stack users made again after their undeploy, swept: {again}")
        for kind, found in leftovers(self.sw, *every).items():
            for name in found:
                owner = next((d for d in every if d in name), "")
                self.violation(owner, f"leaked {kind[:-1]} {name}", kind="leak")
        self.keep_agent_logs()
        for server_id in self.servers:
            try:
                self.sw.delete_server(server_id)
            except Exception as exc:
                self.violation(
                    "", f"delete server {server_id} raised {exc!r}", kind="raised"
                )
        for server_id in self.servers:
            for name in channel_leftovers(self.sw, server_id, self.keys[server_id]):
                self.violation(
                    "", f"server {server_id}: channel left: {name}", kind="leak"
                )

    def keep_agent_logs(self) -> None:
        """Copy the agents' logs before their servers (and logs) go."""
        kept = self.folder / "agent-logs"
        kept.mkdir(exist_ok=True)
        for log in (self.folder / "nova" / "agents").glob("*/agent.log"):
            shutil.copy(log, kept / f"{log.parent.name}.log")

    def check_processes(self) -> None:
        for proc in self.cluster.procs:
            for log, thread, last in proc.deaths():
                self.violation(
                    "",
                    f"{proc.name}: thread {thread} died ({last}), see {log}",
                    kind="thread-died",
                )
