"""Publishing a server's metadata document through its config transport."""

from __future__ import annotations

import dataclasses
import logging
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import tenacity

from swflows import bootdata, derive, exceptions, failpoints, model
from swflows import transport_names as names
from swflows.services import Services

if TYPE_CHECKING:
    from swflows.persistence.store import Store

LOG = logging.getLogger(__name__)

#: seconds a publisher keeps trying to leave the latest document published;
#: a round is only lost to a new change of the server's deployments, so
#: once the changes stop every writer finishes on its next round, however
#: many there are and however slow each round is on a loaded machine.  A
#: server many deployments are posted to at once keeps changing while they
#: are: on a 2-core machine running two 100-deployment rollouts, 120 s were
#: not enough and deployments failed on it
PUBLISH_PATIENCE = 600.0


def find_server(services: Services, server_id: str) -> Any:
    """The server's record, or None before its first deployment."""
    try:
        return services.store.get_server(server_id)
    except exceptions.ServerNotFound:
        return None


#: the channel's entry naming the agent the server runs (bootdata.AGENTS)
AGENT = bootdata.CHANNEL_AGENT


def agent_of(server: Any) -> str:
    """The agent ``server`` (its record, or None) runs (:func:`channel_agent`)."""
    if server is None:
        return bootdata.SWFLOWS_AGENT
    return channel_agent(server.channel, server.config_transport)


def channel_agent(channel: dict[str, Any] | None, transport: str | None) -> str:
    """The agent recorded in a server's channel when it was enrolled or
    booted; else Heat's agents on POLL_SERVER_HEAT, which only they read;
    else swflows' agent."""
    recorded = (channel or {}).get(AGENT)
    if recorded in bootdata.AGENTS:
        return str(recorded)
    if transport == names.POLL_SERVER_HEAT:
        return bootdata.HEAT_AGENTS
    return bootdata.SWFLOWS_AGENT


def server_agent(services: Services, server_id: str) -> str:
    """The agent the server runs (:func:`agent_of`)."""
    return agent_of(find_server(services, server_id))


@dataclasses.dataclass
class _Turns:
    """The publishes of one server in this process: one at a time, and a
    caller that a publish started since it asked has covered skips its own."""

    #: held by the caller publishing now (re-entrant: a change made while
    #: a write is under way, by the same thread, publishes in its turn)
    mutex: threading.RLock = dataclasses.field(default_factory=threading.RLock)
    #: callers that asked so far (each caller's ticket is its number)
    asked: int = 0
    #: callers inside, asking or publishing (the entry goes at 0)
    inside: int = 0
    #: the highest ticket the last successful publish covered, and its version
    covered: int = 0
    version: int = 0


class _Reads:
    """Which callers of a server the reads of one publish cover.

    A caller asks once its change is committed: the callers that asked
    before a read of the store are in what that read sees.  A try that
    found the server changed while it wrote tries again at once when a
    caller asked since its read (a change of this process moved it, and
    the next read covers that caller too), else after a random rest
    (another process is publishing it)."""

    def __init__(self, turns: _Turns) -> None:
        self._turns = turns
        #: the callers that asked before the last read
        self.covering = 0

    def reading(self) -> None:
        """Called right before the store is read."""
        with _TURNS_LOCK:
            self.covering = self._turns.asked

    def asked_since(self) -> bool:
        with _TURNS_LOCK:
            return self._turns.asked > self.covering


#: the rests between a publish's tries when another process changed the
#: server while it wrote
_CONFLICT_WAITS = tenacity.wait_random_exponential(multiplier=0.05, max=1)


def _conflict_wait(reads: _Reads) -> Callable[[Any], float]:
    def wait(state: Any) -> float:
        if reads.asked_since():
            return 0.0
        return float(_CONFLICT_WAITS(state))

    return wait


#: store -> server id -> its turns, for the servers being published to now
_TURNS: weakref.WeakKeyDictionary[Store, dict[str, _Turns]] = (
    weakref.WeakKeyDictionary()
)
_TURNS_LOCK = threading.Lock()


