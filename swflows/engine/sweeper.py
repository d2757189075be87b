"""Sweeping what no flow or server needs any more.

Every ``sweep_interval`` the elected watcher removes signal stores no flow
waits on: a TempURL PUT or a queue post sent after its deployment ended
recreates a store nobody would read.  swflows' own account is listed, and
the account of every project with a live trust, through that trust (a
deployment made with its caller's token keeps its store there).  Only
stores of deployments in its own database are swept, never those of
another installation sharing the account.  The same sweep removes
metadata objects and queues that carry this installation's owner tag and
that no server of its store has owned at any sweep for
``channel_sweep_grace`` seconds (a crash, or a version before unenroll
closed its race, left them).  A late signal can also bring back the store
of a deployment already deleted: the store remembers deleted deployments
past their signal URLs' expiry, and such stores are swept too (in swflows'
own account: a deleted deployment's trust into its project is gone), and
the stack users and projects of deployments deleted lately are removed
(a step paused past its fence made one again, see
:meth:`Sweeper.sweep_stack_users`), the deleted deployments whose time has
passed are forgotten, and the
results sent to outside callers once kept long enough, with their trusts
(:mod:`swflows.engine.outbox`).  And it lets
go of the Keystone trusts (with their owner rows) nothing needs any
more, once seen unneeded for :data:`TRUST_GRACE` seconds (see
:func:`swflows.trusts.unneeded`): a runner that stopped between a revert
and letting go of the trust, or a process that died holding a pending
result's trust.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from swflows import exceptions, failpoints, metadata, stack_users, trusts
from swflows import transport_names as names
from swflows.engine import liveness as loops
from swflows.engine.outbox import Outbox
from swflows.engine.reconciler import Reconciler
from swflows.persistence import flow_registry as flow_rows
from swflows.services import Services
from swflows.transports import owner
from swflows.transports.base import (
    ConfigTransport,
    FoundChannel,
    SignalRef,
    SignalTransport,
)

LOG = logging.getLogger(__name__)

#: transports whose stores a late signal can bring back (swept)
SWEPT_TRANSPORTS = (names.TEMP_URL_SIGNAL, names.ZAQAR_SIGNAL)

#: seconds an owner row and its trust must look unneeded before they go:
#: longer than making a deployment takes, and than reporting a result
TRUST_GRACE = 600.0

#: ids per query when the sweep looks for deployments' rows
CHUNK = 500

#: the period of a sweeper's loop made without one (``[watcher]
#: sweep_interval``'s default)
SWEEP_EVERY = 60.0

#: how a sweep reports a failure it contained: ``(step, error)``
Contain = Callable[[str, BaseException], None]


class Sweeper:
    """Removes stray signal stores and orphaned metadata channels."""

    def __init__(
        self,
        services: Services,
        registry: flow_rows.FlowRegistry,
        conf: Any,
        contain: Contain,
        *,
        loop: loops.Loop | None = None,
    ) -> None:
        self.services = services
        self.registry = registry
        self.conf = conf
        self.contain = contain
        self._last_sweep = time.monotonic()
        #: orphaned metadata channels, (transport, id) -> when first seen
        self._orphans: dict[tuple[str, str], float] = {}
        #: unneeded owner rows, (kind, id) -> when first seen
        self._unneeded: dict[tuple[str, str], float] = {}
        self.trust_grace = TRUST_GRACE
        self.reconciler = Reconciler(
            services, registry, lambda: float(self.conf.orphan_grace)
        )
        #: the results outside callers wait for (sent at every cycle, see
        #: :meth:`send_results`; forgotten with their trusts by the sweep)
        self.outbox = Outbox(services, registry)
        #: its health: a sweep that ran all its steps is a good iteration
        self.loop = loop or loops.Loop("sweeper", SWEEP_EVERY)

    def sweep_if_due(self) -> None:
        """Sweep stores and channels once ``sweep_interval`` has passed
        since the last time; what fails is contained."""
        clock = time.monotonic()
        if clock - self._last_sweep < float(self.conf.sweep_interval):
            return
        self._last_sweep = clock
        failed = 0
        for step, sweep in (
            ("reconciling deployments", self.reconciler.reconcile),
            ("sweeping signal stores", self.sweep),
            ("sweeping channels", self.sweep_channels),
            ("sweeping trusts", self.sweep_trusts),
            ("sweeping users", self.sweep_stack_users),
            ("forgetting the deleted", self.services.store.forget_deleted),
            ("forgetting sent results", self.outbox.forget_expired),
            (
                "forgetting kept failures",
                lambda: flow_rows.forget_kept_failures(self.registry),
            ),
        ):
            try:
                failpoints.hit(f"sweeper.{step.rpartition(' ')[2]}")
                sweep()
            except loops.FATAL:
                raise
            except BaseException as exc:
                failed += 1
                self.contain(step, exc)
        if not failed:
            self.loop.ok()

    def send_results(self) -> None:
        """Send the results of the deployments that ended (every cycle:
        one query when none waits); a failure is contained."""
        try:
            self.outbox.send_due()
        except loops.FATAL:
            raise
        except BaseException as exc:
            self.contain("sending results", exc)

    def sweep_trusts(self) -> list[tuple[str, str]]:
        """Let go of the owner rows and trusts nothing has needed since
        ``trust_grace`` seconds; ``(kind, id)`` of those let go.  One that
        cannot be deleted now (Keystone unreachable) is tried again at the
        next sweep."""
        now = time.monotonic()
        found = set(trusts.unneeded(self.services.store))
        for key in set(self._unneeded) - found:
            del self._unneeded[key]
        released = []
        for key in sorted(found):
            first = self._unneeded.setdefault(key, now)
            if now - first < self.trust_grace:
                continue
            kind, object_id = key
            try:
                trusts.let_go(self.services, kind, object_id)
            except exceptions.SwflowsError as exc:
                self.contain("sweeping trusts", exc)
                continue
            del self._unneeded[key]
            LOG.info("%s %s: its owner row and trust let go", kind, object_id)
            released.append(key)
        return released

    def sweep_stack_users(self) -> list[str]:
        """Remove the stack users and projects of deployments this store
        deleted lately; the ids of those deployments.

        A step that makes a deployment's user checks its flow's fence, then
        asks Keystone: a process paused between the two, its flow taken
        over and ended meanwhile (the deployment undeployed, its user
        removed), makes the user again when it goes on.  No fence can call
        back a request already sent; this sweep removes what it made.
        Users of a deployment this store never held are left alone (another
        installation may share the domain), and so are those of one with a
        row or an unfinished flow; the flows are read last, right before
        removing, so a deployment made again under its caller-given id keeps
        its user.  One that cannot be removed now is tried at the next sweep.
        """
        clients = self.services.clients
        if not clients.offers("stack_users"):
            return []
        users = clients.stack_users
        prefix = stack_users.PREFIX
        names = [u.name for u in users.list_users(prefix)]
        names += [p.name for p in users.list_projects(prefix)]
        named = {
            deployment_id
            for name in names
            if (deployment_id := stack_users.deployment_of(name)) is not None
        }
        store = self.services.store
        ordered = sorted(named)
        rowless = named.difference(
            *(
                store.generations(ordered[i : i + CHUNK])
                for i in range(0, len(ordered), CHUNK)
            )
        )
        gone = {d for d in rowless if store.deleted_generation(d) is not None}
        if gone:
            gone -= {row.deployment_id for row in self.registry.find()}
        removed: list[str] = []
        for deployment_id in sorted(gone):
            try:
                stack_users.remove_stack_user(self.services, deployment_id)
            except exceptions.SwflowsError as exc:  # that one only
                self.contain(f"sweeping users: {deployment_id}", exc)
                continue
            LOG.warning(
                "removed the stack user of deployment %s, deleted before it "
                "was made again",
                deployment_id,
            )
            removed.append(deployment_id)
        return removed

    def sweep(self) -> list[str]:
        """Remove signal stores no unfinished flow can read; their keys.

        swflows' own account is listed, then the account of every project
        with a live trust (a deployment made with its caller's token keeps
        its store there, see :mod:`swflows.trusts`), once per transport,
        through one trust of that project, which also removes its strays.
        A failure in one account is contained: the others go on.
        """
        clients = self.services.clients
        offered = {
            names.TEMP_URL_SIGNAL: clients.offers("object_store"),
            names.ZAQAR_SIGNAL: clients.offers("messaging"),
        }
        swept = [name for name in SWEPT_TRANSPORTS if offered[name]]
        if not swept:
            return []
        transports = {
            name: self.services.signal_transport(
                name, self.services.signal_options(name)
            )
            for name in swept
        }
        removed: list[str] = []
        for project, trust_id in [(None, None), *self._project_trusts()]:
            where = "" if project is None else f" of project {project}"
            try:
                services = self.services.for_trust(trust_id)
            except Exception as exc:
                self.contain(f"sweeping signal stores{where}", exc)
                continue
            for name, transport in transports.items():
                removed += self._sweep_account(
                    f"{name} stores{where}", transport, services
                )
        if removed:
            LOG.info("removed %d signal store(s) no flow waits on", len(removed))
        return removed

    def _project_trusts(self) -> list[tuple[str, str]]:
        """(project id, one of its live trusts) of the projects whose
        accounts hold this installation's signal stores; none when no
        ``[trustee]`` is configured to act through them."""
        if self.services.clients.trustee is None:
            return []
        try:
            found = trusts.trusting_projects(self.services.store)
        except Exception as exc:
            self.contain("listing projects' trusts", exc)
            return []
        return sorted(found.items())

    def _sweep_account(
        self, what: str, transport: SignalTransport, services: Services
    ) -> list[str]:
        """Remove the strays among one account's stores (``services``
        acting in it); their keys."""
        try:
            # stores first, flows second: a store made after this listing
            # belongs to a flow whose row is already written
            existing = transport.existing_stores(services)
            if not existing:
                return []
            live = {row.deployment_id for row in self.registry.find()}
        except Exception as exc:
            self.contain(f"sweeping {what}", exc)
            return []
        removed: list[str] = []
        for key, store in existing.items():
            try:
                if self._stray(key, live):
                    transport.delete_store(services, store)
                    removed.append(key)
            except Exception as exc:  # that store only: the others go on
                self.contain(f"sweeping {what}: {key}", exc)
        return removed

    def _stray(self, key: str, live: set[str]) -> bool:
        """Whether a store is this installation's, and nothing will read it.

        A store of a deployment this database does not hold is left alone:
        another installation sharing the Swift account or Zaqar project may
        be waiting on it; unless this database deleted it lately (and
        remembers it, see :meth:`swflows.persistence.deployments.
        DeploymentRows.deleted_generation`).
        """
        ref = _ref_of(key)
        if ref is None or ref.deployment_id in live:
            return False
        store = self.services.store
        try:
            deployment = store.get_deployment(ref.deployment_id)
        except exceptions.DeploymentNotFound:
            # deleted here lately: a late signal brought its store back
            return store.deleted_generation(ref.deployment_id) is not None
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


__all__ = ["SWEPT_TRANSPORTS", "Sweeper", "sweep_plan"]
