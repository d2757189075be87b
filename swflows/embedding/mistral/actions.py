"""Mistral actions: ``swflows.deploy``, ``redeploy``, ``undeploy``, ``trigger``,
``show`` and ``cancel``; for deployment groups ``swflows.group_deploy``,
``group_show`` and ``group_delete``.

Registered under the ``mistral.actions`` entry points (the ``mistral``
extra installs mistral-lib), so a Mistral executor with swflows installed
finds them as it finds its own.  Inputs and results are plain JSON:

* a result is the deployment as :meth:`~swflows.model.Deployment.to_dict`
  gives it (``undeploy``: ``{"id": ..., "undeployed": true}``);
* an error is a mistral-lib error result, ``Result(error={"kind": ...,
  "message": ...})``: ``kind`` is the deployment's reason kind when its
  action ended FAILED (``exit_code``, ``timeout``, ``cancelled``...,
  with the deployment under ``deployment``), else the kind of error
  (``invalid_input``, ``not_found``, ``invalid_transition``,
  ``wait_timeout``, ``not_supported``, ``cloud_error``...).  Never a
  traceback; no secret.

**Synchronous** by default: the action returns when the deployment is
COMPLETE or FAILED, or after ``wait_timeout`` seconds (default: the
deployment's timeout plus :data:`WAIT_GRACE`), an error of kind
``wait_timeout`` that leaves the deployment running.  With ``wait: false``
the action is **asynchronous** (``is_sync()`` is false): it starts the flow
and returns; when the deployment is terminal, the result is PUT to the
action execution (``/v2/action_executions/<id>``, body ``{"state":
"SUCCESS" | "ERROR", "output": ...}``) at Mistral's API, found in the
caller's service catalog (``workflowv2``) unless ``callback_base_url`` or
``SWFLOWS_MISTRAL_URL`` names it, with the caller's token.  ``show`` and
``cancel`` are always synchronous.

**Which swflows**: one :class:`~swflows.api.Swflows` per configuration
file and per executor process, opened on first use and kept.  The file is
the action's ``config_file`` input, else ``$SWFLOWS_CONFIG_FILE``; a
``config_file`` input must lie in a directory of ``$SWFLOWS_CONFIG_DIRS``
(``:``-separated; default ``/etc/swflows`` and the folder of
``$SWFLOWS_CONFIG_FILE``), so a workflow cannot make the executor read
any file.  An embedder may instead :func:`use` an instance it built: actions
without ``config_file`` then use it, whatever ``$SWFLOWS_CONFIG_FILE`` says.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
from collections.abc import Mapping
from typing import Any, Final

import requests
import tenacity
from mistral_lib import actions
from mistral_lib.actions import types
from oslo_config import cfg

from swflows import conf as swconf
from swflows import exceptions, model, states
from swflows.api import Swflows
from swflows.embedding.completion import Completion, Completions

LOG = logging.getLogger(__name__)

#: the default configuration file
CONFIG_FILE_ENV: Final = "SWFLOWS_CONFIG_FILE"
#: where ``config_file`` inputs may point
CONFIG_DIRS_ENV: Final = "SWFLOWS_CONFIG_DIRS"
DEFAULT_CONFIG_DIR: Final = "/etc/swflows"
#: Mistral's API (its base URL) when the caller's catalog does not say
MISTRAL_URL_ENV: Final = "SWFLOWS_MISTRAL_URL"
#: seconds a synchronous action waits past the deployment's own timeout
WAIT_GRACE: Final = 60
#: seconds spent retrying a callback Mistral does not take
CALLBACK_RETRY_SECONDS: Final = 120.0

# -- error results ------------------------------------------------------------

_ERROR_KINDS: Final[tuple[tuple[type[BaseException], str], ...]] = (
    (exceptions.WaitTimeout, "wait_timeout"),
    (exceptions.SignalRejected, "signal_rejected"),
    (exceptions.ValidationError, "invalid_input"),
    (exceptions.GroupBusy, "group_busy"),
    (exceptions.NotFound, "not_found"),
    (exceptions.ConfigInUse, "config_in_use"),
    (exceptions.InvalidTransition, "invalid_transition"),
    (exceptions.NotSupported, "not_supported"),
    (exceptions.TransportError, "transport_error"),
    (exceptions.CloudError, "cloud_error"),
    (exceptions.FlowError, "flow_error"),
)


def error_of(exc: BaseException) -> dict[str, Any]:
    """The JSON error for an exception: its kind and message, no traceback."""
    if not isinstance(exc, exceptions.SwflowsError):
        # not ours: its text may hold anything, so only its type is told
        return {"kind": "internal_error", "message": type(exc).__name__}
    kind = next((k for cls, k in _ERROR_KINDS if isinstance(exc, cls)), "error")
    out: dict[str, Any] = {"kind": kind, "message": exc.message}
    if exc.retryable:
        out["retryable"] = True
    for name in ("field", "deployment_id", "ident"):
        value = exc.fields.get(name)
        if isinstance(value, str):
            out[name] = value
    return out


def failure_of(deployment: model.Deployment) -> dict[str, Any]:
    """The JSON error for a deployment whose action ended FAILED."""
    reason = dict(deployment.reason or {})
    return {
        "kind": str(reason.get("kind") or "failed"),
        "message": deployment.status_reason,
        "deployment": deployment.to_dict(),
    }


def outcome_of(deployment: model.Deployment) -> types.Result:
    """A terminal deployment as a Mistral result."""
    if deployment.status == states.FAILED:
        return types.Result(error=failure_of(deployment))
    return types.Result(data=deployment.to_dict())


# -- which swflows ------------------------------------------------------------

_LOCK = threading.Lock()
_INSTANCES: dict[str, tuple[Swflows, Completions]] = {}
_USED: list[tuple[Swflows, Completions]] = []


def use(sw: Swflows | None) -> None:
    """Have actions without ``config_file`` use ``sw`` (None: stop)."""
    with _LOCK:
        for _, completions in _USED:
            completions.close()
        _USED.clear()
        if sw is not None:
            _USED.append((sw, Completions(sw)))


def _allowed_dirs() -> list[str]:
    configured = os.environ.get(CONFIG_DIRS_ENV)
    if configured:
        dirs = [d for d in configured.split(os.pathsep) if d]
    else:
        dirs = [DEFAULT_CONFIG_DIR]
        default = os.environ.get(CONFIG_FILE_ENV)
        if default:
            dirs.append(os.path.dirname(os.path.realpath(default)))
    return [os.path.realpath(d) for d in dirs]


def _config_path(config_file: str | None) -> str | None:
    if config_file is None:
        default = os.environ.get(CONFIG_FILE_ENV)
        return os.path.realpath(default) if default else None
    if not isinstance(config_file, str) or not config_file:
        raise exceptions.ValidationError("config_file", "must be a file name")
    path = os.path.realpath(config_file)
    if not any(os.path.dirname(path) == d for d in _allowed_dirs()):
        raise exceptions.ValidationError(
            "config_file",
            f"{config_file} is not in a directory of ${CONFIG_DIRS_ENV}",
        )
    return path


def instance(config_file: str | None = None) -> tuple[Swflows, Completions]:
    """The swflows (and its completion watcher) an action uses; see above."""
    with _LOCK:
        if config_file is None and _USED:
            return _USED[0]
    path = _config_path(config_file)
    with _LOCK:
        if path is None:
            raise exceptions.ValidationError(
                "config_file",
                f"no swflows configuration: give config_file or set ${CONFIG_FILE_ENV}",
            )
        found = _INSTANCES.get(path)
        if found is not None:
            return found
        if not os.path.isfile(path):
            raise exceptions.ValidationError("config_file", f"no file {path}")
        try:
            conf = swconf.get_conf(config_files=[path])
            _check_values(conf)
        except cfg.Error as exc:  # its message may quote a secret value
            raise exceptions.ValidationError(
                "config_file", f"{path} cannot be loaded ({type(exc).__name__})"
            ) from None
        sw = Swflows.from_conf(conf)
        _INSTANCES[path] = found = (sw, Completions(sw))
        return found


def _check_values(conf: cfg.ConfigOpts) -> None:
    """Read every option once, so a bad value fails now, not mid-action."""
    for group, opts in swconf.list_opts():
        name = group if isinstance(group, str) else group.name
        section = conf if name == "DEFAULT" else conf[name]
        for opt in opts:
            try:
                getattr(section, opt.dest)
            except cfg.NoSuchOptError:  # an auth plugin's, not loaded
                continue


@atexit.register
def close_all() -> None:
    """Close every instance opened here (runs at exit)."""
    with _LOCK:
        opened = list(_INSTANCES.values())
        _INSTANCES.clear()
    for sw, completions in opened:
        completions.close()
        sw.close()


# -- the asynchronous callback ----------------------------------------------------


def _catalog_entries(catalog: Any) -> list[Mapping[str, Any]]:
    if isinstance(catalog, str):
        try:
            catalog = json.loads(catalog)
        except ValueError:
            return []
    if isinstance(catalog, Mapping):
        catalog = catalog.get("catalog") or catalog.get("serviceCatalog") or []
    if not isinstance(catalog, list):
        return []
    return [entry for entry in catalog if isinstance(entry, Mapping)]


def mistral_endpoint(security: Any) -> str | None:
    """Mistral's API (service type ``workflowv2``) from the caller's catalog."""
    region = getattr(security, "region_name", None)
    catalog = getattr(security, "service_catalog", None)
    for entry in _catalog_entries(catalog):
        if entry.get("type") != "workflowv2":
            continue
        for point in entry.get("endpoints") or []:
            if point.get("interface", "public") != "public":
                continue
            if region and point.get("region", region) != region:
                continue
            url = point.get("url")
            if url:
                return str(url)
    return None


def callback_url(context: Any, base_url: str | None = None) -> str:
    """The URL to PUT an asynchronous action's result to."""
    execution = getattr(context, "execution", None)
    path = getattr(execution, "callback_url", None)
    if not path:
        action_id = getattr(execution, "action_execution_id", None)
        if not action_id:
            raise exceptions.ValidationError(
                "context", "no action execution to report the result to"
            )
        path = f"/v2/action_executions/{action_id}"
    path = str(path)
    if path.startswith(("http://", "https://")):
        return path
    base = (
        base_url
        or os.environ.get(MISTRAL_URL_ENV)
        or mistral_endpoint(getattr(context, "security", None))
    )
    if not base:
        raise exceptions.ValidationError(
            "callback_base_url",
            f"Mistral's URL is not in the caller's catalog: "
            f"give callback_base_url or set ${MISTRAL_URL_ENV}",
        )
    base = base.rstrip("/")
    # the catalog's endpoint usually ends with /v2, as the path begins
    if base.endswith("/v2") and path.startswith("/v2/"):
        base = base[: -len("/v2")]
    return base + "/" + path.lstrip("/")


