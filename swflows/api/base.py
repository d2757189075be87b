"""What every part of the facade shares: the services, the runner, the store.

:class:`swflows.api.Swflows` is made of one class per concept (configs,
deployments, results, custom flows, servers, groups), each in its own
module of this package and each built on :class:`Base`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self

from swflows import exceptions, model, policies, projects, trusts
from swflows.api.started import StartedLooks
from swflows.clients.cloud import Clients
from swflows.services import Services

if TYPE_CHECKING:
    from oslo_context.context import RequestContext

    # TaskFlow loads at first use: a command that only reads the store
    # starts without it
    from swflows.engine import Runner

LOG = logging.getLogger(__name__)

#: the not-found error of each kind of owned object
_NOT_FOUND: dict[str, type[exceptions.NotFound]] = {
    projects.CONFIG: exceptions.ConfigNotFound,
    projects.DEPLOYMENT: exceptions.DeploymentNotFound,
    projects.SERVER: exceptions.ServerNotFound,
    projects.GROUP: exceptions.GroupNotFound,
}

#: generation of a deployment's first action
FIRST_GENERATION = 1


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` is an outage (:func:`swflows.engine.faults.
    is_outage`); the engine is imported when first asked, not with the
    API: a command that only reads rows never loads it."""
    from swflows.engine import faults

    return faults.is_outage(exc)


def describe_fault(exc: BaseException) -> str:
    """``exc`` in one line (:func:`swflows.engine.faults.describe`),
    imported as :func:`is_outage` is."""
    from swflows.engine import faults

    return faults.describe(exc)


