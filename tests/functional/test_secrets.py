"""No secret made during a run is in clear in the database or the logs.

The run deploys through every signal transport that makes a secret: stack
users' passwords (HEAT_SIGNAL, ZAQAR_SIGNAL with credentials), the account
TempURL key and the TempURLs' signatures (TEMP_URL_SIGNAL, POLL_TEMP_URL),
and Zaqar signed URLs' signatures (ZAQAR_SIGNAL, ZAQAR_MESSAGE).  swflows
makes no EC2 credentials (CFN_SIGNAL is refused), so there are none to look
for.  Every table is read, the TaskFlow logbook's included, while the flows
are parked (their logbooks exist) and again once they ended.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from swflows import derive, states
from swflows.api import Swflows
from swflows.transports import impl_heat
from tests.functional.fakeserver import FakeServer
from tests.functional.test_agent import agent_server
from tests.functional.test_cli import Cli, setup, write  # noqa: F401 (a fixture)
from tests.functional.test_flows import script_config
from tests.functional.test_runner import instance, parked, until

#: (signal transport, config transport, zaqar auth)
RUNS = [
    ("TEMP_URL_SIGNAL", "POLL_TEMP_URL", "signed_url"),
    ("ZAQAR_SIGNAL", "ZAQAR_MESSAGE", "signed_url"),
    ("ZAQAR_SIGNAL", "POLL_SERVER_HEAT", "credentials"),
    ("HEAT_SIGNAL", "POLL_SERVER_HEAT", "signed_url"),
]


def dump(database: Path) -> dict[str, str]:
    """Every row of every table, as text, by table."""
    with contextlib.closing(sqlite3.connect(database)) as db:
        tables = [
            row[0]
            for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        # the logbook is there, under the store's prefix
        assert {"swflows_tf_logbooks", "swflows_tf_atomdetails"} <= set(tables)
        return {
            table: "\n".join(
                " ".join(str(v) for v in row)
                for row in db.execute(f'SELECT * FROM "{table}"')  # noqa: S608
            )
            for table in tables
        }


def secrets_of(sw: Swflows, deployment_id: str) -> set[str]:
    """The secrets a deployment's derived config hands its agent."""
    dep = sw.show(deployment_id)
    assert dep.config_id is not None
    inputs = {i.name: i.value for i in sw.get_config(dep.config_id).inputs}
    found = {impl_heat.stack_user_password(sw.services, deployment_id)}
    signal_id = inputs.get(derive.DEPLOY_SIGNAL_ID)
    if isinstance(signal_id, str) and "temp_url_sig" in signal_id:
        found.add(parse_qs(urlsplit(signal_id).query)["temp_url_sig"][0])
    signed = inputs.get(derive.DEPLOY_QUEUE_SIGNED_URL)
    if signed:
        signed = json.loads(signed) if isinstance(signed, str) else signed
        found.add(signed["signature"])
    return found


def server_secrets(sw: Swflows, server_id: str) -> set[str]:
    channel = sw.services.store.get_server(server_id).channel or {}
    collect = channel.get("os-collect-config", {})
    found = set()
    if "request" in collect:
        url = collect["request"]["metadata_url"]
        found.add(parse_qs(urlsplit(url).query)["temp_url_sig"][0])
    if "zaqar" in collect:
        found.add(collect["zaqar"]["signed_url"]["signature"])
    return found