class _Retry(Exception):
    pass


def report(url: str, result: types.Result, token: str | None) -> None:
    """PUT ``result`` to an action execution, as Mistral's API takes it.

    Retries dropped connections and 5xx answers for up to
    :data:`CALLBACK_RETRY_SECONDS`; anything else is logged (without the
    token) and dropped: Mistral's own timeout then ends the action.
    """
    if result.is_error():
        body = {"state": "ERROR", "output": result.error}
    else:
        body = {"state": "SUCCESS", "output": result.data}
    headers = {"Content-Type": "application/json"}
    if token:
        headers["X-Auth-Token"] = token
    try:
        for attempt in tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(
                (_Retry, requests.ConnectionError, requests.Timeout)
            ),
            wait=tenacity.wait_exponential(multiplier=0.5, max=15),
            stop=tenacity.stop_after_delay(CALLBACK_RETRY_SECONDS),
            reraise=True,
        ):
            with attempt:
                resp = requests.put(url, json=body, headers=headers, timeout=30)
                if resp.status_code >= 500:
                    raise _Retry(resp.status_code)
                if resp.status_code >= 400:
                    LOG.error(
                        "result of %s refused by Mistral: HTTP %s",
                        url,
                        resp.status_code,
                    )
    except (_Retry, requests.RequestException) as exc:
        LOG.error("result of %s not delivered: %s", url, type(exc).__name__)


