"""A swflows for users' tests: SQLite in a directory, servers answered in-process.

:class:`LocalSwflows` is a real :class:`~swflows.api.Swflows` (store,
flows, runner, signal watcher) whose cloud is a dict: servers receive
their metadata through ``POLL_TEMP_URL`` and signal through
``TEMP_URL_SIGNAL`` on an in-memory object store, and an in-process
:class:`Agent` answers every config published to a server with what a
function of the test computes (by default :func:`echo`; :func:`run_hooks`
runs them as swflows' agent does).  No cloud, no
server, no agent process::

    def greet(item):
        return {"greeting": "hi " + item.values["name"]}

    with LocalSwflows(answer=greet) as local:
        config = local.sw.create_config(
            "app", "#!/bin/sh", group="script",
            inputs=[{"name": "name"}], outputs=[{"name": "greeting"}])
        dep = local.sw.deploy(local.new_server(), config.id,
                              input_values={"name": "you"})
        assert dep.output_values["greeting"] == "hi you"

With pytest, ``pytest_plugins = ["swflows.fixture"]`` in a ``conftest.py``
gives the ``local_swflows`` fixture (one :class:`LocalSwflows` per test, in
``tmp_path``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import pathlib
import tempfile
import threading
import traceback
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from swflows import derive, model
from swflows import transport_names as names
from swflows.agent import items

if TYPE_CHECKING:
    from types import TracebackType

    from swflows.api import Swflows
    from swflows.clients.object_store import ObjectInfo, ObjectStore, StoredObject

#: what a server's agent computes for one config: its final signal
#: (declared outputs, and optionally ``deploy_status_code``,
#: ``deploy_stdout``, ``deploy_stderr``)
Answer = Callable[[items.Item], Mapping[str, Any]]

#: the scheme of the in-memory store's TempURLs
SCHEME = "memory"


def echo(item: items.Item) -> dict[str, Any]:
    """Every declared output named like an input gets that input's value."""
    values = item.values
    signal: dict[str, Any] = {
        name: values[name] for name in item.output_names if name in values
    }
    signal.setdefault(model.DEPLOY_STATUS_CODE, 0)
    return signal


def run_hooks(
    state_dir: str | pathlib.Path, hook_dirs: Sequence[str | pathlib.Path] = ()
) -> Answer:
    """An answer that runs each config as swflows' agent would, with its
    hooks: a ``script`` config is run as an executable, its inputs in its
    environment, its outputs read from ``$heat_outputs_path.<name>``.

    ``state_dir`` is the agent's working directory; ``hook_dirs`` are
    directories of executable hooks named by group, as the agent's own.
    """
    from swflows.agent import hooks
    from swflows.agent.state import StateDir

    state = StateDir(state_dir)
    state.prepare()
    found = hooks.Hooks(hook_dirs=hook_dirs)
    context = hooks.HookContext(state=state, stop=threading.Event())

    def run(item: items.Item) -> dict[str, Any]:
        hook = found.find(item.group)
        if hook is None:
            return hooks.failure(
                hooks.NO_HOOK, f"no hook for group {item.group} ({found.known()})"
            )
        return hook.run(item, context)

    return run


class MemoryObjectStore:
    """The object-store calls swflows makes, on a dict (thread-safe).

    ``on_write(container, name, body)`` is called after every write.
    """

    def __init__(
        self, on_write: Callable[[str, str, bytes], None] | None = None
    ) -> None:
        self.objects: dict[tuple[str, str], tuple[bytes, str, str]] = {}
        self.on_write = on_write
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"MemoryObjectStore({len(self.objects)} objects)"

    def ensure_container(self, name: str) -> None:
        pass

    def put_object(
        self,
        container: str,
        name: str,
        body: bytes,
        content_type: str = "application/json",
    ) -> str:
        data = bytes(body)
        etag = hashlib.md5(data).hexdigest()  # noqa: S324 (an ETag)
        with self._lock:
            self.objects[(container, name)] = (data, etag, content_type)
        if self.on_write is not None:
            self.on_write(container, name, data)
        return etag

    def _info(self, container: str, name: str) -> ObjectInfo | None:
        from swflows.clients.object_store import ObjectInfo

        found = self.objects.get((container, name))
        if found is None:
            return None
        data, etag, content_type = found
        now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
        return ObjectInfo(name, etag, now, len(data), content_type)

    def get_object(
        self, container: str, name: str, *, if_none_match: str | None = None
    ) -> StoredObject | None:
        from swflows.clients.object_store import StoredObject

        with self._lock:
            found = self.objects.get((container, name))
            info = self._info(container, name)
        if found is None or info is None:
            return None
        body = None if if_none_match == info.etag else found[0]
        return StoredObject(name, info.etag, info.last_modified, body)

    def head_object(self, container: str, name: str) -> ObjectInfo | None:
        with self._lock:
            return self._info(container, name)

    def list_objects(
        self, container: str, prefix: str | None = None
    ) -> list[ObjectInfo]:
        with self._lock:
            found = [
                self._info(c, name)
                for c, name in sorted(self.objects)
                if c == container and name.startswith(prefix or "")
            ]
        return [info for info in found if info is not None]

    def list_container(self, container: str) -> list[ObjectInfo]:
        """Its objects (every container is there: none is ever missing)."""
        return self.list_objects(container)

    def delete_object(self, container: str, name: str) -> bool:
        with self._lock:
            return self.objects.pop((container, name), None) is not None

    def temp_url(
        self,
        container: str,
        name: str,
        method: str,
        expires_at: int,
        digest: str = "sha256",
    ) -> str:
        path = urllib.parse.quote(f"{container}/{name}")
        return f"{SCHEME}://objects/{path}?method={method}&expires={expires_at}"

    def write_url(self, url: str, body: bytes) -> None:
        """A PUT to one of this store's TempURLs, as a server makes it."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != SCHEME:
            raise ValueError(f"not a TempURL of this store: {url}")
        container, _, name = urllib.parse.unquote(parts.path.lstrip("/")).partition("/")
        self.put_object(container, name, body)


class Agent:
    """Answers, in-process, every config published to a server.

    A config (by its derived config's id, the agent's idempotence key) is
    answered once, when the document that first lists it is published: its
    signal is what ``answer`` returns for it (a component resolved to the
    entry of its action), or ``deploy_status_code`` 1 with the error if
    ``answer`` raised (kept in :attr:`errors`).  Configs signalled by
    nothing (``NO_SIGNAL``) are only recorded.
    """

    def __init__(self, objects: MemoryObjectStore, answer: Answer = echo) -> None:
        self.objects = objects
        self.answer = answer
        #: every config run, in order
        self.ran: list[items.Item] = []
        #: what ``answer`` raised
        self.errors: list[BaseException] = []
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Agent(answer={getattr(self.answer, '__name__', self.answer)!r})"

    def published(self, document: bytes) -> None:
        """A server's metadata document was published: run what is new."""
        for raw in items.parse_document(document):
            ident = items.item_id(raw)
            with self._lock:
                if ident is None or ident in self._seen:
                    continue
                self._seen.add(ident)
            self._run(raw)

    def _run(self, raw: Any) -> None:
        where = items.signal_inputs(raw)
        try:
            item = items.resolve(items.parse_item(raw))
            self.ran.append(item)
            signal = dict(self.answer(item))
            signal.setdefault(model.DEPLOY_STATUS_CODE, 0)
        except Exception as exc:
            self.errors.append(exc)
            signal = {
                model.DEPLOY_STATUS_CODE: 1,
                model.DEPLOY_STDERR: "".join(traceback.format_exception_only(exc)),
            }
        url = where.get(derive.DEPLOY_SIGNAL_ID)
        if where.get(derive.DEPLOY_SIGNAL_TRANSPORT) == names.NO_SIGNAL or not url:
            return
        self.objects.write_url(str(url), json.dumps(signal).encode())