def publish_server(
    services: Services,
    server_id: str,
    transport: str,
    options: dict[str, Any] | None = None,
    *,
    create: bool = True,
) -> int:
    """Publish ``server_id``'s current document; return the version published.

    Callers in one process publish to a server one at a time, and a caller
    whose ask came before another's publish started is covered by it: that
    publish read the store after the caller's change was committed (a
    deployment's row is written before its metadata is published), so the
    copy it leaves published is at least as new.  The caller then returns
    that publish's version without a request of its own: ten deployments
    launched to one server at once cost one or two publishes, not ten
    racing each other.  Publishers in other processes are kept in step by
    the store's compare-and-swap (:meth:`~swflows.persistence.store.Store.
    mark_published`), as below.

    The document is read with its version, published, and then confirmed
    with a compare-and-swap; if another writer changed the server in
    between, it is read and published again, so the last copy published
    always matches the store.  The server keeps the transport it was first
    published with (or enrolled with); ``transport`` applies to new servers.

    The document carries its version as its generation
    (:data:`swflows.model.DOCUMENT_GENERATION`).  Right before its first
    write (and before making a channel) the flow's fence is checked
    (:meth:`Services.check_fence`): a publisher paused past its claim
    writes nothing, since what it read may be older than what the flow's
    new owner published.  Once it wrote, it goes on unfenced until the
    copy published is current: each later round only puts back what the
    store holds then.

    A server without a channel gets one, unless ``create`` is False (a
    removal publishes only to a channel that exists: the server may have
    been unenrolled since its deployment's row went; 0 is returned).  After
    every write the store is read again: if the server is no longer there
    (unenrolled) or no longer uses that channel (moved), what was written
    is removed, so a publish still in flight never brings back a channel
    that was removed.
    """
    with _TURNS_LOCK:
        servers = _TURNS.setdefault(services.store, {})
        turns = servers.setdefault(server_id, _Turns())
        turns.asked += 1
        turns.inside += 1
        ticket = turns.asked
    try:
        with turns.mutex:
            with _TURNS_LOCK:
                if turns.covered >= ticket:
                    return turns.version
            reads = _Reads(turns)
            version = _publish(
                services, server_id, transport, options, create=create, reads=reads
            )
            if version is None:  # no channel to publish a removal to
                return 0
            with _TURNS_LOCK:
                if reads.covering > turns.covered:
                    turns.covered, turns.version = reads.covering, version
            return version
    finally:
        with _TURNS_LOCK:
            turns.inside -= 1
            if not turns.inside:
                servers.pop(server_id, None)


def _publish(
    services: Services,
    server_id: str,
    transport: str,
    options: dict[str, Any] | None,
    *,
    create: bool,
    reads: _Reads,
) -> int | None:
    """:func:`publish_server`'s publish; None if there was no channel and
    ``create`` is False.  ``reads``: told of each read of the store."""
    store = services.store
    server = find_server(services, server_id)
    name = (server.config_transport if server else None) or transport
    config_transport = services.config_transport(name, options)
    channel = server.channel if server and server.channel is not None else None
    if channel is None:
        if not create:
            return None
        services.check_fence()
        channel = config_transport.ensure_channel(services, server_id)
        collect = config_transport.collect_config(services, channel)
        channel = {**channel, "os-collect-config": collect}
        store.set_server_channel(server_id, name, channel)

    agent = channel_agent(channel, name)
    # once this call wrote a copy it goes on until the copy published is
    # current, fenced or not: stopping would leave its own (maybe stale) copy
    wrote = False

    @tenacity.retry(
        retry=tenacity.retry_if_exception_type(exceptions.ConcurrentUpdate),
        stop=tenacity.stop_after_delay(PUBLISH_PATIENCE),
        wait=_conflict_wait(reads),
        reraise=True,
    )
    def attempt() -> int:
        nonlocal wrote
        reads.reading()
        snapshot = store.server_metadata(server_id)
        if not wrote and snapshot.published >= snapshot.version > 0:
            # another process published this version (it read the store
            # after this caller's change): what it wrote stays current
            return snapshot.version
        document = {
            "deployments": derive.for_agent(
                snapshot.deployments, heat_agents=agent == bootdata.HEAT_AGENTS
            ),
            "os-collect-config": channel.get("os-collect-config", {}),
            model.DOCUMENT_GENERATION: snapshot.version,
        }
        failpoints.hit("metadata.publish")
        if not wrote:
            services.check_fence()
        wrote = True
        config_transport.publish(services, server_id, channel, document)
        if not uses_channel(services, server_id, name, channel):
            LOG.info(
                "server %s left its %s channel while it was published to: "
                "what was written is removed",
                server_id,
                name,
            )
            withdraw(services, server_id, name, channel)
            return snapshot.version
        if not store.mark_published(server_id, snapshot.version):
            if store.server_metadata(server_id).version <= snapshot.version:
                return snapshot.version  # a concurrent publisher got there first
            raise exceptions.ConcurrentUpdate(
                f"server {server_id} changed while publishing", server_id=server_id
            )
        return snapshot.version

    return attempt()


