"""The ``swflows`` executable as a subprocess against the dev cloud.

Each test writes a configuration file into its tmp_path (its own SQLite
store) and runs the real command with ``--config-file``.  The test's own
Swflows, on the same file, only enrolls servers and reads the store: its
runner is closed at once, so every flow is driven by a ``swflows``
process.  Servers are the real agent (``swflows-agent``), or nobody.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from swflows import conf as sw_conf
from swflows import projects, states
from swflows.api import Swflows
from swflows.cli.parsing import ExitCode
from swflows.persistence import Store
from tests.functional import flowkit
from tests.functional.test_agent import agent_server
from tests.functional.test_runner import until

COMPONENT = {
    "configs": [
        {
            "actions": ["CREATE", "UPDATE"],
            "tool": "script",
            "config": '#!/bin/sh\necho "deploy $foo"\n'
            "printf 'made-%s' \"$foo\" > $heat_outputs_path.result\n",
        },
        {
            "actions": ["BACKUP"],
            "tool": "script",
            "config": "#!/bin/sh\nprintf 'backup-%s' \"$foo\" > "
            "$heat_outputs_path.result\n",
        },
    ]
}
DEFINITION = {
    "inputs": [{"name": "foo", "default": "x"}],
    "outputs": [{"name": "result"}],
}


def command() -> list[str]:
    script = Path(sys.executable).with_name("swflows")
    return [str(script)] if script.exists() else [sys.executable, "-m", "swflows.cli"]


class Cli:
    """Runs ``swflows --config-file <conf> ...`` and checks its exit status."""

    def __init__(self, folder: Path, conf: Path) -> None:
        self.folder = folder
        self.conf = conf
        self.env = {k: v for k, v in os.environ.items() if k != "SWFLOWS_CONFIG"}

    def __call__(
        self, *args: str, rc: int = 0, conf: list[Path] | None = None
    ) -> subprocess.CompletedProcess[str]:
        files = [self.conf] if conf is None else conf
        argv = [*command()]
        for path in files:
            argv += ["--config-file", str(path)]
        done = subprocess.run(
            [*argv, *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=180,
            check=False,
        )
        assert done.returncode == rc, (args, done.returncode, done.stdout, done.stderr)
        if rc == ExitCode.BAD_INPUT and "--debug" not in args:
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1, done.stderr
            assert lines[0].startswith("swflows: error: "), done.stderr
        if "--debug" not in args:
            assert "Traceback" not in done.stderr, done.stderr
        return done

    def json(self, *args: str, rc: int = 0) -> Any:
        return json.loads(self(*args, "-f", "json", rc=rc).stdout)

    def popen(self, *args: str, log: Path) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            return subprocess.Popen(
                [*command(), "--config-file", str(self.conf), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
            )


@pytest.fixture
def setup(devcloud: dict[str, Any], tmp_path: Path) -> Iterator[tuple[Cli, Swflows]]:
    conf = flowkit.write_conf(
        devcloud,
        tmp_path / "swflows.conf",
        database=f"sqlite:///{tmp_path / 'swflows.sqlite'}",
    )
    options = sw_conf.get_conf(config_files=[str(conf)])
    store = Store.from_conf(options)
    sw = Swflows.from_conf(options, store=store)
    sw.close()  # no runner here: the swflows processes drive every flow
    try:
        yield Cli(tmp_path, conf), sw
    finally:
        store.close()


def write(path: Path, data: Any) -> str:
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(path)


def test_configs_formats_and_bad_input(setup: tuple[Cli, Swflows]) -> None:
    cli, sw = setup
    script = write(cli.folder / "hello.sh", "#!/bin/sh\necho hello\n")
    definition = write(cli.folder / "def.yaml", DEFINITION)
    table = cli(
        "config",
        "create",
        "hello",
        "--config-file",
        script,
        "--definition-file",
        definition,
        "--group",
        "script",
    ).stdout
    assert "| group " in table and "script" in table
    config_id = sw.list_configs()[0].id
    shown = cli.json("config", "show", config_id)
    assert shown["config"] == "#!/bin/sh\necho hello\n"
    assert shown["inputs"][0]["name"] == "foo"  # nested values stay JSON
    listed = yaml.safe_load(cli("config", "list", "-f", "yaml").stdout)
    assert [c["id"] for c in listed] == [config_id]
    assert cli("config", "list", "-f", "value", "-c", "name").stdout == "hello\n"
    assert cli("config", "show", config_id, "--config-only", "-f", "value").stdout == (
        "#!/bin/sh\necho hello\n\n"
    )

    # NO_SIGNAL: COMPLETE without a server; metadata, outputs, list, delete
    server = str(uuid.uuid4())
    done = cli(
        "deployment",
        "create",
        "web",
        "--server",
        server,
        "--config",
        config_id,
        "--input-value",
        "foo=a=b",
        "--signal-transport",
        "NO_SIGNAL",
        "--wait",
        "-f",
        "json",
    )
    dep = json.loads(done.stdout)
    assert dep["status"] == states.COMPLETE and dep["input_values"] == {"foo": "a=b"}
    assert "COMPLETE" in done.stderr  # progress: plain lines, not a terminal
    meta = cli.json("deployment", "metadata", "show", server)
    assert [(m["name"], m["action"], m["inputs"]) for m in meta] == [
        ("web", "CREATE", {"foo": "a=b"})
    ]
    rows = cli(
        "deployment",
        "list",
        "--server",
        server,
        "--status",
        "COMPLETE",
        "-f",
        "value",
        "-c",
        "id",
        "-c",
        "status",
    ).stdout
    assert rows == f"{dep['id']} COMPLETE\n"
    assert cli.json("deployment", "list", "--status", "FAILED") == []
    assert cli.json("deployment", "output", "show", dep["id"], "--all") == {}
    table = cli("deployment", "show", dep["id"]).stdout
    assert "not_waiting" in table
    assert cli.json("flow", "list") == []
    assert cli.json("flow", "list", "--interrupted") == []
    assert cli("flow", "resume", "--all").stdout == "no interrupted flow\n"

    # bad input: one line on stderr, exit 2
    bad = ExitCode.BAD_INPUT
    cli("config", "show", "no-such-config", rc=bad)
    cli("deployment", "create", "x", "--server", server, "--config", "nope", rc=bad)
    err = cli(
        "deployment",
        "create",
        "x",
        "--server",
        server,
        "--config",
        config_id,
        "--input-value",
        "foo",
        rc=bad,
    ).stderr
    assert "--input-value: 'foo' is not KEY=VALUE" in err
    err = cli(
        "deployment",
        "create",
        "x",
        "--server",
        server,
        "--config",
        config_id,
        "--signal-transport",
        "CARRIER_PIGEON",
        rc=bad,
    ).stderr
    assert "unknown transport 'CARRIER_PIGEON'" in err
    err = cli(
        "config",
        "create",
        "y",
        "--config-file",
        script,
        "--definition-file",
        str(cli.folder / "missing.yaml"),
        rc=bad,
    ).stderr
    assert "missing.yaml" in err
    cli("config", "create", "y", "--config-file", str(cli.folder / "none.sh"), rc=bad)
    cli("deployment", "show", "nope", rc=bad)
    cli("deployment", "output", "show", dep["id"], "nothing", rc=bad)
    cli("deployment", "output", "show", dep["id"], rc=bad)
    cli("deployment", "cancel", dep["id"], rc=bad)  # not running
    cli(
        "deployment",
        "create",
        "x",
        "--server",
        server,
        "--config",
        config_id,
        "--timeout",
        "0",
        rc=bad,
    )
    cli("flow", "resume", "no-such-flow", rc=bad)
    cli("config", "delete", config_id, rc=bad)  # in use
    cli("config", "list", rc=bad, conf=[cli.folder / "no-such.conf"])
    debug = cli("--debug", "config", "show", "nope", rc=bad).stderr
    assert "Traceback" in debug
    # SWFLOWS_CONFIG is read when no --config-file is given
    env = {**cli.env, "SWFLOWS_CONFIG": str(cli.conf)}
    found = subprocess.run(
        [*command(), "config", "list", "-f", "value", "-c", "id"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert found.stdout == f"{config_id}\n"

    assert cli("deployment", "delete", dep["id"]).stdout == (
        f"deployment {dep['id']} deleted\n"
    )
    assert cli("config", "delete", config_id).stdout == f"config {config_id} deleted\n"
    assert sw.list_deployments() == [] and sw.list_configs() == []


def test_agent_deploy_trigger_redeploy_and_exit_codes(
    setup: tuple[Cli, Swflows],
) -> None:
    cli, sw = setup
    body = write(cli.folder / "component.yaml", COMPONENT)
    definition = write(cli.folder / "def.yaml", DEFINITION)
    config = cli.json(
        "config",
        "create",
        "db",
        "--config-file",
        body,
        "--definition-file",
        definition,
        "--group",
        "component",
    )
    failing = cli.json(
        "config",
        "create",
        "bad",
        "--group",
        "script",
        "--config-file",
        write(cli.folder / "bad.sh", "#!/bin/sh\necho broken >&2\nexit 3\n"),
    )
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
            "foo=one",
            "--timeout",
            "2",
            "--wait",
            "-f",
            "json",
        )
        dep = json.loads(done.stdout)
        assert dep["status"] == states.COMPLETE, done.stderr
        assert dep["timeout"] == 120
        # progress lines, ending with the outcome (a fast agent may finish
        # before a "waiting for the server's signal" line is ever shown)
        assert done.stderr.rstrip().endswith("COMPLETE: Outputs received")
        result = cli(
            "deployment", "output", "show", dep["id"], "result", "-f", "value"
        ).stdout
        assert result == "made-one\n"
        outputs = cli.json("deployment", "output", "show", dep["id"], "--all")
        assert outputs["deploy_stdout"] == "deploy one\n"

        backup = cli.json(
            "deployment",
            "trigger",
            dep["id"],
            "BACKUP",
            "--input-value",
            "foo=nightly",
            "--wait",
        )
        assert backup["name"] == "db-BACKUP" and backup["status"] == "COMPLETE"
        assert backup["output_values"]["result"] == "backup-nightly"

        again = cli.json(
            "deployment", "redeploy", dep["id"], "--input-value", "foo=two", "--wait"
        )
        assert again["action"] == "UPDATE" and again["generation"] == 2
        assert again["output_values"]["result"] == "made-two"

        err = cli(
            "deployment",
            "create",
            "bad",
            "--server",
            server.id,
            "--config",
            failing["id"],
            "--wait",
            rc=ExitCode.FAILED,
        ).stderr
        assert "FAILED (exit_code)" in err

        # an IN_PROGRESS deployment without --wait, watched to its end: its
        # script waits for a file, so the agent cannot finish it before the
        # command shows it (as it could under load, with any script)
        gate = cli.folder / "late.gate"
        gated = cli.json(
            "config",
            "create",
            "gated",
            "--group",
            "script",
            "--config-file",
            write(
                cli.folder / "gated.sh",
                f"#!/bin/sh\nwhile [ ! -e {gate} ]; do sleep 0.1; done\necho late\n",
            ),
        )
        late = cli.json(
            "deployment",
            "create",
            "late",
            "--server",
            server.id,
            "--config",
            gated["id"],
        )
        assert late["status"] == states.IN_PROGRESS
        gate.touch()
        watched = cli("deployment", "watch", late["id"], "-f", "value", "-c", "status")
        assert watched.stdout == "COMPLETE\n"

        ids = [d.id for d in sw.list_deployments(server_id=server.id)]
        cli("deployment", "delete", *ids)
        assert sw.list_deployments(server_id=server.id) == []
    assert flowkit.leftovers(sw, *ids) == {}


def test_timeouts_cancel_and_the_engine(setup: tuple[Cli, Swflows]) -> None:
    cli, sw = setup
    config = cli.json(
        "config",
        "create",
        "slow",
        "--group",
        "script",
        "--config-file",
        write(cli.folder / "slow.sh", "#!/bin/sh\nsleep 2\necho done\n"),
    )
    nobody = str(uuid.uuid4())  # a server without an agent

    # never picked up: exit 4 (a second --config-file layers the first)
    quick = cli.folder / "quick.conf"
    quick.write_text("[DEFAULT]\ndelivery_timeout = 1\n")
    err = cli(
        "deployment",
        "create",
        "lost",
        "--server",
        nobody,
        "--config",
        config["id"],
        "--wait",
        rc=ExitCode.TIMED_OUT,
        conf=[cli.conf, quick],
    ).stderr
    assert "FAILED (never_picked_up)" in err

    # cancelled: exit 5 for whoever follows it
    hung = cli.json(
        "deployment", "create", "hung", "--server", nobody, "--config", config["id"]
    )
    assert hung["status"] == states.IN_PROGRESS
    flows = cli.json("flow", "list", "--long")
    assert [(f["deployment_id"], f["state"], f["picked_up"]) for f in flows] == [
        (hung["id"], "PARKED", False)
    ]
    cancelled = cli.json("deployment", "cancel", hung["id"], "--reason", "test")
    assert cancelled["reason"] == {"kind": "cancelled", "by": "test"}
    err = cli("deployment", "watch", hung["id"], rc=ExitCode.CANCELLED).stderr
    assert "FAILED (cancelled)" in err

    # the engine: killed while a deployment waits, started again, it ends it
    with agent_server(sw, cli.folder / "server") as server:
        log = cli.folder / "engine.log"
        engine = cli.popen("engine", log=log)
        try:
            until(lambda: "running" in log.read_text(), 60, "the engine")
            dep = cli.json(
                "deployment",
                "create",
                "app",
                "--server",
                server.id,
                "--config",
                config["id"],
            )
            engine.send_signal(signal.SIGKILL)
            engine.wait(10)
            engine = cli.popen("engine", log=log)
            final = until(
                lambda: (
                    sw.show(dep["id"]).status != states.IN_PROGRESS
                    and sw.show(dep["id"])
                ),
                60,
                "the restarted engine",
            )
            assert final.status == states.COMPLETE, final.status_reason
            until(lambda: not sw.list_flows(), 30, "the flow to end")
            engine.send_signal(signal.SIGTERM)
            assert engine.wait(30) == 0, log.read_text()
            assert log.read_text().count("engine stopped") == 1
        finally:
            if engine.poll() is None:
                engine.kill()
                engine.wait(10)
        cli(
            "deployment",
            "delete",
            dep["id"],
            *[d.id for d in sw.list_deployments(server_id=nobody)],
        )
    assert sw.list_deployments() == []


def conf_with(cli: Cli, name: str, change: Any) -> Path:
    """A copy of the test's configuration with ``change`` applied to its text."""
    path = cli.folder / name
    path.write_text(change(cli.conf.read_text()))
    return path


