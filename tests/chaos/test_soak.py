"""The chaos soak, on a Redis and on a ZooKeeper jobboard (see
:mod:`tests.chaos.soak` and docs/scale-out.md): conductors and watcher
standbys killed and frozen under a stream of operations to real agents,
then the invariants.  It fails when any is broken, after listing them
all."""

from __future__ import annotations

import contextlib
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swflows import transport_names as names
from swflows.api import Swflows
from tests.chaos.conftest import DEFAULT_SEEDS
from tests.chaos.soak import SUMMARIES, Soak
from tests.functional.flowkit import keystone as devcloud_keystone
from tests.functional.test_enrollment import standin
from tests.functional.test_jobboard import BOARDS, Setup
from tests.functional.test_trusts import demo2_caller

__all__ = ["standin"]  # a fixture, used by name

#: short, so that a frozen conductor loses its claims and a killed one its
#: flows within a run of a minute
CLAIM_EXPIRY = 5
DATABASE_FIXTURES = {"postgresql": "pg_url", "mariadb": "mysql_url"}


@pytest.fixture(params=BOARDS)
def setup(
    request: pytest.FixtureRequest,
    devcloud: dict[str, Any],
    tmp_path: Path,
    standin: str,
) -> Iterator[Setup]:
    url = request.getfixturevalue(
        DATABASE_FIXTURES[request.config.getoption("--database")]
    )
    made = Setup(request.param, devcloud, url, tmp_path, CLAIM_EXPIRY)
    suffix = uuid.uuid4().hex[:10]
    ks = devcloud["keystone"]
    # deferred work of deployments made by a caller acts through a trust
    trustee = devcloud_keystone.ensure_trustee(ks["auth_url"], ks["admin"]["password"])
    with made.conf_path.open("a") as out:
        out.write(
            f"[compute]\nendpoint_override = {standin}\n"
            f"[DEFAULT]\nsignal_container = swflows-chaos-{suffix}\n"
            f"metadata_container = swflows-chaos-meta-{suffix}\n"
            f"zaqar_signal_auth = {names.ZAQAR_AUTH_CREDENTIALS}\n"
            "deferred_auth_method = trusts\n"
            "[trustee]\nauth_type = password\n"
            + "".join(f"{key} = {value}\n" for key, value in trustee.items())
            + "[watcher]\nsweep_interval = 86400\n"
            f"[coordination]\nleader_timeout = {CLAIM_EXPIRY}\n"
        )
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def sw(setup: Setup) -> Iterator[Swflows]:
    """The embedder: posts the operations, drives no flow, stands down
    from the watcher election."""
    made = Swflows.from_conf(setup.conf())
    try:
        yield made
    finally:
        swift = made.services.clients.object_store
        for container in (made.conf.signal_container, made.conf.metadata_container):
            with contextlib.suppress(Exception):
                swift.delete_container(container, force=True)
        made.close()
        made.store.close()


def test_chaos_soak(
    request: pytest.FixtureRequest,
    devcloud: dict[str, Any],
    setup: Setup,
    sw: Swflows,
    tmp_path: Path,
) -> None:
    if shutil.which("stress-ng") is None:
        pytest.fail(
            "the soak's overload fault needs stress-ng: `tools/services start` "
            "installs it (apt-get install stress-ng)",
            pytrace=False,
        )
    option = request.config.getoption
    seed = option("--seed")
    soak = Soak(
        setup,
        sw,
        tmp_path,
        cloud=devcloud,
        caller=lambda: demo2_caller(devcloud)[1],
        seed=DEFAULT_SEEDS.get(setup.kind, 1) if seed is None else seed,
        minutes=option("--minutes"),
        servers=option("--servers"),
        conductors=option("--conductors"),
        claim_expiry=CLAIM_EXPIRY,
    )
    report = soak.run()
    lines = report.lines()
    print("\n".join(lines))
    # in the terminal summary too, whatever the capture
    request.config.stash.setdefault(SUMMARIES, []).append("\n".join(lines))
    assert not report.violations, "\n".join(lines)
