"""The agent's loop: poll the metadata, run what is new, signal, mark.

Each item of the document runs once per derived-config id, in document
order: (optionally) a "started" signal, the hook, the final signal, and
only then the marker (see :mod:`swflows.agent.state`).  Nothing in a
document can crash the loop: a malformed item is signalled FAILED where
its signal target can be found, and logged; a failing poll backs off.

While a hook runs the agent goes on polling (in a thread that only reads
the document).  An item that leaves the document while its hook runs was
cancelled (or its deployment removed): its hook is stopped (its process
group gets SIGTERM, then SIGKILL after ``kill_grace`` seconds), nothing is
signalled (nobody waits for it any more), its marker says it was
cancelled, and the agent goes on with the new document at once.

A document swflows publishes carries a generation that only grows for its
server (:data:`swflows.model.DOCUMENT_GENERATION`).  One older than a
document the agent acted on is a late write of a copy read before it (a
publisher paused between reading and writing): it is ignored, so it
neither runs what was withdrawn since nor stops a hook it lacks.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
import traceback
from collections.abc import Mapping
from typing import Any

import requests

from swflows import exceptions, masking, model
from swflows.agent import collectors, hooks, http, items, notify, process
from swflows.agent.config import AgentConfig
from swflows.agent.state import StateDir

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class Schedule:
    """How long to wait before the next poll.

    After a change: ``min_interval``; while nothing changes the wait doubles
    up to ``interval``; after failed polls it doubles from ``interval`` up
    to ``max_backoff``.  Every wait is scaled by a random factor in
    ``1 +- jitter`` so a fleet of servers does not poll in step.
    """

    interval: float
    min_interval: float
    max_backoff: float
    jitter: float
    rand: random.Random = dataclasses.field(default_factory=random.Random)
    _quiet: float = 0.0
    _failures: int = 0

    def __repr__(self) -> str:
        return (
            f"Schedule(interval={self.interval:g}, min={self.min_interval:g}, "
            f"max_backoff={self.max_backoff:g}, jitter={self.jitter:g})"
        )

    def changed(self) -> float:
        self._failures = 0
        self._quiet = min(self.min_interval, self.interval)
        return self._jittered(self._quiet)

    def unchanged(self) -> float:
        self._failures = 0
        start = min(self.min_interval, self.interval)
        self._quiet = min(self.interval, max(start, self._quiet * 2))
        return self._jittered(self._quiet)

    def failed(self) -> float:
        self._failures += 1
        top = max(self.max_backoff, self.interval)
        wait = http.backoff(http.doubling(self.interval * 2, top), self._failures)
        return self._jittered(wait)

    def _jittered(self, seconds: float) -> float:
        if not self.jitter:
            return seconds
        return seconds * self.rand.uniform(1 - self.jitter, 1 + self.jitter)


class Agent:
    """One server's agent.  :meth:`run` polls until ``stop`` is set."""

    def __init__(
        self,
        config: AgentConfig,
        *,
        collector: collectors.Collector | None = None,
        hooks_: hooks.Hooks | None = None,
        notifiers: notify.Notifiers | None = None,
        stop: threading.Event | None = None,
        rand: random.Random | None = None,
    ) -> None:
        self.config = config
        self.stop = stop or threading.Event()
        self.session = requests.Session()
        self.session.headers["User-Agent"] = http.user_agent()
        self.state = StateDir(config.state_dir)
        self.collector = collector or make_collector(config, self.session)
        self.hooks = hooks_ or hooks.Hooks(hook_dirs=config.hook_dirs)
        self.notifiers = notifiers or notify.Notifiers(
            session=self.session,
            timeout=config.http_timeout,
            heat_signal_url=config.heat_signal_url,
            zaqar_signal_bytes=config.zaqar_signal_bytes,
        )
        self.rand = rand or random.Random()
        self.schedule = Schedule(
            config.interval,
            config.min_interval,
            config.max_backoff,
            config.jitter,
            self.rand,
        )
        self.context = hooks.HookContext(
            state=self.state,
            stop=self.stop,
            timeout=config.hook_timeout or None,
            grace=config.kill_grace,
        )
        #: the raw items of the last good document
        self.items: list[Any] = []
        #: bumped with each new good document
        self._generation = 0
        #: the highest generation of a document acted on
        self.newest = items.Newest()
        #: one poll at a time (the loop's, or the one while a hook runs)
        self._polling = threading.Lock()
        #: config id -> (monotonic time of the next delivery attempt, failures)
        self._retry: dict[str, tuple[float, int]] = {}
        #: problems already logged, so a bad document does not flood the log
        self._reported: set[str] = set()

    def __repr__(self) -> str:
        return f"Agent({self.state!r}, {self.collector!r})"

    # -- the loop -------------------------------------------------------
    def run(self, once: bool = False) -> int:
        """Poll and deploy until stopped (or one round with ``once``).

        Returns 0, or 1 when ``once`` and the round failed.
        """
        self.state.prepare()
        with self.state.lock():
            swept = self.state.sweep()
            if swept:
                LOG.info("removed %d delivered pending signal(s)", swept)
            LOG.info("agent started: %r, %r", self.collector, self.schedule)
            if self.config.splay and not once:
                self.stop.wait(self.rand.uniform(0, self.config.splay))
            while not self.stop.is_set():
                ok = True
                try:
                    changed = self.step()
                    delay = (
                        self.schedule.changed()
                        if changed
                        else self.schedule.unchanged()
                    )
                except process.Interrupted:
                    break
                except exceptions.CloudError as exc:
                    ok = False
                    delay = self.schedule.failed()
                    LOG.warning("poll failed: %s; next in %.1f s", exc, delay)
                except Exception:
                    ok = False
                    delay = self.schedule.failed()
                    LOG.exception("poll failed; next in %.1f s", delay)
                if once:
                    return 0 if ok else 1
                self.stop.wait(delay)
            LOG.info("agent stopped")
        return 0

    def step(self) -> bool:
        """One round: poll, then deploy what is due.  Whether anything moved."""
        changed = self.poll()
        ran = self.deploy_all()
        return changed or ran

    def poll(self) -> bool:
        """Read the document once; whether a new good one came.

        CloudError (or another error) when it cannot be read.
        """
        with self._polling:
            try:
                collected = self.collector.collect()
            except exceptions.CloudError as exc:
                if exc.status == 404:  # the server unenrolled: see Newest
                    self.newest.forget()
                raise
            if collected is None:
                return False
            try:
                document = items.read_document(collected)
            except exceptions.ValidationError as exc:
                LOG.error("ignoring a malformed metadata document: %s", exc)
                return False
            if not self.newest.admits(document):
                return False
            parsed = document.items
            self.items = parsed
            self._generation += 1
            LOG.info("metadata changed: %d deployment(s)", len(parsed))
            # deployments gone from the document are no longer retried
            present = self._present()
            self._retry = {k: v for k, v in self._retry.items() if k in present}
            if len(self._reported) > 1000:
                self._reported.clear()
            return True

    def _present(self) -> set[str | None]:
        return {items.item_id(raw) for raw in self.items}

    def deploy_all(self) -> bool:
        """Deploy every item not yet deployed, in order.  Whether any ran.

        A new document read while a hook ran is gone through at once.
        """
        ran = False
        generation = -1
        while generation != self._generation:
            generation = self._generation
            ran = self._deploy_document(generation) or ran
        return ran

    def _deploy_document(self, generation: int) -> bool:
        ran = False
        seen: set[str] = set()
        for raw in self.items:
            if self.stop.is_set():
                raise process.Interrupted("the agent is stopping")
            if generation != self._generation:
                break  # a new document came while a hook ran
            ident = items.item_id(raw)
            if ident is None:
                self._report_once(
                    f"noid:{_fingerprint(raw)}",
                    "skipping a deployment without an id (nowhere to signal)",
                )
                continue
            if ident in seen:
                continue
            seen.add(ident)
            try:
                ran = self.deploy(ident, raw) or ran
            except process.Interrupted:
                raise
            except Exception:
                # a bug of this agent must not stop the other deployments
                LOG.exception("deployment %s failed in the agent", ident)
        return ran

    # -- one item -------------------------------------------------------
    def deploy(self, ident: str, raw: Any) -> bool:
        """Run one item if it is due.  Whether anything was attempted."""
        if self.state.is_deployed(ident):
            return False
        due = self._retry.get(ident)
        if due is not None and time.monotonic() < due[0]:
            return False
        inputs = items.signal_inputs(raw)
        hidden = items.hidden_inputs(raw)
        try:
            target: notify.Target | None = notify.target_of(ident, inputs)
            target_error = None
        except exceptions.ValidationError as exc:
            target, target_error = None, str(exc)

        payload = self.state.pending(ident)
        if payload is not None:
            LOG.info("deployment %s ran before; sending its signal again", ident)
        else:
            try:
                # the secrets it was given (its signal URL's signature, its
                # password, its hidden inputs) leave the server masked,
                # whatever the hook printed
                payload = masking.mask_outputs(
                    self._run(ident, raw, target),
                    masking.known_secrets({**inputs, **hidden}, hidden),
                )
            except process.Cancelled as exc:
                # nobody waits for its signal: the deployment ended (FAILED,
                # cancelled) or was removed, and a late signal is ignored
                LOG.warning(
                    "deployment %s was withdrawn from the metadata while its "
                    "hook ran (cancelled): %s; not signalled, not run again",
                    ident,
                    exc,
                )
                self._mark(ident, raw, {}, note=f"cancelled while running: {exc}")
                return True
            self.state.save_pending(ident, payload)
        if target is None:
            LOG.error("deployment %s: cannot signal (%s)", ident, target_error)
            self._mark(ident, raw, payload, note=f"not signalled: {target_error}")
            return True
        self._deliver(ident, raw, target, payload)
        return True

    def _run(
        self, ident: str, raw: Any, target: notify.Target | None
    ) -> dict[str, Any]:
        try:
            item = items.resolve(items.parse_item(raw))
        except exceptions.ValidationError as exc:
            LOG.error("deployment %s is malformed: %s", ident, exc)
            return hooks.failure(
                hooks.BAD_ITEM, f"swflows-agent: deployment {ident} is malformed: {exc}"
            )
        try:
            hook = self.hooks.find(item.group)
        except Exception as exc:
            LOG.exception("loading the hook for group %s failed", item.group)
            return hooks.failure(
                hooks.HOOK_FAILED,
                f"swflows-agent: the hook for group {item.group} failed to load: "
                f"{type(exc).__name__}: {exc}",
            )
        if hook is None:
            known = ", ".join(self.hooks.known())
            LOG.error("deployment %s: no hook for group %s", ident, item.group)
            return hooks.failure(
                hooks.NO_HOOK,
                f"swflows-agent: no hook for group {item.group!r} "
                f"(deployment {item.name}, config {ident}); known groups: {known}",
            )
        if target is not None and notify.wants_started(target.inputs):
            self._started(target)
        LOG.info(
            "running %s (%s, group %s, action %s)",
            item.name,
            ident,
            item.group,
            item.action,
        )
        started = time.monotonic()
        try:
            payload = self._run_hook(hook, item)
        except (process.Interrupted, process.Cancelled):
            raise
        except Exception:
            LOG.exception("the %s hook failed on %s", item.group, ident)
            return hooks.failure(
                hooks.HOOK_FAILED,
                f"swflows-agent: the {item.group} hook failed:\n"
                + traceback.format_exc(),
            )
        if not isinstance(payload, Mapping):
            return hooks.failure(
                hooks.HOOK_FAILED,
                f"swflows-agent: the {item.group} hook returned no signal",
            )
        LOG.info(
            "ran %s in %.2f s: %s",
            ident,
            time.monotonic() - started,
            notify.describe(payload),
        )
        return dict(payload)

    def _run_hook(self, hook: hooks.Hook, item: items.Item) -> Any:
        """Run ``hook`` on ``item`` while polling the document: when a new
        one no longer lists the item, the hook is told to stop."""
        context = dataclasses.replace(self.context, cancel=threading.Event())
        done = threading.Event()
        watch = threading.Thread(
            target=self._watch,
            args=(item.id, context.cancel, done),
            name=f"swflows-agent-watch-{item.id}",
            daemon=True,
        )
        watch.start()
        try:
            return hook.run(item, context)
        finally:
            done.set()

    def _watch(
        self, ident: str, cancel: threading.Event, done: threading.Event
    ) -> None:
        """Poll while ``ident``'s hook runs; set ``cancel`` once it is withdrawn."""
        schedule = Schedule(
            self.config.interval,
            self.config.min_interval,
            self.config.max_backoff,
            self.config.jitter,
            random.Random(self.rand.random()),
        )
        delay = schedule.changed()
        while not done.wait(delay) and not self.stop.is_set():
            try:
                if not self.poll():
                    delay = schedule.unchanged()
                    continue
            except Exception as exc:
                delay = schedule.failed()
                LOG.debug("poll while %s runs failed: %s", ident, exc)
                continue
            delay = schedule.changed()
            if ident not in self._present() and not done.is_set():
                LOG.warning(
                    "deployment %s left the metadata while its hook runs "
                    "(cancelled): stopping the hook",
                    ident,
                )
                cancel.set()
                return

    def _started(self, target: notify.Target) -> None:
        try:
            self.notifiers.deliver(
                target,
                {"deploy_signal": "started"},
                attempts=self.config.started_attempts,
                backoff=self.config.notify_backoff,
                stop=self.stop,
            )
        except Exception as exc:
            # only a hint to the server: the run goes on
            LOG.warning("could not signal %s started: %s", target.config_id, exc)

    def _deliver(
        self, ident: str, raw: Any, target: notify.Target, payload: dict[str, Any]
    ) -> None:
        try:
            sent = self.notifiers.deliver(
                target,
                payload,
                attempts=self.config.notify_attempts,
                backoff=self.config.notify_backoff,
                stop=self.stop,
            )
        except Exception as exc:
            if self.stop.is_set():
                raise process.Interrupted("the agent is stopping") from None
            if _permanent(exc):
                LOG.error("signal of %s refused; giving up: %s", ident, exc)
                self._mark(ident, raw, payload, note=f"signal refused: {exc}")
                return
            failures = self._retry.get(ident, (0.0, 0))[1] + 1
            wait = http.backoff(
                http.doubling(self.config.interval * 2, self.config.max_backoff),
                failures,
            )
            self._retry[ident] = (time.monotonic() + wait, failures)
            LOG.warning(
                "signal of %s not delivered (%s); trying again in %.0f s",
                ident,
                exc,
                wait,
            )
            return
        LOG.info(
            "%s %s (%s)",
            "signalled" if sent else "not signalling",
            ident,
            target.transport,
        )
        self._mark(ident, raw, payload)

    def _mark(
        self, ident: str, raw: Any, payload: Mapping[str, Any], note: str | None = None
    ) -> None:
        record: dict[str, Any] = {
            "status_code": payload.get(model.DEPLOY_STATUS_CODE),
        }
        if isinstance(raw, Mapping):
            for key in ("name", "group"):
                if isinstance(raw.get(key), str):
                    record[key] = raw[key]
            action = items.signal_inputs(raw).get("deploy_action")
            if isinstance(action, str):
                record["action"] = action
        if note:
            record["note"] = note
        self.state.mark_deployed(ident, record)
        self.state.clear_pending(ident)
        self._retry.pop(ident, None)

    def _report_once(self, key: str, message: str) -> None:
        if key not in self._reported:
            self._reported.add(key)
            LOG.error("%s", message)