class Base:
    """A store, a cloud and a runner (see :class:`swflows.api.Swflows`)."""

    def __init__(
        self,
        store: Any,
        clients: Clients,
        conf: Any,
        *,
        secret: bytes | None = None,
        start: bool = True,
    ) -> None:
        self.services = Services(
            store=store,
            conf=conf,
            clients=clients,
            secret=secret if secret is not None else store.derivation_key(),
        )
        self.store = store
        self.conf = conf
        self._owns_store = False
        self._runner: Runner | None = None
        #: callers waiting for flows driven elsewhere to write their rows
        self._started_looks = StartedLooks(store)
        if start:
            self.runner.start()

    @property
    def runner(self) -> Runner:
        """This instance's runner, made and started at first use when the
        instance was made with ``start=False``."""
        if self._runner is None:
            from swflows.engine import Runner

            self._runner = Runner(self.services)
            self._runner.start()
            self._runner_started(self._runner)
        return self._runner

    def adopt_runner(self, runner: Runner) -> None:
        """Make ``runner`` this instance's runner (a conductor's, see
        :class:`swflows.engine.conductor.Conductor`) and start it."""
        if self._runner is not None:
            raise exceptions.SwflowsError("this instance already has a runner")
        self._runner = runner
        runner.start()
        self._runner_started(runner)

    def _runner_started(self, runner: Runner) -> None:
        """Start what runs beside the runner (see :mod:`swflows.api.groups`)."""

    def _closing(self) -> None:
        """Stop what runs beside the runner, before the runner stops."""

    # -- built from options alone ---------------------------------------
    @classmethod
    def from_conf(cls, conf: Any, store: Any = None, *, start: bool = True) -> Self:
        """An instance configured by ``conf`` alone (see :mod:`swflows.conf`).

        The store is opened from ``[database]`` unless ``store`` is given, and
        the cloud clients are built from the client groups and ``[stack_user]``
        (:meth:`swflows.clients.cloud.Clients.from_conf`).  A store opened here is
        ``sw.store``, closed with the instance.  ``start`` is as for the
        constructor.
        """
        from swflows import conf as sw_conf
        from swflows.persistence.store import Store

        sw_conf.check_values(conf)
        opened = store if store is not None else Store.from_conf(conf)
        try:
            made = cls(opened, Clients.from_conf(conf), conf, start=start)
            made._owns_store = store is None
            return made
        except BaseException:
            if store is None:
                opened.close()
            raise

    def close(self) -> None:
        """Stop the runner (running flows are released for the next one),
        and close the store if :meth:`from_conf` opened it."""
        self._closing()
        if self._runner is not None:
            self._runner.close()
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- projects and policy (see swflows.projects, swflows.policies) -----
    def _default_project(self) -> str:
        return str(getattr(self.conf, "default_project", None) or "default")

    def _is_admin(self, context: RequestContext | None) -> bool:
        return context is None or policies.is_admin(self.conf, context)

    def _scope(
        self, context: RequestContext | None, all_projects: bool = False
    ) -> str | None:
        """The project a listing is limited to (None: every project).

        ``all_projects`` is refused (Forbidden) unless the context passes
        ``swflows:all_projects``.
        """
        if context is None:
            return None
        if all_projects:
            policies.authorize(self.conf, context, policies.ALL_PROJECTS, {})
            return None
        return str(projects.owner_of(context).project_id)

    def _project_of(self, kind: str, object_id: str) -> str:
        owner = self.store.get_owner(kind, object_id)
        return owner.project_id if owner is not None else self._default_project()

    def _visible(
        self, context: RequestContext | None, kind: str, object_id: str, rule: str
    ) -> None:
        """Raise the kind's NotFound when the object is another project's
        (unless the context is an admin's), then check ``rule`` on it."""
        if context is None:
            return
        project = self._project_of(kind, object_id)
        caller = projects.owner_of(context)
        if project != caller.project_id and not self._is_admin(context):
            raise _NOT_FOUND[kind](object_id)
        policies.authorize(self.conf, context, rule, {"project_id": project})

    def _allow(self, context: RequestContext | None, rule: str) -> None:
        """Check a rule that has no existing object as target."""
        if context is not None:
            caller = projects.owner_of(context)
            policies.authorize(
                self.conf,
                context,
                rule,
                {"project_id": caller.project_id, "user_id": caller.user_id},
            )

    def _listing(
        self, context: RequestContext | None, all_projects: bool
    ) -> dict[str, Any]:
        """The store's listing filters for the caller's scope: its project,
        and whether rows with no recorded owner (the default project's)
        are in it."""
        scope = self._scope(context, all_projects)
        if scope is None:
            return {}
        return {"project": scope, "unowned": scope == self._default_project()}

    def _visible_config(self, context: RequestContext | None, config_id: str) -> Any:
        """The config, if the context may read it (ConfigNotFound if not)."""
        found = self.store.get_config(config_id)
        self._visible(context, projects.CONFIG, config_id, "swflows:config:show")
        return found

    def _own(self, context: RequestContext | None, kind: str, object_id: str) -> None:
        """Record the context's project and user as the object's owner."""
        if context is not None:
            self.store.set_owner(kind, object_id, projects.owner_of(context))

    def _delegate(
        self, context: RequestContext | None, kind: str, object_id: str
    ) -> str | None:
        """Have the context's caller delegate to swflows the trust the
        object's deferred work acts through (see :mod:`swflows.trusts`),
        when trusts are configured and the context carries a token; the
        trust's id, recorded with the object's owner."""
        trustee = self.services.clients.trustee
        if trustee is None or context is None or not trusts.carries_token(context):
            return None
        trust_id, made = trustee.obtain(context)
        try:
            if not self.store.set_trust(kind, object_id, trust_id):
                raise exceptions.SwflowsError(f"{kind} {object_id} has no owner")
        except BaseException:
            if made:
                trustee.delete(trust_id)
            raise
        return trust_id

    def _undelegate(self, kind: str, object_id: str) -> None:
        """Delete the object's trust after its work failed to start."""
        try:
            trusts.release(self.services, kind, object_id)
        except Exception:
            LOG.warning(
                "%s %s: its trust could not be deleted", kind, object_id, exc_info=True
            )

    def _check_deploy_policy(
        self, context: RequestContext | None, server_id: str, config_id: str
    ) -> None:
        """Raise Forbidden naming the rule unless the server's deployment
        policy admits the context's project and ``config_id``."""
        if context is None or self._is_admin(context):
            return
        caller = projects.owner_of(context)
        owner = self.store.get_owner(projects.SERVER, server_id)
        if owner is None:
            try:
                self.store.get_server(server_id)
            except exceptions.ServerNotFound:
                # a server first met here becomes the deploying project's
                self.store.set_owner(projects.SERVER, server_id, caller)
                owner = caller
        server_project = owner.project_id if owner else self._default_project()
        found = self.store.get_deploy_policy(server_id)["policy"]
        projects.DeployPolicy.from_dict(found).check(
            server_id, server_project, caller.project_id, config_id
        )

    def _timeout(self, timeout: int | None) -> int:
        value = int(timeout if timeout is not None else self.conf.deployment_timeout)
        return model.check_timeout("timeout", value)

    def _sealed_values(
        self,
        source: model.Config | None,
        given: Mapping[str, Any],
        kept: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The input values a flow stores: ``kept`` (a deployment's own,
        sealed as it holds them) overridden by ``given`` (a caller's,
        :func:`checked_input_values`), each value of a hidden input of
        ``source`` sealed with the store's key.

        The flow's stored inputs, its logbook and the deployment's row
        never hold such a value in clear: the derive task opens it only
        to build the config the server reads.  A caller's value that
        looks sealed is sealed too, so it reaches the server as given.
        """
        hidden = source.hidden_inputs if source is not None else frozenset()
        seal = self.store.seal
        out: dict[str, Any] = {}
        for key, value in (kept or {}).items():
            clear = key in hidden and value is not None and not model.is_sealed(value)
            out[key] = seal(value) if clear else value
        for key, value in given.items():
            secret = key in hidden and value is not None
            out[key] = seal(value) if secret or model.is_sealed(value) else value
        return out

    def _sealed_members(
        self,
        source: model.Config | None,
        members: Mapping[str, Mapping[str, Any]],
        given: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, dict[str, Any]]:
        """Group members' own input values, :meth:`_sealed_values`-ed:
        those a caller gave in ``given``, the others as the group kept them."""
        return {
            name: self._sealed_values(source, values)
            if name in given
            else self._sealed_values(source, {}, values)
            for name, values in members.items()
        }

    def _opened_values(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` with the sealed ones decrypted, to check or compare."""
        return dict(self.store.open_values(values))


def checked_input_values(values: Mapping[str, Any] | None) -> dict[str, Any]:
    """``input_values`` as a flow stores them: names as text, JSON values.

    Checked before a flow starts, whose stored inputs could not hold them.
    """
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise exceptions.ValidationError("input_values", "must be a mapping")
    for key, value in values.items():
        if not isinstance(key, str):
            raise exceptions.ValidationError(
                "input_values", f"names must be strings, not {type(key).__name__}"
            )
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            raise exceptions.ValidationError(
                f"input_values.{key}",
                "must have a JSON form (no NaN, infinity or non-JSON type; "
                "not nested too deeply)",
            ) from None
    return dict(values)
