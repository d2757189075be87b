"""The optional packages each way of running swflows needs (its setup.cfg
extras), checked where they are first needed, so a missing one is named
with the command that installs it rather than met as an ImportError deep
in a library."""

from __future__ import annotations

import importlib.util
from typing import Final

from swflows import exceptions

#: extra -> the module it provides
MODULES: Final = {
    "postgresql": "psycopg2",
    "mysql": "pymysql",
    "redis": "redis",
    "zookeeper": "kazoo",
    "mistral": "mistral_lib",
    "wsgi": "keystonemiddleware",
}


def require(extra: str, what: str) -> None:
    """Raise :class:`~swflows.exceptions.NotSupported` naming ``what``
    needs and how to install it, unless the module of ``extra`` is here."""
    module = MODULES[extra]
    if importlib.util.find_spec(module) is None:
        raise exceptions.NotSupported(
            f"{what} needs the Python package {module!r}, which is not "
            f"installed: pip install 'swflows[{extra}]'"
        )