def test_no_secret_in_clear(
    devcloud: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    database = tmp_path / "swflows.sqlite"
    secrets: set[str] = set()
    for signal, config_transport, auth in RUNS:
        folder = tmp_path / f"{signal}-{config_transport}-{auth}"
        folder.mkdir()
        with instance(devcloud, folder, zaqar_signal_auth=auth) as sw:
            database = folder / "swflows.sqlite"
            config = script_config(sw)
            server = str(uuid.uuid4())
            dep = sw.deploy(
                server,
                config.id,
                timeout=60,
                wait=False,
                signal_transport=signal,
                config_transport=config_transport,
            )
            until(lambda: parked(sw, dep.id), what="the flow to park")  # noqa: B023
            made = secrets_of(sw, dep.id) | server_secrets(sw, server)
            made.add(sw.services.clients.object_store.tempurl_key())
            assert all(len(s) >= 16 for s in made), "too short to search for"
            secrets |= made
            parked_dump = dump(database)
            with FakeServer(sw, server):
                assert sw.wait(dep.id, timeout=60).status == states.COMPLETE
            time.sleep(0.2)
            for tables in (parked_dump, dump(database)):
                leaked = [
                    (table, secret[:6])
                    for secret in made
                    for table, text in tables.items()
                    if secret in text
                ]
                assert leaked == [], f"{signal}/{config_transport}: secret in clear"
            sw.undeploy(dep.id)
    # the test's own agent GETs and PUTs TempURLs, whose request lines
    # urllib3 logs at DEBUG; swflows itself never requests a TempURL
    logged = [
        (r.name, r.getMessage())
        for r in caplog.records
        if r.name != "urllib3.connectionpool"
    ]
    assert logged, "nothing was logged: the log check would prove nothing"
    leaked = sorted(
        {
            (name, secret[:6])
            for name, text in logged
            for secret in secrets
            if secret in text
        }
    )
    assert leaked == []


#: a hidden input's value: long and distinctive, so no ciphertext holds it
HIDDEN_VALUE = "hunter2-very-secret-9f3c"
HIDDEN_DEFAULT = "default-key-7d1e-not-in-clear"
HIDDEN_SCRIPT = """#!/bin/sh
echo "connecting with $db_password"
echo "api key $api_key" >&2
printf '%s' "$db_password" | sha256sum | cut -d' ' -f1 | tr -d '\\n' \\
  > "$heat_outputs_path.digest"
printf '%s' "$api_key" | sha256sum | cut -d' ' -f1 | tr -d '\\n' \\
  > "$heat_outputs_path.key_digest"
printf '%s' "$db_password" > "$heat_outputs_path.echoed"
"""
HIDDEN_DEFINITION = {
    "inputs": [
        {"name": "db_password", "hidden": True},
        {"name": "api_key", "hidden": True, "default": HIDDEN_DEFAULT},
    ],
    "outputs": [{"name": "digest"}, {"name": "key_digest"}, {"name": "echoed"}],
}


def stored_bytes(folder: Path) -> bytes:
    """Every row of every table of the store in ``folder`` (the TaskFlow
    logbook's included), and the bytes of its SQLite file, WAL included."""
    tables = dump(folder / "swflows.sqlite")
    files = sorted(folder.glob("swflows.sqlite*"))
    assert folder / "swflows.sqlite-wal" in files, files
    return "\n".join(tables.values()).encode() + b"".join(
        path.read_bytes() for path in files
    )


def test_a_hidden_input_reaches_the_hook_and_is_nowhere_in_clear(
    setup: tuple[Cli, Swflows],  # noqa: F811 (the fixture)
) -> None:
    """Deployed through the command line to a server running swflows'
    agent: the hook gets the values (it signals their hashes), and the
    store, the logbook, the WAL, the views and the stdout, stderr and
    outputs it echoed them in do not hold them."""
    cli, sw = setup
    config = cli.json(
        "config",
        "create",
        "db",
        "--group",
        "script",
        "--config-file",
        write(cli.folder / "db.sh", HIDDEN_SCRIPT),
        "--definition-file",
        write(cli.folder / "db.yaml", HIDDEN_DEFINITION),
    )
    assert config["inputs"][1]["default"] == "******"
    with agent_server(sw, cli.folder / "server") as server:
        done = cli(
            "deployment",
            "create",
            "db",
            "--server",
            server.id,
            "--config",
            config["id"],
            "--input-value",
            f"db_password={HIDDEN_VALUE}",
            "--wait",
            "-f",
            "json",
        )
        dep = json.loads(done.stdout)
        assert dep["status"] == states.COMPLETE, done.stderr
        assert dep["input_values"] == {"db_password": "******"}
        outputs = dep["output_values"]
        assert outputs["digest"] == hashlib.sha256(HIDDEN_VALUE.encode()).hexdigest()
        assert (
            outputs["key_digest"] == hashlib.sha256(HIDDEN_DEFAULT.encode()).hexdigest()
        )
        assert outputs["echoed"] == "***"
        assert outputs["deploy_stdout"] == "connecting with ***\n"
        assert outputs["deploy_stderr"] == "api key ***\n"
        shown = [
            cli("deployment", "show", dep["id"]).stdout,
            cli("deployment", "show", dep["id"], "-f", "json").stdout,
            cli("deployment", "list", "-f", "json").stdout,
            cli("config", "show", config["id"], "-f", "json").stdout,
            cli("deployment", "output", "show", dep["id"], "--all").stdout,
            cli("deployment", "metadata", "show", server.id, "-f", "json").stdout,
            done.stderr,
        ]
        stored = stored_bytes(cli.folder)
        for secret in (HIDDEN_VALUE, HIDDEN_DEFAULT):
            assert secret.encode() not in stored, "a hidden value stored in clear"
            assert all(secret not in text for text in shown), "shown in clear"
        # the server's metadata document holds them: its hook must read them
        document = sw.server_metadata(server.id)
        assert HIDDEN_VALUE in json.dumps(document)
        cli("deployment", "delete", dep["id"])
    assert HIDDEN_VALUE.encode() not in stored_bytes(cli.folder)