def deploy_to_nowhere(cli: Cli, config: str, transport: str, *extra: str) -> Any:
    """Deployment ``d`` of ``config`` to a server no agent serves."""
    server = str(uuid.uuid4())
    argv = ("--server", server, "--config", config, "--signal-transport", transport)
    return cli.json("deployment", "create", "d", *argv, *extra)


def test_every_bad_input_is_one_line(setup: tuple[Cli, Swflows]) -> None:
    cli, sw = setup
    bad = ExitCode.BAD_INPUT
    script = write(cli.folder / "s.sh", "#!/bin/sh\necho hi\n")
    definition = write(cli.folder / "def.yaml", DEFINITION)
    config = cli.json(
        "config",
        "create",
        "s",
        "--config-file",
        script,
        "--definition-file",
        definition,
    )["id"]

    # arguments argparse refuses: one line naming the option and the value
    err = cli(
        "deployment",
        "create",
        "x",
        "--server",
        "s",
        "--config",
        config,
        "--timeout",
        "abc",
        rc=bad,
    ).stderr
    assert "--timeout" in err and "'abc'" in err
    err = cli("deployment", "list", "-f", "xml", rc=bad).stderr
    assert "-f/--format" in err and "'xml'" in err
    err = cli("deployment", "list", "--status", "BOGUS", rc=bad).stderr
    assert "--status" in err and "'BOGUS'" in err
    err = cli("deployment", "list", "-c", "id", "-c", "nosuchcol", rc=bad).stderr
    assert "'nosuchcol'" in err and "source_config_id" in err
    # an unknown command: on stderr, not stdout
    done = cli("deploymnt", "list", rc=bad)
    assert done.stdout == "" and "deployment list" in done.stderr

    # options the configuration file sets: the option, the value, the file
    for name, change, says in (
        (
            "v9.conf",
            lambda t: t.replace(
                "[object_store]\n", "[object_store]\nauth_version = v9\n"
            ),
            "[object_store] auth_version",
        ),
        ("many.conf", lambda t: t + "\n[runner]\nworkers = many\n", "[runner] workers"),
        (
            "url.conf",
            lambda t: t.replace("connection = sqlite", "connection = xx"),
            "[database] connection",
        ),
    ):
        path = conf_with(cli, name, change)
        err = cli("deployment", "list", rc=bad, conf=[path]).stderr
        assert says in err and str(path) in err, err
    env = {**cli.env, "SWFLOWS_CONFIG": str(cli.folder / "missing.conf")}
    done = subprocess.run(
        [*command(), "deployment", "list"], capture_output=True, text=True, env=env
    )
    assert done.returncode == bad
    assert done.stderr.startswith("swflows: error: SWFLOWS_CONFIG: "), done.stderr

    # silently accepted before
    err = cli("config", "create", "z", rc=bad).stderr
    assert "--config-file" in err
    err = cli("deployment", "list", "--server", "nosuch", rc=bad).stderr
    assert "nosuch" in err
    err = cli(
        "deployment",
        "create",
        "x",
        "--server",
        "s1",
        "--config",
        config,
        "--input-value",
        "nosuchinput=1",
        rc=bad,
    ).stderr
    assert "nosuchinput" in err and "its inputs: foo" in err
    enrolled = str(uuid.uuid4())
    sw.enroll_server(enrolled, "POLL_TEMP_URL")
    try:
        for transport, says in (("BAR", "unknown"), ("ZAQAR_MESSAGE", "POLL_TEMP_URL")):
            err = cli(
                "deployment",
                "create",
                "x",
                "--server",
                enrolled,
                "--config",
                config,
                "--config-transport",
                transport,
                "--signal-transport",
                "NO_SIGNAL",
                rc=bad,
            ).stderr
            assert says in err, err
        assert sw.list_deployments(server_id=enrolled) == []
    finally:
        sw.unenroll_server(enrolled)

    # one rule for the actions a script config runs: the deployment's
    dep = deploy_to_nowhere(cli, config, "NO_SIGNAL", "--wait")
    for argv in (
        ("trigger", dep["id"], "BACKUP"),
        ("redeploy", dep["id"], "--action", "FROB"),
    ):
        err = cli("deployment", *argv, rc=bad).stderr
        assert "not one of the deployment's actions (CREATE, UPDATE)" in err, err
    assert [d.name for d in sw.list_deployments()] == ["d"]
    listed = cli.json("deployment", "list")
    assert listed[0]["source_config_id"] == config
    assert "config_id" not in listed[0]


