"""Who made what, and who may deploy to a server.

Every config, deployment, server and group belongs to the Keystone project
(and user) of the request context that made it; an object made without a
context, or before projects were recorded, belongs to the configured
``default_project``.  A call with a context sees only its own project's
objects unless the context is an admin's: another project's object is "not
found", never "forbidden", so nothing tells that it exists.

A server's :class:`DeployPolicy` says which projects may deploy to it:
its own (``project``, the default), its own and the ``projects`` listed, or
``any``; ``config_ids``, when given, restricts which source configs anyone
but an admin may deploy there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from swflows import exceptions

if TYPE_CHECKING:
    from oslo_context import context as oslo_context

#: the kinds of object that have an owner
CONFIG: Final = "config"
DEPLOYMENT: Final = "deployment"
SERVER: Final = "server"
GROUP: Final = "group"

#: deployment policy modes
SAME_PROJECT: Final = "project"
LISTED_PROJECTS: Final = "projects"
ANY_PROJECT: Final = "any"
MODES: Final = (SAME_PROJECT, LISTED_PROJECTS, ANY_PROJECT)

#: the rule a refused deployment names
DEPLOY_RULE: Final = "server deploy policy"


@dataclasses.dataclass(frozen=True)
class Owner:
    """The project and user an object was made by."""

    project_id: str
    user_id: str | None = None


@dataclasses.dataclass(frozen=True)
class DeployPolicy:
    """Who may deploy to a server (see the module's documentation)."""

    mode: str = SAME_PROJECT
    projects: tuple[str, ...] = ()
    config_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise exceptions.ValidationError(
                "deploy_policy", f"mode must be one of {', '.join(MODES)}"
            )
        for field in ("projects", "config_ids"):
            value = getattr(self, field)
            if isinstance(value, str) or not all(
                isinstance(v, str) and v.strip() for v in value
            ):
                raise exceptions.ValidationError(
                    f"deploy_policy.{field}", "must be a list of non-empty ids"
                )
        if self.mode == LISTED_PROJECTS and not self.projects:
            raise exceptions.ValidationError(
                "deploy_policy.projects", "mode 'projects' needs at least one project"
            )
        if self.mode != LISTED_PROJECTS and self.projects:
            raise exceptions.ValidationError(
                "deploy_policy.projects",
                f"only mode '{LISTED_PROJECTS}' lists projects",
            )

    @classmethod
    def from_dict(cls, value: Mapping[str, Any] | None) -> DeployPolicy:
        if value is None:
            return cls()
        if not isinstance(value, Mapping):
            raise exceptions.ValidationError("deploy_policy", "must be a mapping")
        unknown = set(value) - {"mode", "projects", "config_ids"}
        if unknown:
            raise exceptions.ValidationError(
                "deploy_policy", f"unknown keys: {', '.join(sorted(unknown))}"
            )
        return cls(
            mode=value.get("mode", SAME_PROJECT),
            projects=_ids(value.get("projects"), "projects"),
            config_ids=_ids(value.get("config_ids"), "config_ids"),
        )

    @classmethod
    def parse(cls, text: str, config_ids: Sequence[str] = ()) -> DeployPolicy:
        """The command line's form: ``project``, ``any`` or
        ``projects:ID[,ID...]``."""
        mode, _, rest = text.partition(":")
        projects = tuple(p.strip() for p in rest.split(",") if p.strip())
        return cls(mode=mode.strip(), projects=projects, config_ids=tuple(config_ids))

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "projects": list(self.projects),
            "config_ids": list(self.config_ids),
        }

    def check(
        self,
        server_id: str,
        server_project: str,
        caller_project: str | None,
        config_id: str,
    ) -> None:
        """Raise Forbidden naming the rule unless ``caller_project`` may
        deploy ``config_id`` to the server."""
        allowed = (
            self.mode == ANY_PROJECT
            or caller_project == server_project
            or (self.mode == LISTED_PROJECTS and caller_project in self.projects)
        )
        if not allowed:
            raise exceptions.Forbidden(
                DEPLOY_RULE,
                f"server {server_id} admits deployments from "
                + (
                    f"its own project only (mode '{SAME_PROJECT}')"
                    if self.mode == SAME_PROJECT
                    else f"projects {', '.join(self.projects)} and its own"
                    f" (mode '{LISTED_PROJECTS}')"
                )
                + f", not from project {caller_project}",
            )
        if self.config_ids and config_id not in self.config_ids:
            raise exceptions.Forbidden(
                DEPLOY_RULE,
                f"server {server_id} admits only configs "
                f"{', '.join(self.config_ids)} (config_ids), not {config_id}",
            )


def _ids(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise exceptions.ValidationError(f"deploy_policy.{field}", "must be a list")
    return tuple(value)


def owner_of(context: oslo_context.RequestContext) -> Owner:
    """The owner an object made under ``context`` gets."""
    if not context.project_id:
        raise exceptions.ValidationError(
            "context", "a request context must name its project"
        )
    return Owner(str(context.project_id), context.user_id)