# -- the actions --------------------------------------------------------------------


#: inputs of the actions that are text when given
_TEXT_INPUTS: Final = (
    "server_id",
    "config_id",
    "deployment_id",
    "name",
    "action",
    "signal_transport",
    "config_transport",
    "reason",
)


def _check_inputs(action: Any) -> None:
    """Refuse an input of the wrong JSON type before anything is done, so
    it is ``invalid_input`` naming the input, not an internal error."""
    for field in _TEXT_INPUTS:
        value = getattr(action, field, None)
        if value is not None and (not isinstance(value, str) or not value):
            raise exceptions.ValidationError(field, "must be a non-empty string")
    timeout = getattr(action, "timeout", None)
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0
    ):
        raise exceptions.ValidationError("timeout", "must be a positive integer")
    values = getattr(action, "input_values", None)
    if values is not None and not isinstance(values, dict):
        raise exceptions.ValidationError("input_values", "must be an object")
    names = getattr(action, "actions", None)
    if names is not None and (
        not isinstance(names, list | tuple)
        or not all(isinstance(n, str) for n in names)
    ):
        raise exceptions.ValidationError("actions", "must be a list of strings")


class _SwflowsAction(actions.Action):  # type: ignore[misc]
    """Common inputs: ``config_file``, ``wait``, ``wait_timeout``,
    ``callback_base_url``."""

    #: whether ``wait: false`` makes the action asynchronous
    can_wait = True

    def __init__(
        self,
        config_file: str | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
        callback_base_url: str | None = None,
    ) -> None:
        super().__init__()
        self.config_file = config_file
        self.wait = wait
        self.wait_timeout = wait_timeout
        self.callback_base_url = callback_base_url

    def is_sync(self) -> bool:
        return bool(self.wait) or not self.can_wait

    def run(self, context: Any) -> Any:
        try:
            if not isinstance(self.wait, bool):
                raise exceptions.ValidationError("wait", "must be true or false")
            _check_inputs(self)
            sw, completions = instance(self.config_file)
            if self.is_sync():
                return self.call(sw, True)
            url = callback_url(context, self.callback_base_url)
            security = getattr(context, "security", None)
            token = getattr(security, "auth_token", None)
            started = self.call(sw, False)
            deployment_id = started.data["id"]
            completions.add(
                deployment_id,
                lambda done: report(url, self.finished(done), token),
            )
            return None
        except Exception as exc:
            return types.Result(error=error_of(exc))

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        """Run the call; with ``wait`` return the final result, else a
        result whose data names the deployment started."""
        raise NotImplementedError

    def finished(self, done: Completion) -> types.Result:
        """The result of an asynchronous action, once its flows ended."""
        if done.error is not None:
            return types.Result(error={"kind": "flow_error", "message": done.error})
        if done.deployment is None:
            return types.Result(
                error={
                    "kind": "not_found",
                    "message": f"deployment {done.deployment_id} was removed",
                }
            )
        return outcome_of(done.deployment)

    def _wait_timeout(self, sw: Swflows, timeout: int | None) -> float:
        if self.wait_timeout is not None:
            value = self.wait_timeout
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise exceptions.ValidationError("wait_timeout", "must be a number")
            if value <= 0:
                raise exceptions.ValidationError("wait_timeout", "must be positive")
            return float(value)
        return float((timeout or sw.conf.deployment_timeout) + WAIT_GRACE)

    @staticmethod
    def _result(deployment: model.Deployment, wait: bool, limit: float) -> types.Result:
        if not wait:
            return types.Result(data=deployment.to_dict())
        if not deployment.is_terminal:
            raise exceptions.WaitTimeout(deployment.id, limit)
        return outcome_of(deployment)


