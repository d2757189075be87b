"""Fixtures for functional tests against the dev cloud (``tools/devcloud``).

``devcloud`` (session scope) runs ``tools/devcloud up`` and returns
``.devcloud/cloud.json`` as a dict: endpoints and credentials of real
Keystone, Swift and Zaqar and of the Nova stand-in, all on 127.0.0.1. A
cloud that is already up is reused; a failure to start fails the tests
(never skips them). The other session fixtures build on it:
``keystone_admin_session``, ``keystone_demo_session`` and
``stack_domain_admin`` (keystoneauth1 sessions), ``swift_conn`` (a
python-swiftclient Connection of the demo user's Keystone session, Swift
found in its catalog, the demo project's account), ``zaqar_url``,
``nova_url`` and ``zookeeper_hosts`` (kazoo's ``127.0.0.1:port``);
``devcloud["nova"]["control_url"]`` is the stand-in's test-only control path.

    def test_something(devcloud, swift_conn):
        auth_url = devcloud["keystone"]["auth_url"]

Who stops the cloud: the fixture runs ``tools/devcloud down`` at the end of
the session only if it started the cloud itself, the session does not run
under pytest-xdist, and ``SWFLOWS_KEEP_DEVCLOUD=1`` is not set. A cloud that
was already up is left up. Under xdist a file lock lets one worker start the
cloud and the others reuse it; no worker stops it (a worker cannot know when
the others are done), so run ``tools/devcloud down`` afterwards.

These tests reach the servers over HTTP only; the servers run from their own
virtualenv under ``.devcloud/``. Client libraries are imported by the
fixtures that use them, so tests that need no cloud do not need them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import filelock
import pytest

if TYPE_CHECKING:
    from keystoneauth1 import session as ks_session
    from keystoneauth1.identity import v3
    from swiftclient import client as swift_client

REPO = Path(__file__).resolve().parents[2]
DEVCLOUD = REPO / "tools" / "devcloud"
BASE = REPO / ".devcloud"
CLOUD_JSON = BASE / "cloud.json"


def run_devcloud(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(DEVCLOUD), *args],
        capture_output=True,
        text=True,
        timeout=1800,
    )


def under_xdist() -> bool:
    return "PYTEST_XDIST_WORKER" in os.environ


@pytest.fixture(scope="session")
def devcloud() -> Iterator[dict[str, Any]]:
    """The dev cloud's cloud.json, as a dict."""
    BASE.mkdir(exist_ok=True)
    with filelock.FileLock(str(BASE / "fixture.lock")):
        was_up = run_devcloud("status").returncode == 0
        if not was_up:
            res = run_devcloud("up")
            if res.returncode != 0:
                pytest.fail(
                    f"tools/devcloud up failed (exit {res.returncode}):\n"
                    f"{res.stdout}\n{res.stderr}",
                    pytrace=False,
                )
        cloud = json.loads(CLOUD_JSON.read_text())
    yield cloud
    if (
        not was_up
        and not under_xdist()
        and os.environ.get("SWFLOWS_KEEP_DEVCLOUD") != "1"
    ):
        res = run_devcloud("down")
        assert res.returncode == 0, res.stdout + res.stderr


# ---------------------------------------------------------------- helpers


def keystone_auth(cloud: dict[str, Any], who: str = "demo") -> v3.Password:
    """Password auth of ``cloud["keystone"][who]`` ("admin" or "demo")."""
    from keystoneauth1.identity import v3

    ks = cloud["keystone"]
    return v3.Password(auth_url=ks["auth_url"], **ks[who])


def keystone_session(cloud: dict[str, Any], who: str = "demo") -> ks_session.Session:
    from keystoneauth1 import session as ks_session

    return ks_session.Session(auth=keystone_auth(cloud, who))


def stack_domain_admin_session(cloud: dict[str, Any]) -> ks_session.Session:
    """The stack domain admin, with a token scoped to the stack domain."""
    from keystoneauth1 import session as ks_session
    from keystoneauth1.identity import v3

    ks = cloud["keystone"]
    domain = ks["stack_user_domain_id"]
    return ks_session.Session(
        auth=v3.Password(
            auth_url=ks["auth_url"],
            username=ks["stack_domain_admin"],
            password=ks["stack_domain_admin_password"],
            user_domain_id=domain,
            domain_id=domain,
        )
    )


def swift_connection(
    cloud: dict[str, Any], who: str = "demo"
) -> swift_client.Connection:
    """Swift as a real cloud has it: a Keystone session of ``who`` ("demo"
    or "admin"), the object-store endpoint of its catalog, and so the
    account of its project."""
    from swiftclient import client as swift_client

    return swift_client.Connection(
        session=keystone_session(cloud, who),
        os_options={"service_type": cloud["swift"]["service_type"]},
        retries=0,
    )


# --------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def keystone_admin_session(devcloud: dict[str, Any]) -> ks_session.Session:
    return keystone_session(devcloud, "admin")


@pytest.fixture(scope="session")
def keystone_demo_session(devcloud: dict[str, Any]) -> ks_session.Session:
    return keystone_session(devcloud, "demo")


@pytest.fixture(scope="session")
def stack_domain_admin(devcloud: dict[str, Any]) -> ks_session.Session:
    return stack_domain_admin_session(devcloud)


@pytest.fixture(scope="session")
def swift_conn(devcloud: dict[str, Any]) -> swift_client.Connection:
    return swift_connection(devcloud)


@pytest.fixture(scope="session")
def zaqar_url(devcloud: dict[str, Any]) -> str:
    return str(devcloud["zaqar"]["url"])


@pytest.fixture(scope="session")
def nova_url(devcloud: dict[str, Any]) -> str:
    return str(devcloud["nova"]["url"])


@pytest.fixture(scope="session")
def zookeeper_hosts(devcloud: dict[str, Any]) -> str:
    """The dev cloud's ZooKeeper, as kazoo's ``hosts``: ``127.0.0.1:port``."""
    zk = devcloud["zookeeper"]
    return f"{zk['host']}:{zk['port']}"
