"""oslo.policy rules for every operation, with their defaults.

Registered on the ``oslo.policy.policies`` entry point as ``swflows``, so
``oslopolicy-sample-generator --namespace swflows`` writes a sample file.
The facade checks a rule only for a call that carries a request context;
the target of a rule on an existing object is its owner
(``project_id``, ``user_id``), and an object of another project is not
found before any rule is checked (:mod:`swflows.projects`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from swflows import exceptions

if TYPE_CHECKING:
    from oslo_config import cfg
    from oslo_context import context as oslo_context
    from oslo_policy import policy

ADMIN: Final = "context_is_admin"
ADMIN_OR_OWNER: Final = "admin_or_owner"
ALL_PROJECTS: Final = "swflows:all_projects"

#: (name, check, description, operations as (method, path)) of each rule
_RULES: Final[tuple[tuple[str, str, str, tuple[tuple[str, str], ...]], ...]] = (
    ("swflows:config:create", "", "Create a software config.", (("POST", "/configs"),)),
    (
        "swflows:config:show",
        "rule:admin_or_owner",
        "Show a config.",
        (("GET", "/configs/{id}"),),
    ),
    ("swflows:config:list", "", "List the project's configs.", (("GET", "/configs"),)),
    (
        "swflows:config:delete",
        "rule:admin_or_owner",
        "Delete a config.",
        (("DELETE", "/configs/{id}"),),
    ),
    (
        "swflows:deployment:create",
        "",
        "Deploy a config to a server (the server's deployment policy decides too).",
        (("POST", "/deployments"),),
    ),
    (
        "swflows:deployment:show",
        "rule:admin_or_owner",
        "Show a deployment and its outputs.",
        (("GET", "/deployments/{id}"),),
    ),
    (
        "swflows:deployment:list",
        "",
        "List the project's deployments.",
        (("GET", "/deployments"),),
    ),
    (
        "swflows:deployment:update",
        "rule:admin_or_owner",
        "Redeploy, suspend or resume a deployment.",
        (("PUT", "/deployments/{id}"),),
    ),
    (
        "swflows:deployment:delete",
        "rule:admin_or_owner",
        "Undeploy a deployment.",
        (("DELETE", "/deployments/{id}"),),
    ),
    (
        "swflows:deployment:trigger",
        "rule:admin_or_owner",
        "Run an action of a deployment's config.",
        (("POST", "/deployments/{id}/actions"),),
    ),
    (
        "swflows:deployment:cancel",
        "rule:admin_or_owner",
        "Cancel a deployment's running action.",
        (("POST", "/deployments/{id}/cancel"),),
    ),
    (
        "swflows:deployment:signal",
        "",
        "Deliver a signal to a deployment.",
        (("POST", "/deployments/{id}/signal"),),
    ),
    ("swflows:server:enroll", "", "Enroll a server.", (("PUT", "/servers/{id}"),)),
    ("swflows:server:list", "", "List the project's servers.", (("GET", "/servers"),)),
    (
        "swflows:server:show",
        "rule:admin_or_owner",
        "Show a server's enrollment.",
        (("GET", "/servers/{id}"),),
    ),
    (
        "swflows:server:unenroll",
        "rule:admin_or_owner",
        "Unenroll a server.",
        (("DELETE", "/servers/{id}"),),
    ),
    (
        "swflows:server:create",
        "",
        "Boot a server through Nova and enroll it.",
        (("POST", "/servers"),),
    ),
    (
        "swflows:server:delete",
        "rule:admin_or_owner",
        "Undeploy, unenroll and delete a server in Nova.",
        (("DELETE", "/servers/{id}/nova"),),
    ),
    (
        "swflows:server:set_policy",
        "rule:admin_or_owner",
        "Change a server's deployment policy.",
        (("PUT", "/servers/{id}/policy"),),
    ),
    ("swflows:group:create", "", "Create a deployment group.", (("POST", "/groups"),)),
    (
        "swflows:group:show",
        "rule:admin_or_owner",
        "Show a group.",
        (("GET", "/groups/{id}"),),
    ),
    ("swflows:group:list", "", "List the project's groups.", (("GET", "/groups"),)),
    (
        "swflows:group:update",
        "rule:admin_or_owner",
        "Redeploy, trigger or cancel a group.",
        (("PUT", "/groups/{id}"),),
    ),
    (
        "swflows:group:delete",
        "rule:admin_or_owner",
        "Delete a group.",
        (("DELETE", "/groups/{id}"),),
    ),
    (
        ALL_PROJECTS,
        "rule:context_is_admin",
        "See and act on every project's objects.",
        (("GET", "/*?all_projects=1"),),
    ),
)


def list_rules() -> list[Any]:
    """Every rule with its default (the ``oslo.policy.policies`` entry point)."""
    from oslo_policy import policy

    base = [
        policy.RuleDefault(ADMIN, "role:admin", description="An administrator."),
        policy.RuleDefault(
            ADMIN_OR_OWNER,
            "rule:context_is_admin or project_id:%(project_id)s",
            description="An administrator, or a member of the owner's project.",
        ),
    ]
    return base + [
        policy.DocumentedRuleDefault(
            name,
            check,
            description,
            [{"method": method, "path": path} for method, path in operations],
        )
        for name, check, description, operations in _RULES
    ]


_LOCK = threading.Lock()
_ENFORCERS: dict[int, Any] = {}


def enforcer(conf: cfg.ConfigOpts) -> policy.Enforcer:
    """The enforcer reading ``conf``'s ``[oslo_policy]`` file, made once."""
    from oslo_policy import policy

    with _LOCK:
        found = _ENFORCERS.get(id(conf))
        if found is None:
            found = policy.Enforcer(conf)
            found.register_defaults(list_rules())
            _ENFORCERS[id(conf)] = found
        return found


def is_admin(conf: cfg.ConfigOpts, context: oslo_context.RequestContext) -> bool:
    """Whether the context is an administrator's (``context_is_admin``)."""
    if context.is_admin:
        return True
    return bool(enforcer(conf).enforce(ADMIN, {}, context))


def authorize(
    conf: cfg.ConfigOpts,
    context: oslo_context.RequestContext,
    rule: str,
    target: Mapping[str, Any],
) -> None:
    """Raise Forbidden naming ``rule`` unless the context passes it."""
    if context.is_admin:
        return
    if not enforcer(conf).enforce(rule, dict(target), context):
        raise exceptions.Forbidden(rule, "not allowed by policy")
