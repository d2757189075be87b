"""swflows' configuration for the dev cloud: one writer for the shell, the
tests, the demo and the benchmarks.

``tools/devcloud up`` writes ``.devcloud/swflows.conf`` (the operator shell's
configuration, on a SQLite file under ``.devcloud/``), ``.devcloud/clouds.yaml``
(the same login for ``--os-cloud devcloud`` and other OpenStack clients) and
``.devcloud/env.sh`` (what ``tools/devcloud env`` prints); each start rewrites
them, so ports and passwords made anew by a restart never go stale.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import layout

#: the service groups :func:`conf_text` may leave out
CLOUD_SERVICES = ("object_store", "messaging", "compute")
#: the cloud's name in clouds.yaml
CLOUD_NAME = "devcloud"


def conf_text(
    cloud: Mapping[str, Any],
    *,
    database: str | None = None,
    stack_domain_by_name: bool = False,
    services: Sequence[str] = CLOUD_SERVICES,
    extra: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """A swflows configuration file for the dev cloud, from its cloud.json.

    swflows logs in as the demo user (``[identity]``, shared by Swift, Zaqar
    and Nova through ``auth_section``: each is found in the catalog, Swift's
    account is the demo project's) and as the stack domain admin for stack
    users; ``services`` are the client groups written, and ``extra`` adds
    lines (or whole groups) of the caller's.
    """
    ks = cloud["keystone"]
    demo = ks["demo"]
    domain = (
        f"stack_user_domain_name = {ks['stack_user_domain_name']}"
        if stack_domain_by_name
        else f"stack_user_domain_id = {ks['stack_user_domain_id']}"
    )
    sections: dict[str, list[str]] = {
        "database": [f"connection = {database}"] if database else [],
        "identity": [
            "auth_type = password",
            f"auth_url = {ks['auth_url']}",
            f"username = {demo['username']}",
            f"password = {demo['password']}",
            f"project_name = {demo['project_name']}",
            f"user_domain_id = {demo['user_domain_id']}",
            f"project_domain_id = {demo['project_domain_id']}",
        ],
        "stack_user": [
            domain,
            f"stack_domain_admin = {ks['stack_domain_admin']}",
            f"stack_domain_admin_password = {ks['stack_domain_admin_password']}",
            f"stack_user_role = {ks['stack_user_role']}",
        ],
        "object_store": ["auth_section = identity"],
        "messaging": ["auth_section = identity"],
        "compute": ["auth_section = identity"],
    }
    for name, lines in (extra or {}).items():
        sections.setdefault(name, []).extend(lines)
    return "".join(
        f"[{name}]\n" + "".join(f"{line}\n" for line in lines) + "\n"
        for name, lines in sections.items()
        if lines and (name not in CLOUD_SERVICES or name in services)
    )


def clouds_yaml(cloud: Mapping[str, Any]) -> str:
    """clouds.yaml naming the dev cloud :data:`CLOUD_NAME` (the demo user).

    Written as JSON, which is YAML too: no YAML library is needed here.
    """
    import json

    ks = cloud["keystone"]
    demo = ks["demo"]
    doc = {
        "clouds": {
            CLOUD_NAME: {
                "auth_type": "password",
                "auth": {
                    "auth_url": ks["auth_url"],
                    "username": demo["username"],
                    "password": demo["password"],
                    "project_name": demo["project_name"],
                    "user_domain_id": demo["user_domain_id"],
                    "project_domain_id": demo["project_domain_id"],
                },
                "region_name": ks["region"],
                "identity_api_version": 3,
            }
        }
    }
    return json.dumps(doc, indent=2) + "\n"


def env_lines() -> list[str]:
    """The ``export`` lines of a shell that works against the dev cloud."""
    bin_dir = layout.SWFLOWS_VENV / "bin"
    pairs = {
        "SWFLOWS_DEVCLOUD": str(layout.CLOUD_JSON),
        "SWFLOWS_CONFIG": str(layout.SWFLOWS_CONF),
        # for --os-cloud devcloud (not OS_CLOUD: the file above already logs in)
        "OS_CLIENT_CONFIG_FILE": str(layout.CLOUDS_YAML),
    }
    lines = [f"export {k}={shlex.quote(v)}" for k, v in pairs.items()]
    lines.append(f'export PATH={shlex.quote(str(bin_dir))}:"$PATH"')
    return lines


def write_shell_files(cloud: Mapping[str, Any]) -> list[Path]:
    """Write swflows.conf, clouds.yaml and env.sh for this start of the cloud."""
    database = f"sqlite:///{layout.SHELL_DB}"
    layout.write_private(layout.SWFLOWS_CONF, conf_text(cloud, database=database))
    layout.write_private(layout.CLOUDS_YAML, clouds_yaml(cloud))
    layout.write_private(layout.ENV_SH, "\n".join(env_lines()) + "\n")
    return [layout.SWFLOWS_CONF, layout.CLOUDS_YAML, layout.ENV_SH]
