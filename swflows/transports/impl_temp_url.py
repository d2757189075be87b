"""TEMP_URL_SIGNAL: the agent PUTs its signal to a Swift TempURL.

No Keystone user is needed.  All signal objects live in one container, named
``<deployment id>/<generation>``, so one container listing shows every
waiting deployment at once.  No object is made in advance (Heat seeds an
empty one, which costs a PUT per deployment): the agent's PUT makes it, and
an object with a body is the signal.  Only the container is made, once per
client, and again by the next deployment once a look found it missing.  The
TempURL expires after the action's timeout plus a grace period, so it never
dies before the deployment does.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Mapping

from swflows import derive
from swflows import transport_names as names
from swflows.clients.identity import StackUser
from swflows.transports import base

LOG = logging.getLogger(__name__)

DEFAULT_CONTAINER = "swflows-signals"
DEFAULT_GRACE = 600


class TempUrlSignal(base.SignalTransport):
    name = names.TEMP_URL_SIGNAL

    @property
    def container(self) -> str:
        return str(self.options.get("container") or DEFAULT_CONTAINER)

    def describe_store(
        self, ref: base.SignalRef, user: StackUser | None
    ) -> base.JsonDict:
        return {"container": self.container, "object": ref.key}

    def create_store(
        self, services: base.Context, ref: base.SignalRef, user: StackUser | None
    ) -> base.JsonDict:
        # the agent's PUT makes the object; its container must be there
        services.project_clients.object_store.ensure_container(self.container)
        grace = int(self.options.get("grace", DEFAULT_GRACE))
        return {
            "container": self.container,
            "object": ref.key,
            "expires": int(time.time()) + ref.timeout + grace,
        }

    def agent_inputs(
        self,
        services: base.Context,
        ref: base.SignalRef,
        store: base.JsonDict,
        user: StackUser | None,
    ) -> base.InputPairs:
        url = services.project_clients.object_store.temp_url(
            store["container"],
            store["object"],
            "PUT",
            int(store["expires"]),
            digest=str(self.options.get("digest", "sha256")),
        )
        return list(derive.temp_url_signal_inputs(url))

    def read(self, services: base.Context, store: base.JsonDict) -> base.SignalRead:
        found = services.project_clients.object_store.get_object(
            store["container"], store["object"]
        )
        if found is None or not found.body:
            return base.SignalRead(None, found.etag if found else None)
        return base.SignalRead(found.body, found.etag)

    def observe(
        self,
        services: base.Context,
        stores: Mapping[str, base.JsonDict],
        known: Mapping[str, str | None],
        read_all: base.ReadAll = base.read_in_turn,
    ) -> dict[str, base.SignalRead]:
        """One listing per container; a GET only for objects whose ETag moved,
        those of one look all at once (through ``read_all``).

        ETags, not times, tell a change: Swift's ``Last-Modified`` has whole
        seconds, so two PUTs within one second look alike by time.
        """
        by_container: dict[str, dict[str, str]] = {}
        for key, store in stores.items():
            by_container.setdefault(store["container"], {})[store["object"]] = key
        swift = services.project_clients.object_store
        reads: dict[str, base.SignalRead] = {}
        changed: list[str] = []
        for container, objects in by_container.items():
            found = swift.list_container(container)
            if found is None:  # forgotten by the client: the next store makes it
                LOG.warning(
                    "signal container %s is missing: the agents of %d waiting "
                    "deployments cannot signal until a new deployment makes it",
                    container,
                    len(objects),
                )
            listing = {item.name: item for item in found or () if item.name in objects}
            for name, key in objects.items():
                item = listing.get(name)
                if item is None:
                    reads[key] = base.SignalRead(None)
                elif item.bytes == 0 or item.etag == known.get(key):
                    reads[key] = base.SignalRead(None, item.etag)
                else:
                    changed.append(key)
        got = read_all(
            [functools.partial(self.read, services, stores[key]) for key in changed]
        )
        reads.update(zip(changed, got, strict=True))
        return reads

    def existing_stores(self, services: base.Context) -> dict[str, base.JsonDict]:
        found: dict[str, base.JsonDict] = {}
        for item in services.project_clients.object_store.list_objects(self.container):
            dep, _, gen = item.name.partition("/")
            if dep and gen.isdigit():
                found[item.name] = {"container": self.container, "object": item.name}
        return found

    def delete_store(self, services: base.Context, store: base.JsonDict) -> None:
        services.project_clients.object_store.delete_object(
            store["container"], store["object"]
        )

    def leftovers(self, services: base.Context, ref: base.SignalRef) -> list[str]:
        swift = services.project_clients.object_store
        if swift.head_object(self.container, ref.key) is None:
            return []
        return [f"{self.container}/{ref.key}"]
