"""Every error swflows raises.

One root, :class:`SwflowsError`, and a subclass per area.  Each carries the
structured fields a caller needs to act on it (which deployment, which field,
whether a retry may help) and, where natural, also inherits the standard
exception a caller would already catch (``LookupError``, ``ValueError``).
Messages never contain secrets.
"""

from __future__ import annotations

from typing import Any


class SwflowsError(Exception):
    """Root of every error raised by swflows."""

    #: True when the same call may succeed if simply made again later.
    retryable: bool = False

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields
        if "retryable" in fields:
            self.retryable = bool(fields["retryable"])

    def __str__(self) -> str:
        return self.message


class ValidationError(SwflowsError, ValueError):
    """Input was invalid: ``field`` names what, the message says why."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}", field=field, reason=reason)
        self.field = field
        self.reason = reason


class SignalRejected(ValidationError):
    """A signal payload could not be accepted (too large, not a JSON object)."""


class NotFound(SwflowsError, LookupError):
    """Something asked for by id does not exist.

    ``field`` is set when the id came from a field of another object (a
    deployment's ``config_id``), so a caller can point at the input to fix.
    """

    kind = "object"

    def __init__(
        self, ident: str, message: str | None = None, *, field: str | None = None
    ) -> None:
        default = f"{self.kind} {ident} not found"
        if field is not None:
            default = f"{field}: {default}"
        super().__init__(message or default, ident=ident, field=field)
        self.ident = ident
        self.field = field


class ConfigNotFound(NotFound):
    kind = "config"


class DeploymentNotFound(NotFound):
    kind = "deployment"


class ServerNotFound(NotFound):
    kind = "server"


class FlowNotFound(NotFound):
    kind = "flow"


class GroupNotFound(NotFound):
    kind = "group"


class ConfigInUse(SwflowsError):
    """A config cannot be deleted while a deployment references it."""

    def __init__(self, config_id: str, deployment_ids: list[str]) -> None:
        shown = ", ".join(sorted(deployment_ids)[:5])
        super().__init__(
            f"config {config_id} cannot be deleted: deployments reference it ({shown})",
            config_id=config_id,
            deployment_ids=deployment_ids,
        )
        self.config_id = config_id
        self.deployment_ids = deployment_ids


class ServerInUse(SwflowsError):
    """A server cannot be unenrolled while deployments are on it."""

    def __init__(self, server_id: str, deployment_ids: list[str]) -> None:
        shown = ", ".join(sorted(deployment_ids)[:5])
        super().__init__(
            f"server {server_id} still has deployments ({shown}): undeploy "
            "them first, or force it",
            server_id=server_id,
            deployment_ids=deployment_ids,
        )
        self.server_id = server_id
        self.deployment_ids = deployment_ids


class InvalidTransition(SwflowsError):
    """A deployment was asked to move to a status its current one forbids.

    ``message`` says it in an operator's words where the caller knows what
    was asked ("... is already COMPLETE: nothing to cancel")."""

    def __init__(
        self,
        deployment_id: str | None,
        current: str | None,
        new: str,
        message: str | None = None,
    ) -> None:
        who = f"deployment {deployment_id}" if deployment_id else "deployment"
        super().__init__(
            message or f"{who} cannot go from {current or 'nothing'} to {new}",
            deployment_id=deployment_id,
            current=current,
            new=new,
        )
        self.deployment_id = deployment_id
        self.current = current
        self.new = new


class GroupBusy(SwflowsError):
    """An operation of a deployment group runs: cancel it or wait for it."""

    def __init__(self, name: str, action: str) -> None:
        super().__init__(
            f"group {name} is IN_PROGRESS ({action}): cancel it or wait for it",
            group=name,
        )
        self.group = name


class ConcurrentUpdate(SwflowsError):
    """A compare-and-swap write lost a race; retrying is safe."""

    retryable = True


class NotSupported(SwflowsError, NotImplementedError):
    """The requested feature or transport is not available here."""


class TransportError(SwflowsError):
    """A signal or config transport failed to create, read or delete its store."""

    def __init__(
        self, transport: str, message: str, *, retryable: bool = False
    ) -> None:
        super().__init__(
            f"{transport}: {message}", transport=transport, retryable=retryable
        )
        self.transport = transport


class CloudError(SwflowsError):
    """A cloud service (Keystone, Swift, Zaqar, Nova) refused or failed a call."""

    def __init__(
        self,
        service: str,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(
            f"{service}: {message}",
            service=service,
            status=status,
            retryable=retryable,
        )
        self.service = service
        self.status = status


class FlowError(SwflowsError):
    """A flow could not be started, resumed or rebuilt."""

    def __init__(self, flow_id: str | None, message: str) -> None:
        if flow_id and flow_id not in message:
            message = f"flow {flow_id}: {message}"
        super().__init__(message, flow_id=flow_id)
        self.flow_id = flow_id


class FlowLocked(FlowError):
    """Another runner holds the lease on this flow."""

    retryable = True


class WaitTimeout(SwflowsError, TimeoutError):
    """A blocking wait ended before the deployment reached a terminal status
    (or, with ``flow_id``, before a custom flow ended).

    ``started`` is False when the wait ended before the action even
    started (its flow waits for a conductor, on a busy installation): the
    flow is recorded and runs later all the same, so the caller keeps
    ``deployment_id`` to look at it, rather than starting it again.
    """

    def __init__(
        self,
        deployment_id: str,
        seconds: float,
        *,
        flow_id: str | None = None,
        group: str | None = None,
        started: bool = True,
    ) -> None:
        what = f"flow {flow_id}" if flow_id else f"deployment {deployment_id}"
        if group:
            what = f"group {group}"
        message = f"{what} still running after {seconds:g} s"
        if not started:
            message = (
                f"{what} not started after {seconds:g} s: its flow is queued "
                "and runs later; wait for it by this id (it shows once "
                "started)"
            )
        super().__init__(
            message,
            deployment_id=deployment_id,
            flow_id=flow_id,
            started=started,
        )
        self.deployment_id = deployment_id
        self.flow_id = flow_id
        self.started = started


class DeploymentExists(ValidationError):
    """A deployment was asked for under the id of another one: a different
    server, config, action or inputs (the same ones are the same call,
    made again, and get the deployment that exists)."""

    def __init__(self, deployment_id: str, reason: str) -> None:
        super().__init__(
            "deployment_id", f"deployment {deployment_id} exists with {reason}"
        )
        self.fields["deployment_id"] = deployment_id
        self.deployment_id = deployment_id


class Forbidden(SwflowsError, PermissionError):
    """The caller may not do this: ``rule`` names the rule that refused it
    (an oslo.policy rule, or a server's deployment policy)."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"{rule}: {message}", rule=rule)
        self.rule = rule