class LocalSwflows:
    """A :class:`~swflows.api.Swflows` on SQLite, its servers answered by
    :class:`Agent`; a context manager.

    ``directory`` holds the database and its key (a new temporary one,
    removed on close, when None); ``answer`` computes each config's signal;
    ``overrides`` are configuration options (``{"deployment_timeout": 5}``,
    ``{"watcher": {"poll_interval": 0.5}}``).  Servers need no Nova: any id
    is a server (:meth:`new_server` makes one up).
    """

    #: how often the watcher looks for signals: tests should not wait long
    POLL_INTERVAL = 0.1

    def __init__(
        self,
        directory: str | pathlib.Path | None = None,
        *,
        answer: Answer = echo,
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        from swflows import conf as sw_conf
        from swflows.api import Swflows
        from swflows.clients.cloud import Clients
        from swflows.persistence.store import Store

        self._temporary: tempfile.TemporaryDirectory[str] | None = None
        if directory is None:
            self._temporary = tempfile.TemporaryDirectory(prefix="swflows-")
            directory = self._temporary.name
        self.directory = pathlib.Path(directory)
        self.objects = MemoryObjectStore(on_write=self._written)
        self.agent = Agent(self.objects, answer)
        self.conf = sw_conf.get_conf(config_files=[])
        settings: dict[str, Any] = {
            "default_deployment_signal_transport": names.TEMP_URL_SIGNAL,
            "default_software_config_transport": names.POLL_TEMP_URL,
            "delivery_timeout": 0,
            "watcher": {"poll_interval": self.POLL_INTERVAL},
        }
        for key, value in (overrides or {}).items():
            if isinstance(value, Mapping):
                settings[key] = {**settings.get(key, {}), **value}
            else:
                settings[key] = value
        for key, value in settings.items():
            if isinstance(value, Mapping):
                for name, option in value.items():
                    self.conf.set_override(name, option, key)
            else:
                self.conf.set_override(key, value)
        self.store = Store(
            f"sqlite:///{self.directory / 'swflows.sqlite'}",
            secret_key_file=self.directory / "secret.key",
        )
        try:
            self.sw: Swflows = Swflows(
                self.store,
                Clients(object_store=lambda: cast("ObjectStore", self.objects)),
                self.conf,
            )
        except BaseException:
            self.store.close()
            raise

    def __repr__(self) -> str:
        return f"LocalSwflows({str(self.directory)!r}, {self.agent!r})"

    def _written(self, container: str, name: str, body: bytes) -> None:
        from swflows.transports import impl_poll_temp_url

        if container == impl_poll_temp_url.DEFAULT_CONTAINER:
            self.agent.published(body)

    def new_server(self) -> str:
        """A new server id (the server exists as soon as it is deployed to)."""
        return str(uuid.uuid4())

    def close(self) -> None:
        try:
            self.sw.close()
        finally:
            self.store.close()
            if self._temporary is not None:
                self._temporary.cleanup()

    def __enter__(self) -> LocalSwflows:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


try:  # the pytest fixture, for ``pytest_plugins = ["swflows.fixture"]``
    import pytest
except ImportError:  # pragma: no cover - pytest is not needed otherwise
    pass
else:

    @pytest.fixture
    def local_swflows(tmp_path: pathlib.Path) -> Iterator[LocalSwflows]:
        """One :class:`LocalSwflows` in the test's ``tmp_path``."""
        with LocalSwflows(tmp_path) as local:
            yield local


__all__ = [
    "Agent",
    "Answer",
    "LocalSwflows",
    "MemoryObjectStore",
    "echo",
    "run_hooks",
]
