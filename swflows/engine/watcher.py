"""The signal watcher: one thread per runner looks after every parked flow.

Each cycle reads the parked flows with their deployments' status in one
query, then asks each signal transport about all its stores at once (for
TEMP_URL_SIGNAL, one container listing per container, and a GET only for an
object whose ETag moved).  A flow may go on when:

- its deployment ended by other means (a signal pushed through the API, a
  cancel, another watcher);
- its final signal landed (recorded here, once: the deployment row's
  compare-and-set lets only the first outcome in);
- its deadline passed (FAILED, kind ``timeout``), or its delivery deadline
  passed with no sign that the server picked it up (FAILED, kind
  ``never_picked_up``);
- Nova deleted its server or reports it in ERROR (FAILED, kind
  ``server_gone``), for servers Nova is known to hold: one server listing
  at most every ``SERVER_CHECK_INTERVAL`` seconds, whatever the number of
  flows;
- it is a custom flow asked to cancel (FAILED, kind ``cancelled``, if the
  canceller had not ended it yet).

A "started" progress signal, or the server reading its metadata through the
API, counts as picked up.  Every ``sweep_interval`` the watcher also
removes signal stores no flow waits on: a TempURL PUT or a queue post sent
after its deployment ended recreates a store nobody would read.  Only
stores of deployments in its own database are swept, never those of
another installation sharing the account.  The same sweep removes
metadata objects and queues that carry this installation's owner tag and
that no server of its store has owned at any sweep for
``channel_sweep_grace`` seconds (a crash, or a version before unenroll
closed its race, left them).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from swflows import exceptions, signals, states
from swflows.persistence import flows as flow_rows
from swflows.services import Services
from swflows.tasks import enrollment, metadata
from swflows.tasks import signal as signal_tasks
from swflows.transports import names, owner
from swflows.transports.base import (
    ConfigTransport,
    FoundChannel,
    SignalRead,
    SignalRef,
)

if TYPE_CHECKING:
    from swflows.engine.runner import Runner

LOG = logging.getLogger(__name__)

#: transports whose stores a late signal can bring back (swept)
SWEPT_TRANSPORTS = (names.TEMP_URL_SIGNAL, names.ZAQAR_SIGNAL)
#: seconds between two looks at Nova for deleted or broken servers
SERVER_CHECK_INTERVAL = 2.0


def waiting_of(services: Services, engine: Any, atom: Any) -> dict[str, Any]:
    """What a flow parked before ``atom`` waits for: the stored values the
    wait step itself is bound to (a composed flow holding several waits
    keeps each one's under names of its own)."""
    storage = engine.storage
    if getattr(atom, "rebind", None) is not None:
        value = storage.fetch_mapped_args(
            atom.rebind, atom_name=atom.name, optional_args=atom.optional
        ).__getitem__
    else:
        value = storage.fetch
    deployment_id = str(value("deployment_id"))
    generation = int(value("generation"))
    timeout = int(value("timeout"))
    started = float(value("action_started"))
    store = dict(value("signal_store") or {})
    delivery = int(services.conf.delivery_timeout or 0)
    return {
        "transport": atom.transport_name,
        "options": dict(atom.transport_options),
        "store": store,
        "deployment_id": deployment_id,
        "generation": generation,
        "timeout": timeout,
        "deadline": started + timeout,
        "pickup_deadline": started + delivery if 0 < delivery < timeout else None,
        "delivery_timeout": delivery,
        "picked_up": False,
        "seen": None,
    }


class Watcher:
    """Checks every parked flow, and resumes those that may go on."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.services = runner.services
        self.conf = runner.services.conf.watcher
        self._wake = threading.Event()
        self._last_sweep = time.monotonic()
        self._last_takeover = time.monotonic()
        self._last_server_check = -SERVER_CHECK_INTERVAL
        self.server_check_interval = SERVER_CHECK_INTERVAL
        #: orphaned metadata channels, (transport, id) -> when first seen
        self._orphans: dict[tuple[str, str], float] = {}
        #: cycles run, and flows resumed (for tests and status)
        self.cycles = 0
        self.resumed = 0

    def wake(self) -> None:
        self._wake.set()

    def run_forever(self) -> None:
        failures = 0
        while not self.runner.stopping:
            try:
                self.cycle()
                failures = 0
            except Exception:
                failures += 1
                LOG.exception("signal watcher cycle failed (%d in a row)", failures)
            self._wake.wait(self._delay(failures))
            self._wake.clear()

    def _delay(self, failures: int) -> float:
        interval = float(self.conf.poll_interval)
        if failures:
            interval = min(
                interval * float(self.conf.backoff_multiplier) ** failures,
                float(self.conf.max_poll_interval),
            )
        jitter = float(self.conf.poll_jitter)
        return interval * (1 + random.uniform(-jitter, jitter))

    # -- one cycle ----------------------------------------------------------
    def cycle(self) -> list[str]:
        """Look once at every parked flow; the ids of those resumed."""
        self.cycles += 1
        now = time.time()
        ready = []
        waiting: list[flow_rows.FlowRow] = []
        for row in self.runner.registry.parked():
            if self._ended(row) or self._cancel_asked(row):
                ready.append(row.id)
            else:
                waiting.append(row)
        gone = self._servers_gone(waiting)
        for row, read in self._observe(waiting):
            if self._check(row, read, now) or self._gone(row, gone):
                ready.append(row.id)
        resumed = [flow_id for flow_id in ready if self.runner.resume_parked(flow_id)]
        self.resumed += len(resumed)
        self._housekeeping()
        return resumed

    @staticmethod
    def _ended(row: flow_rows.FlowRow) -> bool:
        waiting = row.waiting or {}
        return (
            row.deployment_status != states.IN_PROGRESS
            or row.deployment_generation != waiting.get("generation")
        )

    def _cancel_asked(self, row: flow_rows.FlowRow) -> bool:
        """End the wait of a parked custom flow asked to cancel (whoever
        asked, or parked it, may have died before ending it); whether asked."""
        note = row.note or ""
        if row.kind != flow_rows.CUSTOM or not note.startswith(flow_rows.CANCEL_NOTE):
            return False
        generation = int((row.waiting or {})["generation"])
        signal_tasks.record_outcome(
            self.services,
            row.deployment_id,
            generation,
            signals.cancelled_outcome(note),
        )
        return True

    def _observe(
        self, rows: Iterable[flow_rows.FlowRow]
    ) -> list[tuple[flow_rows.FlowRow, SignalRead | None]]:
        """Each row with its store's read (None: nothing to read)."""
        groups: dict[tuple[str, str], list[flow_rows.FlowRow]] = {}
        out: list[tuple[flow_rows.FlowRow, SignalRead | None]] = []
        for row in rows:
            waiting = row.waiting or {}
            if not waiting.get("store"):
                out.append((row, None))
                continue
            key = (
                waiting["transport"],
                json.dumps(waiting.get("options"), sort_keys=True),
            )
            groups.setdefault(key, []).append(row)
        for (name, options), members in groups.items():
            transport = self.services.signal_transport(name, json.loads(options))
            if not transport.pulled:
                out.extend((row, None) for row in members)
                continue
            stores = {row.id: row.waiting["store"] for row in members if row.waiting}
            known = {row.id: (row.waiting or {}).get("seen") for row in members}
            try:
                reads = transport.observe(self.services, stores, known)
            except exceptions.SwflowsError as exc:
                # the service is down: deadlines still count
                LOG.warning("could not read %s signals: %s", name, exc)
                reads = {}
            out.extend((row, reads.get(row.id)) for row in members)
        return out

    def _check(
        self, row: flow_rows.FlowRow, read: SignalRead | None, now: float
    ) -> bool:
        """Apply what was seen of one parked flow; whether it may go on."""
        waiting = dict(row.waiting or {})
        deployment_id = row.deployment_id
        generation = int(waiting["generation"])
        if (
            read is not None
            and read.payload is not None
            and not (read.version and read.version == waiting.get("seen"))
        ):
            deployment = self.services.store.get_deployment(deployment_id)
            outcome = signal_tasks.outcome_from_payload(
                self.services, deployment, read.payload
            )
            if outcome is not None:
                signal_tasks.record_outcome(
                    self.services, deployment_id, generation, outcome
                )
                return True
            # a "started" progress signal: the server picked it up
            updated = {**waiting, "picked_up": True, "seen": read.version}
            self.runner.registry.update_waiting(row.id, updated, expected=waiting)
            waiting = updated
        outcome = None
        if now >= float(waiting["deadline"]):
            outcome = signals.timeout_outcome(int(waiting["timeout"]))
        elif (
            waiting.get("pickup_deadline") is not None
            and not waiting.get("picked_up")
            and now >= float(waiting["pickup_deadline"])
        ):
            outcome = signals.never_picked_up_outcome(int(waiting["delivery_timeout"]))
        if outcome is None:
            return False
        signal_tasks.record_outcome(self.services, deployment_id, generation, outcome)
        return True

    def _servers_gone(self, rows: list[flow_rows.FlowRow]) -> dict[str, str]:
        clock = time.monotonic()
        if not rows or clock - self._last_server_check < self.server_check_interval:
            return {}
        self._last_server_check = clock
        return enrollment.server_gone_check(
            self.services, {row.server_id for row in rows}
        )

    def _gone(self, row: flow_rows.FlowRow, gone: dict[str, str]) -> bool:
        """Fail a flow whose server Nova deleted or broke; whether it did."""
        if row.server_id not in gone:
            return False
        outcome = signals.server_gone_outcome(row.server_id, gone[row.server_id])
        generation = int((row.waiting or {})["generation"])
        signal_tasks.record_outcome(
            self.services, row.deployment_id, generation, outcome
        )
        return True

    # -- housekeeping -------------------------------------------------------
    def _housekeeping(self) -> None:
        clock = time.monotonic()
        runner_conf = self.services.conf.runner
        if (
            runner_conf.resume_on_start
            and clock - self._last_takeover >= self.runner.lease_seconds
        ):
            self._last_takeover = clock
            self.runner.resume_interrupted()
        if clock - self._last_sweep >= float(self.conf.sweep_interval):
            self._last_sweep = clock
            self.sweep()
            self.sweep_channels()

    def sweep(self) -> list[str]:
        """Remove signal stores no unfinished flow can read; their keys."""
        removed: list[str] = []
        clients = self.services.clients
        offered = {
            names.TEMP_URL_SIGNAL: clients.offers("object_store"),
            names.ZAQAR_SIGNAL: clients.offers("messaging"),
        }
        for name in SWEPT_TRANSPORTS:
            if not offered[name]:
                continue
            transport = self.services.signal_transport(
                name, self.services.signal_options(name)
            )
            try:
                # stores first, flows second: a store made after this listing
                # belongs to a flow whose row is already written
                existing = transport.existing_stores(self.services)
                if not existing:
                    continue
                live = {row.deployment_id for row in self.runner.registry.find()}
                for key, store in existing.items():
                    if self._stray(key, live):
                        transport.delete_store(self.services, store)
                        removed.append(key)
            except exceptions.SwflowsError as exc:
                LOG.warning("could not sweep %s stores: %s", name, exc)
        if removed:
            LOG.info("removed %d signal store(s) no flow waits on", len(removed))
        return removed

    def _stray(self, key: str, live: set[str]) -> bool:
        """Whether a store is this installation's, and nothing will read it.

        A store of a deployment this database does not hold is left alone:
        another installation sharing the Swift account or Zaqar project may
        be waiting on it.
        """
        ref = _ref_of(key)
        if ref is None or ref.deployment_id in live:
            return False
        try:
            deployment = self.services.store.get_deployment(ref.deployment_id)
        except exceptions.DeploymentNotFound:
            return False
        return deployment.is_terminal or deployment.generation != ref.generation

    def sweep_channels(self) -> list[str]:
        """Remove metadata channels no server of the store owns; their ids.

        Only channels tagged with this installation's owner tag are
        considered (untagged ones too with ``sweep_untagged_channels``),
        and one goes only once every sweep for ``channel_sweep_grace``
        seconds found it unowned, so an enrollment that has made its channel
        and not recorded it yet keeps it.
        """
        grace = float(self.conf.channel_sweep_grace)
        untagged = bool(self.conf.sweep_untagged_channels)
        mine = owner.tag(self.services)
        now = time.monotonic()
        listed: list[tuple[str, ConfigTransport, dict[str, FoundChannel]]] = []
        failed: set[str] = set()
        for name, transport in self._channel_transports():
            try:
                listed.append(
                    (name, transport, transport.existing_channels(self.services))
                )
            except exceptions.SwflowsError as exc:
                LOG.warning("could not list %s channels: %s", name, exc)
                failed.add(name)
        # channels first, servers second: a channel recorded after its
        # listing is owned here
        owned = self._owned_channels() if any(found for *_, found in listed) else {}
        # a listing that failed keeps its orphans' clocks
        orphans = {key: t for key, t in self._orphans.items() if key[0] in failed}
        removed: list[tuple[str, str]] = []
        for name, transport, existing in listed:
            due, waiting = sweep_plan(
                existing,
                {cid for (n, cid) in owned if n == name},
                mine,
                untagged=untagged,
                seen={cid: t for (n, cid), t in self._orphans.items() if n == name},
                now=now,
                grace=grace,
            )
            orphans.update(((name, cid), t) for cid, t in waiting.items())
            for channel_id in due:
                try:
                    transport.remove_channel(
                        self.services, channel_id, existing[channel_id].channel
                    )
                except exceptions.SwflowsError as exc:
                    LOG.warning("could not remove channel %s: %s", channel_id, exc)
                    orphans[(name, channel_id)] = now - grace
                    continue
                removed.append((name, channel_id))
        self._orphans = orphans
        if removed:
            LOG.info("removed %d metadata channel(s) no server owns", len(removed))
            self._republish_owned(removed)
        return [channel_id for _, channel_id in removed]

    def _channel_transports(self) -> list[tuple[str, ConfigTransport]]:
        """The config transports to list: POLL_TEMP_URL in the configured
        container and in every container a server's channel is in."""
        services = self.services
        found: list[tuple[str, ConfigTransport]] = []
        if services.clients.offers("object_store"):
            containers = {str(services.conf.metadata_container)}
            for record in services.store.list_servers():
                if record.config_transport == names.POLL_TEMP_URL:
                    container = (record.channel or {}).get("container")
                    if container:
                        containers.add(str(container))
            found.extend(
                (
                    names.POLL_TEMP_URL,
                    services.config_transport(
                        names.POLL_TEMP_URL, {"container": container}
                    ),
                )
                for container in sorted(containers)
            )
        if services.clients.offers("messaging"):
            found.append(
                (names.ZAQAR_MESSAGE, services.config_transport(names.ZAQAR_MESSAGE))
            )
        return found

    def _owned_channels(self) -> dict[tuple[str, str], str]:
        """(transport, channel id) of every server's channel -> its server."""
        owned: dict[tuple[str, str], str] = {}
        for record in self.services.store.list_servers():
            if not record.config_transport or not record.channel:
                continue
            transport = self.services.config_transport(record.config_transport)
            channel_id = transport.channel_id(record.channel)
            if channel_id:
                owned[(record.config_transport, channel_id)] = record.server_id
        return owned

    def _republish_owned(self, removed: list[tuple[str, str]]) -> None:
        """Publish again to a channel a server recorded while it was being
        removed (its id enrolled again at that very moment)."""
        owned = self._owned_channels()
        for key in removed:
            server_id = owned.get(key)
            if server_id is None:
                continue
            LOG.warning("server %s took channel %s as it was swept", server_id, key[1])
            try:
                metadata.publish_server(self.services, server_id, key[0], create=False)
            except exceptions.SwflowsError as exc:
                LOG.warning("could not publish server %s again: %s", server_id, exc)


def sweep_plan(
    existing: Mapping[str, FoundChannel],
    owned: Collection[str],
    mine: str,
    *,
    untagged: bool,
    seen: Mapping[str, float],
    now: float,
    grace: float,
) -> tuple[list[str], dict[str, float]]:
    """Which listed channels to remove now, and which orphans to remember.

    A channel is an orphan when no server owns it and it carries ``mine``
    (or no tag, with ``untagged``); it is due once it has been an orphan at
    every look since ``seen`` says it first was, ``grace`` seconds ago.
    The orphans not due yet are returned with when they were first seen;
    one that is owned again, or gone, is forgotten.
    """
    due: list[str] = []
    waiting: dict[str, float] = {}
    for channel_id, found in sorted(existing.items()):
        if channel_id in owned:
            continue
        if found.owner != mine and not (untagged and found.owner is None):
            continue
        first = seen.get(channel_id, now)
        if now - first >= grace:
            due.append(channel_id)
        else:
            waiting[channel_id] = first
    return due, waiting


def _ref_of(key: str) -> SignalRef | None:
    deployment_id, _, generation = key.partition("/")
    if not deployment_id or not generation.isdigit():
        return None
    return SignalRef(deployment_id, int(generation), 0)


__all__ = ["Watcher", "sweep_plan", "waiting_of"]