def resources(channel: dict[str, Any] | None) -> dict[str, Any]:
    """What names a channel's resources: the channel without the section
    telling agents where to poll (a signed URL there is made anew)."""
    return {k: v for k, v in (channel or {}).items() if k != "os-collect-config"}


def uses_channel(
    services: Services, server_id: str, name: str, channel: dict[str, Any]
) -> bool:
    """Whether the store still records ``channel`` as the server's.

    Read after each write through it.  Unenroll removes the channel, then
    the row, then the channel again: a write this read finds the row for
    ended before that last removal, and a writer that finds no row removes
    what it wrote itself.
    """
    record = find_server(services, server_id)
    return (
        record is not None
        and record.config_transport == name
        and resources(record.channel) == resources(channel)
    )


def withdraw(
    services: Services, server_id: str, name: str, channel: dict[str, Any]
) -> None:
    """Remove what a publish wrote to a channel the server no longer uses.

    Only what publishing writes (the object, the queue of swflows' own
    project) is removed: a channel with a Keystone user is the enrollment's
    to remove, and a write as that user fails once it is gone.
    """
    if channel.get("user"):
        return
    try:
        services.config_transport(name).remove_channel(
            services, str(channel.get("key") or server_id), resources(channel)
        )
    except exceptions.SwflowsError as exc:
        LOG.warning(
            "could not remove the %s channel of server %s (the metadata sweep "
            "removes it): %s",
            name,
            server_id,
            exc,
        )


def withdraw_cancelled(
    services: Services,
    deployment_id: str,
    config_transport: str | None = None,
    config_options: dict[str, Any] | None = None,
) -> None:
    """Publish the server's metadata without a cancelled action's config.

    The store already leaves it out (:func:`swflows.states.withdrawn`);
    this makes the server see it.  Run by the cancel itself and again by
    the flow's wait step when it goes on, so a crash in between still
    withdraws it.  Never raises: the action's outcome stands either way,
    and a failure is logged with what to do.
    """
    try:
        server_id = services.store.get_deployment(deployment_id).server_id
    except exceptions.DeploymentNotFound:
        return  # removed, and its server republished without it
    server = find_server(services, server_id)
    if server is None:
        return
    name = server.config_transport or config_transport
    if not name:
        return
    if config_options is None or name != config_transport:
        config_options = services.config_options(name)
    try:
        publish_server(services, server_id, name, config_options)
    except Exception as exc:
        LOG.warning(
            "deployment %s was cancelled, but the metadata of server %s could "
            "not be published without it (%s); its agent may still run it: "
            "republish it ('swflows server enroll %s') once %s works again",
            deployment_id,
            server_id,
            exc,
            server_id,
            name,
        )