def test_cloud_failures_are_one_line(
    setup: tuple[Cli, Swflows], devcloud: dict[str, Any]
) -> None:
    """A refused login or an unreachable service: one line naming the
    service and what was being done; the traceback only with --debug."""
    cli, _ = setup
    server = str(uuid.uuid4())
    # an account of another project than the login's
    other = devcloud["swift"]["accounts"]["admin"]
    wrong_account = conf_with(
        cli,
        "account.conf",
        lambda t: t.replace(
            "[object_store]\n", f"[object_store]\nendpoint_override = {other}\n"
        ),
    )
    wrong_password = conf_with(
        cli,
        "password.conf",
        lambda t: re.sub(r"(?m)^password = .*$", "password = wrong", t, count=1),
    )
    no_keystone = conf_with(
        cli,
        "nokeystone.conf",
        lambda t: re.sub(
            r"(?m)^auth_url = http://[^/]*", "auth_url = http://127.0.0.1:9", t
        ),
    )
    cases = (
        (wrong_account, "POLL_TEMP_URL", "object-store", "403"),
        (wrong_password, "ZAQAR_MESSAGE", "identity", "401"),
        (no_keystone, "ZAQAR_MESSAGE", "unreachable", ""),
    )
    for path, transport, service, status in cases:
        argv = ("server", "enroll", server, "--config-transport", transport)
        err = cli(*argv, rc=ExitCode.ERROR, conf=[path]).stderr
        errors = [line for line in err.splitlines() if "error:" in line]
        assert len(errors) == 1 and service in errors[0] and status in errors[0], err
        assert all(line.startswith("swflows: ") for line in err.splitlines()), err
        debug = cli("--debug", *argv, rc=ExitCode.ERROR, conf=[path]).stderr
        assert "Traceback" in debug