class DeployAction(_SwflowsAction):
    """Deploy a config to a server; the result is the deployment.

    Given a ``deployment_id`` that exists already (the action run again
    after an executor restart), it is not deployed twice: its current
    state is waited for and returned.
    """

    def __init__(
        self,
        server_id: str,
        config_id: str,
        input_values: dict[str, Any] | None = None,
        name: str | None = None,
        action: str = model.CREATE,
        actions: list[str] | None = None,
        signal_transport: str | None = None,
        config_transport: str | None = None,
        timeout: int | None = None,
        deployment_id: str | None = None,
        config_file: str | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
        callback_base_url: str | None = None,
    ) -> None:
        super().__init__(config_file, wait, wait_timeout, callback_base_url)
        self.server_id = server_id
        self.config_id = config_id
        self.input_values = input_values
        self.name = name
        self.action = action
        self.actions = actions
        self.signal_transport = signal_transport
        self.config_transport = config_transport
        self.timeout = timeout
        self.deployment_id = deployment_id

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        limit = self._wait_timeout(sw, self.timeout)
        if self.deployment_id is not None:
            try:
                sw.show(self.deployment_id)
            except exceptions.DeploymentNotFound:
                pass
            else:
                found = (
                    sw.wait(self.deployment_id, limit)
                    if wait
                    else sw.show(self.deployment_id)
                )
                return self._result(found, wait, limit)
        made = sw.deploy(
            self.server_id,
            self.config_id,
            input_values=self.input_values,
            name=self.name,
            action=self.action,
            actions=self.actions,
            signal_transport=self.signal_transport,
            config_transport=self.config_transport,
            timeout=self.timeout,
            deployment_id=self.deployment_id,
            wait=wait,
            wait_timeout=limit,
        )
        return self._result(made, wait, limit)


