"""Swift found as a real cloud has it: in the Keystone catalog.

swflows is given Keystone credentials and nothing about Swift (no URL, no
account), once as an operator's configuration file (``[object_store]``
borrows ``[identity]``'s login) and once as an embedder's keystoneauth1
session (Heat's plugin, through :func:`swflows.embedding.from_session`).
Either way it finds the ``object-store`` endpoint in the token's catalog,
uses the account of the user's project, makes TEMP_URL_SIGNAL TempURLs
that an agent PUTs to without a token, and the watcher's periodic sweep
of signal stores works on that account (no sweep failure counted or
logged).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from cryptography import fernet

from swflows import conf as sw_conf
from swflows import states
from swflows.api import Swflows
from swflows.embedding import from_session
from tests.functional import conftest, flowkit
from tests.functional.flowkit import leftovers
from tests.functional.test_flows import script_config
from tests.functional.test_runner import FINAL, parked, signal_inputs, until

#: the shortest sweep interval swflows accepts
SWEEP_INTERVAL = 1.0


def keystone_only_conf(devcloud: dict[str, Any], folder: Path) -> Path:
    """An operator's file: a database, a Keystone login, and Swift by that
    login; nothing else (no Zaqar, no Nova, no Swift URL)."""
    ks = devcloud["keystone"]
    demo = ks["demo"]
    text = f"""\
[database]
connection = sqlite:///{folder / "swflows.sqlite"}

[identity]
auth_type = password
auth_url = {ks["auth_url"]}
username = {demo["username"]}
password = {demo["password"]}
project_name = {demo["project_name"]}
user_domain_id = {demo["user_domain_id"]}
project_domain_id = {demo["project_domain_id"]}

[object_store]
auth_section = identity

[watcher]
poll_interval = {flowkit.POLL_INTERVAL}
max_poll_interval = {flowkit.MAX_POLL_INTERVAL}
sweep_interval = {SWEEP_INTERVAL}
"""
    assert devcloud["swift"]["proxy_url"] not in text
    path = folder / "swflows.conf"
    path.touch(mode=0o600)
    path.write_text(text)
    return path


@contextlib.contextmanager
def from_file(devcloud: dict[str, Any], folder: Path) -> Iterator[Swflows]:
    path = keystone_only_conf(devcloud, folder)
    made = Swflows.from_conf(sw_conf.get_conf(config_files=[str(path)]))
    try:
        yield made
    finally:
        made.close()
        made.store.close()


@contextlib.contextmanager
def from_embedder(devcloud: dict[str, Any], folder: Path) -> Iterator[Swflows]:
    conf = sw_conf.get_conf()
    conf.set_override("poll_interval", flowkit.POLL_INTERVAL, "watcher")
    conf.set_override("max_poll_interval", flowkit.MAX_POLL_INTERVAL, "watcher")
    conf.set_override("sweep_interval", SWEEP_INTERVAL, "watcher")
    # the session's catalog for every service it has, as Heat's plugin does
    made = from_session(
        conftest.keystone_session(devcloud, "demo"),
        f"sqlite:///{folder / 'swflows.sqlite'}",
        secret_key=fernet.Fernet.generate_key(),
        conf=conf,
    )
    try:
        yield made
    finally:
        made.close()
        made.store.close()


BUILDERS = {"configuration file": from_file, "embedder's session": from_embedder}


@pytest.mark.parametrize("how", list(BUILDERS))
def test_swift_from_the_catalog_signals_and_sweeps(
    devcloud: dict[str, Any],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    how: str,
) -> None:
    caplog.set_level(logging.WARNING, logger="swflows")
    with BUILDERS[how](devcloud, tmp_path) as sw:
        clients = sw.services.clients
        assert clients.offers("object_store")
        # the catalog's endpoint, with the demo project's account in it
        account = devcloud["swift"]["accounts"]["demo"]
        assert clients.object_store.account_url == account

        dep = sw.deploy(
            str(uuid.uuid4()),
            script_config(sw).id,
            signal_transport="TEMP_URL_SIGNAL",
            timeout=60,
            wait=False,
        )
        until(lambda: parked(sw, dep.id), what="the flow to park")
        url = signal_inputs(sw, dep.id)["deploy_signal_id"]
        assert url.startswith(f"{account}/") and "temp_url_sig=" in url
        # the agent's PUT: no token, the TempURL alone
        body = json.dumps(FINAL)
        requests.put(url, data=body, timeout=10).raise_for_status()
        assert sw.wait(dep.id, timeout=30).status == states.COMPLETE
        assert leftovers(sw, dep.id) == {}

        # a late PUT makes the object again (201: Swift wrote it; a look
        # here could race the 1 s sweep); only the periodic sweep, listing
        # the account found in the catalog, removes it
        late = requests.put(url, data=body, timeout=10)
        assert late.status_code == 201, late.text
        until(
            lambda: leftovers(sw, dep.id) == {},
            timeout=20 * SWEEP_INTERVAL,
            what="the periodic sweep to remove the late signal",
        )
        # and the channel sweep that follows it in the same turn
        time.sleep(1.5 * SWEEP_INTERVAL)
        watcher = sw.runner.watcher
        sw.undeploy(dep.id)
    failed = {step: n for step, n in watcher.failures.items() if "sweep" in step}
    assert failed == {}
    logged = [r.getMessage() for r in caplog.records if "failed for" in r.getMessage()]
    assert logged == []
