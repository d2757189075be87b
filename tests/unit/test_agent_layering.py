"""The agent runs on servers with a minimal install: it must stay light.

It may import swflows' pure modules and requests (plus tenacity), never
the store, the runner, the public API, TaskFlow, SQLAlchemy or an
OpenStack client library.  Checked in a fresh interpreter, so what other
tests imported does not hide an import.
"""

from __future__ import annotations

import json
import subprocess
import sys

#: swflows modules the agent may load: its own and the pure ones
ALLOWED_SWFLOWS = {
    "swflows",
    "swflows.model",
    "swflows.derive",
    "swflows.masking",
    "swflows.signals",
    "swflows.states",
    "swflows.exceptions",
    "swflows.transport_names",
    # stdlib only: stopping on SIGTERM without a lock in the handler
    "swflows.stopping",
}
FORBIDDEN = (
    "taskflow",
    "sqlalchemy",
    "alembic",
    "oslo_config",
    "oslo_utils",
    "keystoneauth1",
    "zaqarclient",
    "swiftclient",
    "novaclient",
    "stevedore",
    "cryptography",
)

PROBE = """
import json, pkgutil, sys, importlib
import swflows.agent
for info in pkgutil.walk_packages(swflows.agent.__path__, "swflows.agent."):
    if info.name != "swflows.agent.__main__":
        importlib.import_module(info.name)
print(json.dumps(sorted(sys.modules)))
"""


def test_agent_imports_nothing_heavy() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    loaded = set(json.loads(out))
    assert "swflows.agent.main" in loaded  # the probe saw every module
    ours = {m for m in loaded if m == "swflows" or m.startswith("swflows.")}
    extra = {m for m in ours - ALLOWED_SWFLOWS if not m.startswith("swflows.agent")}
    assert extra == set(), f"the agent imports {sorted(extra)}"
    heavy = sorted(
        m for m in loaded if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)
    )
    assert heavy == [], f"the agent imports {heavy}"
