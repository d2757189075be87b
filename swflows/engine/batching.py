"""New deployments launched together, up to their park, without an engine each.

A burst of ``deploy`` flows (a fleet rollout, many embedders at once) is
launched in rounds by two threads of the runner:

1. **begin** (thread ``swflows-launch``): the round's flows get their rows
   and logbooks in one transaction, the logbooks as a new flow's (its
   inputs, each step PENDING).  Then each flow's steps before its metadata
   is published run, the same tasks with the same inputs as in an engine
   (its signal store, its derived config, its deployment's row), their
   results kept in memory.  Whoever waits for a deployment's row is told
   once it is written.
2. **park** (thread ``swflows-park``): the flows that got there meanwhile
   have their servers' metadata published, once per server for all of
   them, then are parked in one transaction, each logbook as its engine
   would have left it at its park (its steps' results, its state
   SUSPENDED), each row handed to the watcher if it is still this
   runner's.  From there on, a batched flow is any parked flow.

A flow's logbook says nothing of its steps until it parks: one killed on
the way is taken over as a new flow, whose steps find what the first
run made (they are idempotent, :mod:`swflows.tasks`).  A flow whose step
fails in a round is not failed there: it is handed to an engine of its
own, from its new logbook, which runs the steps again and fails or
reverts as any flow does (one bad input harms only itself).  A flow
whose row is another runner's is left to that runner.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import itertools
import json
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from oslo_utils import uuidutils
from taskflow import engines
from taskflow import states as tf_states
from taskflow import storage as tf_storage
from taskflow.persistence import models
from taskflow.utils import misc as tf_misc

from swflows import exceptions, failpoints, flows
from swflows.engine.driving import RECORD_RETRY_SECONDS, Claim, Driving
from swflows.engine.results import META_KEY
from swflows.engine.watcher import waiting_of
from swflows.flows import deploy
from swflows.persistence import batches, flow_registry, logbook
from swflows.services import SERVICES_KEY, Services

LOG = logging.getLogger(__name__)
_T = TypeVar("_T")
_R = TypeVar("_R")

#: the kinds of flow launched in rounds
KINDS = frozenset({deploy.NAME})
#: flows built for a plan, kept to build the next ones' logbooks from
FLOWS_KEPT = 32
#: the flows of a round whose steps run at once, and the servers of a round
#: published at once: each waits mostly on the store and the cloud
ROUND_THREADS = 4
#: the share of a flow's lease, counted from the call that wrote its row,
#: during which the row is known to be this runner's without reading it:
#: another runner takes a live runner's flow only once its lease ran out
#: (the rest is margin for the hosts' clocks)
SURE_SHARE = 0.8


@dataclasses.dataclass(eq=False)
class _Item:
    """One flow of a round."""

    flow_id: str
    kind: str
    plan: dict[str, Any]
    inputs: dict[str, Any]
    meta: dict[str, Any]
    flow: Any
    future: concurrent.futures.Future[str]
    progressed: threading.Event
    book: Any = None
    detail: Any = None
    #: its steps' atom details' ids, by name
    detail_ids: dict[str, str] = dataclasses.field(default_factory=dict)
    #: its inputs and its steps' results so far, by name
    values: dict[str, Any] = dataclasses.field(default_factory=dict)
    services: Services | None = None
    #: its row and logbook are written
    recorded: bool = False
    #: a try to write them is under way
    recording: bool = False
    #: a try to write them failed as it committed (it may have)
    committing: bool = False
    #: its caller gave up on it after tries none of which could commit
    withdrawn: bool = False
    #: why the last try to write them failed
    failure: BaseException | None = None
    #: until when (``time.monotonic``) its row is surely this runner's
    sure_until: float = 0.0
    #: the step that publishes the metadata, and the one waiting after it
    publish: Any = None
    wait: Any = None
    #: a conductor's flow: its job's claim fences it, and its end is told
    #: (its row and its inputs were written when its job was posted)
    claim: Claim | None = None

    @property
    def deployment_id(self) -> str:
        return str(self.inputs["deployment_id"])

    @property
    def server_id(self) -> str:
        return str(self.inputs["server_id"])


class Batcher:
    """Launches a runner's new deploy flows in rounds (see the module)."""

    def __init__(self, runner: Driving, size: int) -> None:
        self.runner = runner
        #: the most flows a round begins
        self.size = size
        self._new: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._ready: queue.SimpleQueue[list[_Item] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._items: dict[str, _Item] = {}
        self.spread = _Spread()
        self._parker = _Parker(self)
        self._flows: collections.OrderedDict[str, tuple[Any, Any]] = (
            collections.OrderedDict()
        )
        self._stopped = False

    # -- the callers' side --------------------------------------------------
    def launch(
        self, kind: str, plan: dict[str, Any], inputs: dict[str, Any]
    ) -> tuple[str, concurrent.futures.Future[str]] | None:
        """Queue a new flow for the next round; its id and its future.

        None when a flow ``kind`` of ``plan`` is not launched in rounds
        (only a deploy that waits for its signal is): the caller starts
        it in an engine of its own."""
        if kind not in KINDS:
            return None
        flow, steps = self._flow(kind, plan)
        if steps is None:
            return None
        flow_id = str(uuid.uuid4())
        item = _Item(
            flow_id=flow_id,
            kind=kind,
            plan=plan,
            inputs=inputs,
            meta={
                "kind": kind,
                "version": flows.VERSIONS[kind],
                "deployment_id": str(inputs["deployment_id"]),
            },
            flow=flow,
            future=concurrent.futures.Future(),
            progressed=threading.Event(),
            publish=steps[0],
            wait=steps[1],
        )
        with self._lock:  # never queued behind stop()'s end of the queue
            if self._stopped:
                raise exceptions.FlowError(None, "the runner is stopping")
            self._queue(item)
        return flow_id, item.future

    def adopt(self, flow_id: str, book: Any, detail: Any, claim: Claim) -> bool:
        """Take on a flow of a job a conductor claimed, as stored when its
        job was posted (its row, and a logbook holding only its inputs),
        for the next round; whether it was (else the caller drives it in
        an engine of its own: it is no new deploy, or a step of it ran).

        Its steps run as a new flow's would; its claim fences them
        (``claim.fence``) and ``claim.done`` is told how it left the
        round.  Its logbook gets its steps as it parks."""
        item = _claimed_item(self._flow, flow_id, book, detail, claim)
        if item is None:
            return False
        with self._lock:
            if self._stopped or flow_id in self._items:
                return False
            claim.adopted = True
            self._queue(item)
        return True

    def _queue(self, item: _Item) -> None:
        """Queue ``item`` for the next round (``self._lock`` held)."""
        item.future = self.runner._future(item.flow_id)
        self._items[item.flow_id] = item
        if not self._threads:
            self._start()
        with self.runner._lock:
            self.runner._launching.add(item.flow_id)
        self._new.put(item)

    def holds(self, flow_id: str) -> bool:
        """Whether a round has ``flow_id`` now."""
        with self._lock:
            return flow_id in self._items

    def progress_of(self, flow_id: str) -> threading.Event | None:
        """Set once the flow's deployment row is written (or it ended)."""
        with self._lock:
            item = self._items.get(flow_id)
        return None if item is None else item.progressed

    def unrecorded(self, flow_id: str) -> bool:
        """Whether the flow waits for its round to write its row."""
        with self._lock:
            item = self._items.get(flow_id)
        return item is not None and not item.recorded

    def launching(self, deployment_id: str) -> bool:
        """Whether a flow of ``deployment_id`` waits for its round to write
        its row (it is launched: nothing else may launch it again)."""
        with self._lock:
            return any(
                item.deployment_id == deployment_id and not item.recorded
                for item in self._items.values()
            )

    def withdraw(
        self, flow_id: str, error: Callable[[BaseException], BaseException]
    ) -> BaseException | None:
        """Drop a flow whose tries to record it failed, none as it committed
        (its caller gives up on it through an outage): it ends with
        ``error(why the last try failed)``, returned, and is never recorded.
        None when it may be recorded (a try is under way, or one failed as
        it committed), when it waits for its first try (it runs later), or
        when it is not launched here."""
        with self._lock:
            item = self._items.get(flow_id)
            if (
                item is None
                or item.failure is None
                or item.recorded
                or item.recording
                or item.committing
            ):
                return None
            item.withdrawn = True
        made = error(item.failure)
        self._fail(item, made)
        return made

    def stop(self, by: float | None = None) -> None:
        """Finish the rounds under way; fail the flows not yet recorded."""
        with self._lock:
            self._stopped = True
            threads = list(self._threads)
        self._new.put(None)
        for thread in threads:
            left = 10.0 if by is None else max(0.1, by - time.monotonic())
            thread.join(timeout=left)

    # -- rounds ---------------------------------------------------------------
    def _start(self) -> None:
        for target, name in (
            (self._begin_forever, "swflows-launch"),
            (self._park_forever, "swflows-park"),
        ):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def _flow(self, kind: str, plan: dict[str, Any]) -> tuple[Any, Any]:
        """The graph of ``kind`` for ``plan``, and its publishing step and
        wait (None: not launched in rounds), built once per plan: its steps
        are run here, never by an engine (an engine gets a graph of its
        own)."""
        key = json.dumps([kind, plan], sort_keys=True, default=repr)
        with self._lock:
            kept = self._flows.get(key)
            if kept is not None:
                self._flows.move_to_end(key)
                return kept
        flow = flows.FACTORIES[kind](**plan)
        found = (flow, _steps(flow))
        with self._lock:
            self._flows[key] = found
            while len(self._flows) > FLOWS_KEPT:
                self._flows.popitem(last=False)
        return found

    def _take(self, into: queue.SimpleQueue[Any], most: int) -> list[Any] | None:
        """What ``into`` holds: at least one, waiting for it; None once stopped."""
        first = into.get()
        if first is None:
            return None
        taken = [first]
        while len(taken) < most:
            try:
                more = into.get_nowait()
            except queue.Empty:
                break
            if more is None:
                into.put(None)  # seen again by the next take
                break
            taken.append(more)
        return taken

    def _begin_forever(self) -> None:
        while True:
            items = self._take(self._new, self.size)
            if items is None:
                self._ready.put(None)
                return
            if self.runner.stopping:
                for item in items:
                    self._fail(
                        item, exceptions.FlowError(None, "the runner is stopping")
                    )
                continue
            try:
                ready = self._begin(items)
            except Exception as exc:  # contained: the next round goes on
                LOG.exception("a round of %d new flows failed", len(items))
                for item in items:
                    if item.flow_id not in self._items_now():
                        continue
                    if item.recorded:  # an engine of its own takes it on
                        self._drive(item)
                    else:
                        self._fail(item, exc)
                continue
            if ready:
                self._ready.put(ready)

    def _park_forever(self) -> None:
        while True:
            rounds = self._take(self._ready, 1 << 30)
            if rounds is None:
                return
            items = [item for ready in rounds for item in ready]
            try:
                self._parker.park(items)
            except (Exception, logbook.FlowFenced):  # contained: each flow
                # goes on in an engine of its own
                LOG.exception("parking %d new flows failed", len(items))
                for item in items:
                    if item.flow_id in self._items_now():
                        self._drive(item)

    # -- begin ----------------------------------------------------------------
    def _begin(self, items: list[_Item]) -> list[_Item]:
        new = [item for item in items if item.claim is None]
        going = set(self._record_new(new) if new else ())
        begun = [item for item in items if item.claim is not None or item in going]
        # one server's flows in turn, servers at once: each deployment's row
        # locks its server's until its commit, so two flows of one server
        # side by side would only wait on each other (a burst to a few
        # servers held the round to one flow at a time)
        by_server: dict[str, list[_Item]] = {}
        for item in begun:
            by_server.setdefault(item.server_id, []).append(item)
        groups = list(by_server.values())
        ready: list[_Item] = []
        for group, ran in zip(
            groups, self.spread.map(self._run_in_turn, groups), strict=True
        ):
            ready.extend(
                item for item, went_on in zip(group, ran, strict=True) if went_on
            )
        return ready

    def _run_in_turn(self, items: list[_Item]) -> list[bool]:
        """:meth:`_run_before_publish` of one server's flows, one by one."""
        return [self._run_before_publish(item) for item in items]

    def _record_new(self, items: list[_Item]) -> list[_Item]:
        """Write the rows and logbooks of a round's new flows; those written
        (the others fail)."""
        runner = self.runner
        for item in items:
            _new_logbook(item)
        try:
            return list(
                runner.through_outage(
                    lambda: _record(runner, self._lock, items), "record new flows"
                )
            )
        except Exception as exc:
            for item in items:
                if item.withdrawn:
                    continue
                if item.committing:  # it may be recorded: taken over if so
                    self._fail(
                        item,
                        exceptions.WaitTimeout(
                            item.deployment_id, RECORD_RETRY_SECONDS, started=False
                        ),
                    )
                else:
                    self._fail(item, exc)
            return []

    def _items_now(self) -> set[str]:
        with self._lock:
            return set(self._items)

    def _run_before_publish(self, item: _Item) -> bool:
        """Run the flow's steps before its metadata is published; whether it
        goes on to its park (else it was handed to an engine, or lost)."""
        runner = self.runner
        try:
            fence = _fence(runner, item)
            services = runner.services_for(item.deployment_id)
            item.services = services.fenced(fence)
            item.values[SERVICES_KEY] = item.services
            for atom in item.flow:
                if atom is item.publish:
                    return True
                fence()  # as an engine checks, before each step
                _run_step(item, atom)
        except logbook.FlowFenced as exc:
            LOG.warning("%s", exc)
            self._lose(item)
        except Exception as exc:
            LOG.info(
                "flow %s: %s; its own engine runs it again from its start",
                item.flow_id,
                exc,
            )
            self._drive(item)
        return False

    # -- ends -----------------------------------------------------------------
    def _forget_item(self, item: _Item, *, parked: bool = False) -> None:
        """The round lets go of ``item``: it parked, or it is left to the
        runner that holds its row now."""
        try:
            if item.claim is not None:
                # its job settled while a round still holds it: a job claimed
                # for it meanwhile is given back, never held in its place
                item.claim.done(parked)
        finally:
            self._release(item)
            item.progressed.set()

    def _release(self, item: _Item) -> None:
        """No round holds ``item`` any more."""
        with self._lock:
            self._items.pop(item.flow_id, None)
        with self.runner._lock:
            self.runner._launching.discard(item.flow_id)

    def _settle(self, item: _Item) -> None:
        """Parked: the watcher has it now."""
        self._forget_item(item, parked=True)

    def _lose(self, item: _Item) -> None:
        """Its row is another runner's: left to it, from its logbook."""
        self._forget_item(item)

    def _fail(self, item: _Item, error: BaseException) -> None:
        """Never recorded: its caller gets ``error``.  A conductor's flow
        (recorded when its job was posted) is left as stored, for its job."""
        self._forget_item(item)
        if item.claim is None:
            self.runner._finish(item.flow_id, error)

    def _drive(self, item: _Item) -> None:
        """Hand the flow to an engine of its own, from its new logbook."""
        runner = self.runner
        try:
            with contextlib.closing(runner.backend.get_connection()) as conn:
                book = conn.get_logbook(item.flow_id)
            detail = book.find(item.flow_id)
            flow = flows.FACTORIES[item.kind](**item.plan)
            backend = runner.backend.fenced(item.flow_id, runner.owner)
            engine = engines.load(flow, flow_detail=detail, book=book, backend=backend)
            runner._submit(
                item.flow_id,
                engine,
                flow,
                deployment_id=item.deployment_id,
                writes=backend,
                progressed=item.progressed,
            )
            if item.claim is not None:  # the round has it no more
                item.claim.done(None)
        except Exception:
            LOG.exception(
                "flow %s could not be handed to an engine: it is taken over "
                "once its lease runs out",
                item.flow_id,
            )
            if item.claim is not None:  # its job is settled by its row
                item.claim.done(False)
        finally:
            self._release(item)


class _Spread:
    """Runs a call of each of a round's flows (their steps) or servers (their
    publish) :data:`ROUND_THREADS` at once, on threads made for that call
    and gone with it: a runner holding parked flows keeps none."""

    @staticmethod
    def map(call: Callable[[_T], _R], items: list[_T]) -> list[_R]:
        """``call`` of each of ``items``, in their order."""
        if len(items) < 2:
            return [call(item) for item in items]
        with concurrent.futures.ThreadPoolExecutor(
            min(ROUND_THREADS, len(items)), thread_name_prefix="swflows-round"
        ) as pool:
            return list(pool.map(call, items))


class _Parker:
    """The park of a round: its servers published, each once for all its
    flows (several servers at once), then its flows parked together."""

    def __init__(self, batcher: Batcher) -> None:
        self.batcher = batcher

    def park(self, items: list[_Item]) -> None:
        """Publish, then park, the flows of the rounds that got there: those
        whose row is another's are left to it."""
        runner = self.batcher.runner
        held = batches.holders(runner.registry, [item.flow_id for item in items])
        groups: dict[tuple[str, str, str], list[_Item]] = {}
        for item in items:
            if held.get(item.flow_id) != runner.owner:
                LOG.warning(
                    "%s",
                    logbook.FlowFenced(
                        item.flow_id, runner.owner, held.get(item.flow_id)
                    ),
                )
                self.batcher._lose(item)
                continue
            key = (
                item.server_id,
                item.publish.transport_name,
                json.dumps(item.publish.transport_options, sort_keys=True),
            )
            groups.setdefault(key, []).append(item)
        publishing = []
        published = self.batcher.spread.map(self.publish, list(groups.values()))
        for group, done in zip(groups.values(), published, strict=True):
            if done:
                publishing.extend(group)
        if not publishing:
            return
        parked_items = []
        for item in publishing:
            item.detail.state = tf_states.SUSPENDED
            waiting = waiting_of(runner.services, _Engine(item), item.wait)
            waiting["server_id"] = item.server_id
            parked_items.append((item, waiting))
        parked = runner.through_outage(
            lambda: batches.park_recorded(
                runner.registry,
                runner.backend,
                runner.owner,
                [
                    (item.flow_id, waiting, item.detail)
                    for item, waiting in parked_items
                ],
                fresh={item.flow_id for item, _ in parked_items if item.claim},
            ),
            "park new flows",
        )
        # an action that ended before its flow parked (a signal pushed, a
        # cancel) has the watcher look at once
        ended = batches.ended_among(
            runner.registry,
            {
                item.deployment_id: int(waiting["generation"])
                for item, waiting in parked_items
                if item.flow_id in parked
            },
        )
        for item, _ in parked_items:
            if item.flow_id not in parked:
                LOG.warning("flow %s: not parked: its row is another's", item.flow_id)
                self.batcher._lose(item)
                continue
            self.batcher._settle(item)
            if item.deployment_id in ended:
                runner.watcher.wake_soon(item.flow_id)

    def publish(self, group: list[_Item]) -> bool:
        """Publish the metadata of the group's server once, for all of them;
        whether it was (else each flow goes on in an engine of its own)."""
        first = group[0]
        try:
            version = first.publish.execute(**_arguments(first, first.publish))
        except logbook.FlowFenced as exc:
            LOG.warning("%s", exc)
            self.batcher._lose(first)
            for item in group[1:]:
                self.batcher._drive(item)
            return False
        except Exception as exc:
            LOG.info(
                "metadata of server %s not published (%s): its %d new flows go "
                "on in engines of their own",
                first.server_id,
                exc,
                len(group),
            )
            for item in group:
                self.batcher._drive(item)
            return False
        for item in group:
            _succeeded(item, item.publish, version)
        return True


def _record(
    runner: Driving, lock: threading.Lock, round_items: list[_Item]
) -> list[_Item]:
    """One try to write the rows and logbooks of a round's flows not
    withdrawn (``lock`` held to read that), their rows leased from now;
    those recorded.  A try after one that failed as it committed first
    looks whether that one did."""
    sent = time.monotonic()
    lease_until = time.time() + runner.lease_seconds
    with lock:
        items = [item for item in round_items if not item.withdrawn]
        for item in items:
            item.recording = True
    maybe_written = any(item.committing for item in items)

    def committing() -> None:
        for item in items:
            item.committing = True

    try:
        if items:
            failpoints.hit("launch.record")
            batches.record_new(
                runner.registry,
                runner.backend,
                [
                    flow_registry.new_row(
                        item.flow_id,
                        kind=item.kind,
                        deployment_id=item.deployment_id,
                        server_id=item.server_id,
                        owner=runner.owner,
                        lease_until=lease_until,
                    )
                    for item in items
                ],
                [item.book for item in items],
                committing=committing,
                maybe_written=maybe_written,
            )
        for item in items:
            item.recorded = True
            item.sure_until = sent + SURE_SHARE * runner.lease_seconds
    except Exception as exc:
        for item in items:
            item.failure = exc
        raise
    finally:
        with lock:
            for item in items:
                item.recording = False
    return items


def _new_logbook(item: _Item) -> None:
    """The flow's logbook as an engine's is once it began: its inputs, and
    each step PENDING (as TaskFlow's storage makes them)."""
    book = models.LogBook(
        f"swflows-{item.kind}-{item.deployment_id}", uuid=item.flow_id
    )
    detail = models.FlowDetail(item.flow.name, uuid=item.flow_id)
    book.add(detail)
    engines.save_factory_details(detail, flows.FACTORIES[item.kind], [], item.plan)
    detail.meta[META_KEY] = item.meta
    add_inputs(detail, item.inputs)
    _add_steps(item, book, detail)


def _claimed_item(
    built: Callable[[str, dict[str, Any]], tuple[Any, Any]],
    flow_id: str,
    book: Any,
    detail: Any,
    claim: Claim,
) -> _Item | None:
    """A round's item of a conductor's flow, as its job was posted: a new
    deploy whose logbook holds its inputs alone (else None).  ``built``
    gives the graph of a kind and plan, and its publishing step and wait."""
    meta = detail.meta.get(META_KEY) or {}
    kind = str(meta.get("kind"))
    plan = (detail.meta.get("factory") or {}).get("kwargs")
    atoms = list(detail)
    if (
        kind not in KINDS
        or not isinstance(plan, dict)
        or len(atoms) != 1
        or atoms[0].name != logbook.INJECTOR
        or not isinstance(atoms[0].results, dict)
    ):
        return None
    flow, steps = built(kind, plan)
    if steps is None:
        return None
    item = _Item(
        flow_id=flow_id,
        kind=kind,
        plan=plan,
        inputs=dict(atoms[0].results),
        meta=dict(meta),
        flow=flow,
        future=concurrent.futures.Future(),
        progressed=threading.Event(),
        publish=steps[0],
        wait=steps[1],
        claim=claim,
        recorded=True,
    )
    _add_steps(item, book, detail)
    return item


def add_inputs(detail: Any, inputs: dict[str, Any]) -> None:
    """A new flow's inputs in its logbook, as TaskFlow stores them."""
    injected = models.TaskDetail(logbook.INJECTOR, uuidutils.generate_uuid())
    injected.state = tf_states.SUCCESS
    injected.results = dict(inputs)
    detail.add(injected)


def _add_steps(item: _Item, book: Any, detail: Any) -> None:
    """Each step of the flow PENDING in its logbook (as TaskFlow's storage
    makes them), kept in memory with its inputs."""
    for atom in item.flow:
        step = models.TaskDetail(atom.name, uuidutils.generate_uuid())
        step.state = tf_states.PENDING
        step.version = tf_misc.get_version_string(atom)
        detail.add(step)
    item.book, item.detail = book, detail
    item.detail_ids = {step.name: step.uuid for step in detail}
    item.values = dict(item.inputs)


def _arguments(item: _Item, atom: Any) -> dict[str, Any]:
    """A step's arguments, found as TaskFlow finds them in a straight line
    of steps: its own injected values, then the flow's inputs and the
    results of the steps before it."""
    found: dict[str, Any] = {}
    for argument, name in atom.rebind.items():
        if atom.inject and name in atom.inject:
            found[argument] = atom.inject[name]
        elif name in item.values:
            found[argument] = item.values[name]
        elif argument not in atom.optional:
            raise exceptions.FlowError(None, f"{atom.name}: {name!r} is not provided")
    return found


def _run_step(item: _Item, atom: Any) -> None:
    """Run one step of a flow as its engine would, its result kept in its
    logbook in memory (SUCCESS, its progress 1.0)."""
    result = atom.execute(**_arguments(item, atom))
    _succeeded(item, atom, result)
    if getattr(atom, "writes_row", False):  # who waits for the row may look
        item.progressed.set()


def _succeeded(item: _Item, atom: Any, result: Any) -> None:
    step = item.detail.find(item.detail_ids[atom.name])
    step.put(tf_states.SUCCESS, result)
    step.meta[tf_storage.META_PROGRESS] = 1.0
    for name, index in (atom.save_as or {}).items():
        item.values[name] = result if index is None else result[index]


def _fence(runner: Driving, item: _Item) -> Any:
    """The check made right before a step of ``item`` writes outside the
    database: that its row still names ``runner``.  Within the share of
    its lease that is surely still its own (:data:`SURE_SHARE`), as a
    round's steps are, nothing needs reading; a runner paused past it
    reads its row."""
    if item.claim is not None:  # a conductor's: its job's claim decides
        return item.claim.fence
    registry, owner = runner.registry, runner.owner

    def fence() -> None:
        if time.monotonic() < item.sure_until:
            return
        holder = registry.holder(item.flow_id)
        if holder != owner:
            raise logbook.FlowFenced(item.flow_id, owner, holder)

    return fence


class _Engine:
    """What :func:`~swflows.engine.watcher.waiting_of` reads of an engine:
    its storage's arguments of a step (here, of the flow's wait)."""

    def __init__(self, item: _Item) -> None:
        self.storage = self
        self._item = item

    def fetch_mapped_args(self, *_: Any, **__: Any) -> dict[str, Any]:
        return _arguments(self._item, self._item.wait)


def _steps(flow: Any) -> tuple[Any, Any] | None:
    """A graph's step publishing the metadata and its wait right after,
    when it is a straight line of tasks through them (else None: it is
    not launched in rounds)."""
    atoms = list(flow)
    if any(hasattr(atom, "iter_links") for atom in atoms):
        return None
    for before, after in itertools.pairwise(atoms):
        if getattr(before, "publishes", False) and getattr(after, "parks", False):
            return before, after
    return None


__all__ = ["KINDS", "Batcher", "add_inputs"]