def make_collector(
    config: AgentConfig, session: requests.Session
) -> collectors.Collector:
    """The collector ``config`` names (its first configured one)."""
    name, section = config.collector()
    if name == collectors.REQUEST:
        return collectors.RequestCollector(
            str(section["metadata_url"]), session=session, timeout=config.http_timeout
        )
    if section.get("signed_url"):
        return collectors.ZaqarCollector(
            session=session,
            signed_url=collectors.signed_url_value(section["signed_url"]),
            timeout=config.http_timeout,
        )
    keystone = http.Keystone(
        session,
        str(section["auth_url"]),
        user_id=str(section["user_id"]),
        password=str(section["password"]),
        project_id=str(section["project_id"]),
        region_name=section.get("region_name") or None,
        timeout=config.http_timeout,
    )
    return collectors.ZaqarCollector(
        session=session,
        keystone=keystone,
        queue_id=str(section["queue_id"]),
        timeout=config.http_timeout,
    )


def _permanent(exc: BaseException) -> bool:
    """A refusal no later attempt can change: a 4xx other than 408/429, or a
    signal target the config got wrong (no URL, a bad verb)."""
    if isinstance(exc, exceptions.ValidationError):
        return True
    return (
        isinstance(exc, exceptions.CloudError)
        and exc.status is not None
        and 400 <= exc.status < 500
        and not exc.retryable
    )


def _fingerprint(raw: Any) -> str:
    return repr(raw)[:200]