class RedeployAction(_SwflowsAction):
    """Run UPDATE (or ``action``) with new inputs or a new config."""

    def __init__(
        self,
        deployment_id: str,
        input_values: dict[str, Any] | None = None,
        config_id: str | None = None,
        action: str = model.UPDATE,
        timeout: int | None = None,
        config_file: str | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
        callback_base_url: str | None = None,
    ) -> None:
        super().__init__(config_file, wait, wait_timeout, callback_base_url)
        self.deployment_id = deployment_id
        self.input_values = input_values
        self.config_id = config_id
        self.action = action
        self.timeout = timeout

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        limit = self._wait_timeout(sw, self.timeout)
        made = sw.redeploy(
            self.deployment_id,
            input_values=self.input_values,
            config_id=self.config_id,
            action=self.action,
            timeout=self.timeout,
            wait=wait,
            wait_timeout=limit,
        )
        return self._result(made, wait, limit)


class TriggerAction(_SwflowsAction):
    """Run an action (BACKUP...) of a deployment's config, as a new deployment."""

    def __init__(
        self,
        deployment_id: str,
        action: str,
        input_values: dict[str, Any] | None = None,
        signal_transport: str | None = None,
        timeout: int | None = None,
        config_file: str | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
        callback_base_url: str | None = None,
    ) -> None:
        super().__init__(config_file, wait, wait_timeout, callback_base_url)
        self.deployment_id = deployment_id
        self.action = action
        self.input_values = input_values
        self.signal_transport = signal_transport
        self.timeout = timeout

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        limit = self._wait_timeout(sw, self.timeout)
        made = sw.trigger(
            self.deployment_id,
            self.action,
            input_values=self.input_values,
            signal_transport=self.signal_transport,
            timeout=self.timeout,
            wait=wait,
            wait_timeout=limit,
        )
        return self._result(made, wait, limit)


class UndeployAction(_SwflowsAction):
    """Remove a deployment, running its DELETE action when the config has one."""

    def __init__(
        self,
        deployment_id: str,
        timeout: int | None = None,
        config_file: str | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
        callback_base_url: str | None = None,
    ) -> None:
        super().__init__(config_file, wait, wait_timeout, callback_base_url)
        self.deployment_id = deployment_id
        self.timeout = timeout

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        limit = self._wait_timeout(sw, self.timeout)
        sw.undeploy(
            self.deployment_id, timeout=self.timeout, wait=wait, wait_timeout=limit
        )
        if not wait:
            return types.Result(data={"id": self.deployment_id})
        return self.removed(self.deployment_id)

    @staticmethod
    def removed(deployment_id: str) -> types.Result:
        return types.Result(data={"id": deployment_id, "undeployed": True})

    def finished(self, done: Completion) -> types.Result:
        if done.error is None and done.deployment is None:
            return self.removed(done.deployment_id)
        if done.deployment is not None and done.error is None:
            return types.Result(
                error={
                    "kind": "flow_error",
                    "message": f"deployment {done.deployment_id} was not removed",
                    "deployment": done.deployment.to_dict(),
                }
            )
        return super().finished(done)


class ShowAction(_SwflowsAction):
    """A deployment as it is now."""

    can_wait = False

    def __init__(self, deployment_id: str, config_file: str | None = None) -> None:
        super().__init__(config_file)
        self.deployment_id = deployment_id

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        return types.Result(data=sw.show(self.deployment_id).to_dict())


class CancelAction(_SwflowsAction):
    """End a running action FAILED, kind ``cancelled``; the result is the
    deployment so ended (a success: the cancel did what was asked)."""

    can_wait = False

    def __init__(
        self,
        deployment_id: str,
        reason: str | None = None,
        config_file: str | None = None,
    ) -> None:
        super().__init__(config_file)
        self.deployment_id = deployment_id
        self.reason = reason

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        return types.Result(data=sw.cancel(self.deployment_id, self.reason).to_dict())


# -- groups -------------------------------------------------------------------


def group_outcome(shown: dict[str, Any]) -> types.Result:
    """A group whose operation ended, as a Mistral result: an error of kind
    ``group_failed`` (with the group) when it ended FAILED."""
    if shown["status"] == states.FAILED:
        return types.Result(
            error={
                "kind": "group_failed",
                "message": shown["status_reason"],
                "group": shown,
            }
        )
    return types.Result(data=shown)