def test_cancel_says_why(setup: tuple[Cli, Swflows]) -> None:
    cli, _ = setup
    script = write(cli.folder / "s.sh", "#!/bin/sh\nsleep 60\n")
    config = cli.json("config", "create", "s", "--config-file", script)["id"]
    dep = deploy_to_nowhere(cli, config, "TEMP_URL_SIGNAL")
    done = cli.json("deployment", "cancel", dep["id"], "--reason", "hangs")
    assert done["status"] == states.FAILED
    assert done["status_reason"] == "Deployment cancelled: hangs."


def test_a_servers_deploy_policy_set_at_enrollment_and_changed(
    setup: tuple[Cli, Swflows],
) -> None:
    cli, sw = setup
    server = str(uuid.uuid4())
    cli("server", "enroll", server, "--deploy-policy", "projects:p2,p3")
    try:
        shown = sw.deploy_policy(server)
        assert shown["policy"] == {
            "mode": "projects",
            "projects": ["p2", "p3"],
            "config_ids": [],
        }
        assert shown["project_id"] == "default"
        changed = cli.json(
            "server", "set", server, "--deploy-policy", "any", "--deploy-config", "c1"
        )
        assert changed["policy"] == {
            "mode": "any",
            "projects": [],
            "config_ids": ["c1"],
        }
        assert changed["changed_by"] == "-"
        assert changed["changed_at"] >= shown["changed_at"]
        bad = ExitCode.BAD_INPUT
        err = cli("server", "set", server, "--deploy-policy", "friends", rc=bad)
        assert "deploy_policy: mode must be one of project, projects, any" in err.stderr
        err = cli("server", "set", server, "--deploy-policy", "projects", rc=bad)
        assert "needs at least one project" in err.stderr
        err = cli("server", "set", str(uuid.uuid4()), "--deploy-policy", "any", rc=bad)
        assert "not found" in err.stderr
        assert sw.deploy_policy(server)["policy"]["mode"] == "any"
    finally:
        sw.unenroll_server(server)


