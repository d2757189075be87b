"""What every signal and config transport provides.

A *signal transport* is how a server's outputs come back for one deployment
action: it makes a store (a TempURL object, a queue, or nothing), gives the
derived config the ``deploy_*`` inputs an agent needs to reach it, reads it,
and removes it.  A *config transport* is how a server's metadata document
reaches the server: a channel made once per server, published to on every
change, removed when the server leaves.

Every method that creates or deletes is idempotent: a task re-run after a
crash finds what the first run made, and removing what is gone is done.
Stores and channels are plain JSON dicts (they are task results and rows),
and hold no secret: secrets are re-derived when they are needed.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from swflows.clients.cloud import Clients
    from swflows.clients.identity import StackUser
    from swflows.persistence.store import Store

JsonDict = dict[str, Any]
InputPairs = list[tuple[str, Any]]
#: runs reads at once where it can, returning their results in order (or
#: raising the first error once all ended): the watcher's worker threads
ReadAll = Callable[[Sequence[Callable[[], "SignalRead"]]], list["SignalRead"]]


class Context(Protocol):
    """What a transport reaches at run time (:class:`swflows.services.Services`)."""

    store: Store
    conf: Any
    clients: Clients
    #: key material for values re-derived instead of stored
    secret: bytes

    @property
    def project_clients(self) -> Clients:
        """The clients of a deployment's own resources (through its trust)."""

    def check_fence(self) -> None:
        """Raise (a BaseException) when this process no longer holds the
        flow it writes for; called right before a write outside the database."""


def read_in_turn(reads: Sequence[Callable[[], SignalRead]]) -> list[SignalRead]:
    """:data:`ReadAll` one after the other, in the calling thread."""
    return [read() for read in reads]


@dataclasses.dataclass(frozen=True)
class SignalRef:
    """Names one deployment action; stores are keyed by it."""

    deployment_id: str
    generation: int
    #: seconds the action may run; stores must outlive it (plus a grace)
    timeout: int

    @property
    def key(self) -> str:
        return f"{self.deployment_id}/{self.generation}"

    def to_dict(self) -> JsonDict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: JsonDict) -> SignalRef:
        return cls(data["deployment_id"], int(data["generation"]), int(data["timeout"]))


@dataclasses.dataclass(frozen=True)
class SignalRead:
    """One look at a signal store: the raw payload, if any, and its version."""

    payload: bytes | None
    #: changes whenever the store's content changes (ETag, message id)
    version: str | None = None


class SignalTransport(abc.ABC):
    """Base of every signal transport (one module ``impl_<name>`` each)."""

    name: ClassVar[str]
    #: the agent authenticates as a Keystone stack user
    needs_stack_user: ClassVar[bool] = False
    #: the server's signal is pulled by swflows (else it is pushed to the API)
    pulled: ClassVar[bool] = True
    #: a deployment using it completes at once, without waiting
    waits: ClassVar[bool] = True

    def __init__(self, options: JsonDict | None = None) -> None:
        #: resolved settings, fixed when the flow is built (flow arguments)
        self.options = dict(options or {})

    @abc.abstractmethod
    def create_store(
        self, services: Context, ref: SignalRef, user: StackUser | None
    ) -> JsonDict:
        """Make (or find) the store for ``ref``; return what identifies it."""

    def describe_store(self, ref: SignalRef, user: StackUser | None) -> JsonDict:
        """What identifies ``ref``'s store, computed without any call.

        Stores are named from ``ref`` alone, so a revert can remove a store
        whose creation was never recorded (a crash right after the call).
        """
        return {}

    @abc.abstractmethod
    def agent_inputs(
        self,
        services: Context,
        ref: SignalRef,
        store: JsonDict,
        user: StackUser | None,
    ) -> InputPairs:
        """The ``deploy_*`` inputs that tell an agent where to signal."""

    def read(self, services: Context, store: JsonDict) -> SignalRead:
        """Look at the store once; ``payload`` is None while nothing landed.

        When several signals landed (a "started" progress signal, then the
        final one), the newest is returned.
        """
        return SignalRead(None)

    def observe(
        self,
        services: Context,
        stores: Mapping[str, JsonDict],
        known: Mapping[str, str | None],
        read_all: ReadAll = read_in_turn,
    ) -> dict[str, SignalRead]:
        """One look at many stores, by key; the signal watcher's poll.

        ``known`` holds the version last seen of each store: a transport
        that can tell a store is unchanged (an ETag in a listing) returns
        its version with no payload instead of reading it again.  The
        default reads each store.  Reads of several stores go through
        ``read_all``, which runs them at once.
        """
        keys = list(stores)
        reads = read_all(
            [functools.partial(self.read, services, stores[key]) for key in keys]
        )
        return dict(zip(keys, reads, strict=True))

    def existing_stores(self, services: Context) -> dict[str, JsonDict]:
        """Every store of this transport that exists now, by ref key.

        The watcher removes those no flow waits on: a signal PUT after its
        deployment ended (a late agent) recreates a store that nobody will
        read.  Transports whose stores cannot come back return nothing.
        """
        return {}

    @abc.abstractmethod
    def delete_store(self, services: Context, store: JsonDict) -> None:
        """Remove the store; a store already gone is fine."""

    def leftovers(self, services: Context, ref: SignalRef) -> Sequence[str]:
        """Names of anything still held for ``ref`` (diagnostics and tests)."""
        return ()


@dataclasses.dataclass(frozen=True)
class FoundChannel:
    """A metadata channel's resource as a listing shows it."""

    #: what :meth:`ConfigTransport.remove_channel` needs to remove it
    channel: JsonDict
    #: the tag of the installation that wrote it (:mod:`.owner`); None: none
    owner: str | None


class ConfigTransport(abc.ABC):
    """Base of every config (server metadata) transport."""

    name: ClassVar[str]

    def __init__(self, options: JsonDict | None = None) -> None:
        self.options = dict(options or {})

    @abc.abstractmethod
    def ensure_channel(self, services: Context, server_id: str) -> JsonDict:
        """Make (or find) the server's channel; return what identifies it."""

    @abc.abstractmethod
    def publish(
        self, services: Context, server_id: str, channel: JsonDict, document: JsonDict
    ) -> None:
        """Deliver ``document`` (the full metadata) through the channel."""

    @abc.abstractmethod
    def remove_channel(
        self, services: Context, server_id: str, channel: JsonDict
    ) -> None:
        """Remove the channel; a channel already gone is fine."""

    def collect_config(self, services: Context, channel: JsonDict) -> JsonDict:
        """The ``os-collect-config`` section telling agents where to poll."""
        return {}

    def channel_id(self, channel: JsonDict) -> str | None:
        """The name of what publishing writes to, as :meth:`existing_channels`
        keys it; None when nothing a listing shows is written."""
        return None

    def existing_channels(self, services: Context) -> dict[str, FoundChannel]:
        """Every metadata resource of this transport that exists now, by
        :meth:`channel_id` (the metadata sweep removes those no server owns)."""
        return {}