class _GroupAction(_SwflowsAction):
    """A group action: synchronous; ``wait: false`` returns the group as
    soon as its operation is recorded, without following it."""

    can_wait = False

    def _limit(self) -> float | None:
        if self.wait_timeout is None:
            return None
        value = self.wait_timeout
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise exceptions.ValidationError(
                "wait_timeout", "must be a positive number"
            )
        return float(value)

    def _outcome(self, sw: Swflows, group: str) -> types.Result:
        if not self.wait:
            return types.Result(data=sw.show_group(group))
        shown = sw.wait_group(group, self._limit())
        return group_outcome(shown)


class GroupDeployAction(_GroupAction):
    """Deploy a config to a group of servers (see :mod:`swflows.api.groups`).

    The group is created if there is none of that ``name``, else
    redeployed: ``servers`` is its membership (members added are deployed,
    removed ones undeployed; when nothing else changed the others are left
    alone, so running the action again does nothing new).  The result is
    the group (``show_group``); an error ``group_failed`` when its
    operation ended FAILED (the reason names what was exceeded).
    """

    def __init__(
        self,
        name: str,
        config_id: str,
        servers: dict[str, str],
        input_values: dict[str, Any] | None = None,
        member_values: dict[str, dict[str, Any]] | None = None,
        policy: dict[str, Any] | None = None,
        signal_transport: str | None = None,
        timeout: int | None = None,
        actions: list[str] | None = None,
        config_file: str | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
    ) -> None:
        super().__init__(config_file, wait, wait_timeout)
        self.name = name
        self.config_id = config_id
        self.servers = servers
        self.input_values = input_values
        self.member_values = member_values
        self.policy = policy
        self.signal_transport = signal_transport
        self.timeout = timeout
        self.actions = actions

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        for field in ("servers", "member_values", "policy"):
            value = getattr(self, field)
            if value is not None and not isinstance(value, dict):
                raise exceptions.ValidationError(field, "must be an object")
        try:
            current = sw.show_group(self.name)
        except exceptions.GroupNotFound:
            sw.create_group(
                self.name,
                self.config_id,
                self.servers,
                input_values=self.input_values,
                member_values=self.member_values,
                policy=self.policy,
                signal_transport=self.signal_transport,
                timeout=self.timeout,
                actions=self.actions,
                wait=False,
            )
        else:
            sw.redeploy_group(
                current["id"],
                servers=self.servers,
                input_values=self.input_values,
                member_values=self.member_values,
                config_id=self.config_id,
                policy=self.policy,
                wait=False,
            )
        return self._outcome(sw, self.name)


class GroupShowAction(_GroupAction):
    """A group as it is now: status, members, outputs by member."""

    def __init__(self, name: str, config_file: str | None = None) -> None:
        super().__init__(config_file)
        self.name = name

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        return types.Result(data=sw.show_group(self.name))


class GroupDeleteAction(_GroupAction):
    """Undeploy every member of a group and remove it; the result is
    ``{"name": ..., "deleted": true}`` (an error ``group_failed`` with the
    group when a member could not be undeployed)."""

    def __init__(
        self,
        name: str,
        policy: dict[str, Any] | None = None,
        config_file: str | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
    ) -> None:
        super().__init__(config_file, wait, wait_timeout)
        self.name = name
        self.policy = policy

    def call(self, sw: Swflows, wait: bool) -> types.Result:
        if self.policy is not None and not isinstance(self.policy, dict):
            raise exceptions.ValidationError("policy", "must be an object")
        left = sw.delete_group(
            self.name,
            policy=self.policy,
            wait=bool(self.wait),
            wait_timeout=self._limit(),
        )
        if left is None:
            return types.Result(data={"name": self.name, "deleted": True})
        if not self.wait:
            return types.Result(data=left)
        return group_outcome(left)


__all__ = [
    "CONFIG_DIRS_ENV",
    "CONFIG_FILE_ENV",
    "MISTRAL_URL_ENV",
    "CancelAction",
    "DeployAction",
    "GroupDeleteAction",
    "GroupDeployAction",
    "GroupShowAction",
    "RedeployAction",
    "ShowAction",
    "TriggerAction",
    "UndeployAction",
    "callback_url",
    "close_all",
    "error_of",
    "instance",
    "report",
    "use",
]