@pytest.fixture
def project_b(
    devcloud: dict[str, Any], keystone_admin_session: Any
) -> Iterator[dict[str, str]]:
    """A project of its own with a member user, made through Keystone's
    admin API (removed afterwards)."""
    ks = keystone_admin_session
    ident = {"service_type": "identity", "interface": "public"}
    name = f"swflows-b-{uuid.uuid4().hex[:8]}"
    password = uuid.uuid4().hex
    project = ks.post(
        "/projects",
        json={"project": {"name": name, "domain_id": "default"}},
        endpoint_filter=ident,
    ).json()["project"]
    user = ks.post(
        "/users",
        json={
            "user": {
                "name": name,
                "password": password,
                "domain_id": "default",
                "default_project_id": project["id"],
            }
        },
        endpoint_filter=ident,
    ).json()["user"]
    try:
        (role,) = ks.get("/roles?name=member", endpoint_filter=ident).json()["roles"]
        ks.put(
            f"/projects/{project['id']}/users/{user['id']}/roles/{role['id']}",
            endpoint_filter=ident,
        )
        yield {"username": name, "password": password, "project_name": name}
    finally:
        ks.delete(f"/users/{user['id']}", endpoint_filter=ident)
        ks.delete(f"/projects/{project['id']}", endpoint_filter=ident)


def login_conf(path: Path, who: dict[str, str]) -> Path:
    """A configuration layer logging in as ``who`` ([identity])."""
    path.write_text(
        "[identity]\n"
        f"username = {who['username']}\n"
        f"password = {who['password']}\n"
        f"project_name = {who['project_name']}\n"
    )
    return path


def test_scoped_commands_act_as_the_logins_project(
    setup: tuple[Cli, Swflows], devcloud: dict[str, Any], project_b: dict[str, str]
) -> None:
    cli, sw = setup
    as_b = [cli.conf, login_conf(cli.folder / "b.conf", project_b)]
    as_admin = [
        cli.conf,
        login_conf(cli.folder / "admin.conf", devcloud["keystone"]["admin"]),
    ]
    script = cli.folder / "s.sh"
    script.write_text("#!/bin/sh\n")
    config = cli.json(
        "--scoped", "config", "create", "c", "--config-file", str(script)
    )["id"]
    server = str(uuid.uuid4())
    made = cli.json(
        "--scoped",
        "deployment",
        "create",
        "d",
        "--server",
        server,
        "--config",
        config,
        "--signal-transport",
        "NO_SIGNAL",
        "--wait",
    )
    assert made["status"] == "COMPLETE"
    # the demo login's project owns them
    owner = sw.store.get_owner(projects.DEPLOYMENT, made["id"])
    assert owner is not None and owner.project_id != "default"
    bad = ExitCode.BAD_INPUT

    def run(conf: list[Path], *args: str, rc: int = 0) -> Any:
        return cli("--scoped", *args, conf=conf, rc=rc)

    # project B: not found, not listed, no --all-projects
    err = run(as_b, "deployment", "show", made["id"], rc=bad).stderr
    assert f"deployment {made['id']} not found" in err
    err = run(as_b, "config", "show", config, rc=bad).stderr
    assert f"config {config} not found" in err
    listed = json.loads(run(as_b, "deployment", "list", "-f", "json").stdout)
    assert made["id"] not in [d["id"] for d in listed]
    err = run(as_b, "deployment", "list", "--all-projects", rc=bad).stderr
    assert "swflows:all_projects" in err
    # an admin lists every project's
    listed = json.loads(
        run(as_admin, "deployment", "list", "--all-projects", "-f", "json").stdout
    )
    assert made["id"] in [d["id"] for d in listed]
    # without --scoped the command is the single owner, as before
    assert cli.json("deployment", "show", made["id"])["id"] == made["id"]
    cli("--scoped", "deployment", "delete", made["id"])
