"""Enrolling servers against the dev cloud: channels made, moved and removed.

Servers booted through Nova run against a Nova stand-in of their own
(:func:`standin`), started from this tree's ``tools/nova_standin.py`` and
checking tokens with the dev cloud's Keystone: booting there starts a real
swflows agent process configured from the user_data it received.
"""

from __future__ import annotations

import base64
import configparser
import email
import functools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from swflows import bootdata, enrollment, exceptions, metadata, states
from swflows import transport_names as names
from swflows.api import Swflows
from swflows.clients.identity import StackUser
from swflows.engine.watcher import SERVER_CHECK_INTERVAL
from swflows.transports import impl_zaqar_message, server_user
from tests.functional import flowkit
from tests.functional.flowkit import leftovers, zaqar_queues
from tests.functional.test_agent import isolated, script_config
from tests.functional.test_cli import Cli
from tests.functional.test_runner import parked, put_signal, until

REPO = Path(__file__).resolve().parents[2]
STANDIN = REPO / "tools" / "nova_standin.py"
NOVA_CREDENTIALS = REPO / ".devcloud" / "state" / "nova" / "keystone.json"
WAIT = 90
KINDS = (server_user.HEAT, server_user.ZAQAR)


@pytest.fixture
def sw(devcloud: dict[str, Any], tmp_path: Path) -> Iterator[Swflows]:
    container = f"swflows-enroll-{uuid.uuid4().hex[:12]}"
    with isolated(devcloud, tmp_path / "swflows", metadata_container=container) as made:
        try:
            yield made
        finally:
            made.services.clients.object_store.delete_container(container, force=True)


def channel_leftovers(sw: Swflows, server_id: str, key: str | None = None) -> list[str]:
    """What the cloud still holds of a server's channel."""
    key = key or server_id
    swift = sw.services.clients.object_store
    container = sw.conf.metadata_container
    found = (
        [
            f"{container}/{o.name}"
            for o in swift.list_objects(container)
            if key in o.name
        ]
        if swift.container_exists(container)
        else []
    )
    found += zaqar_queues(impl_zaqar_message.queue_name(key))
    if sw.services.clients.offers("stack_users"):
        wanted = {server_user.name(key, kind) for kind in KINDS}
        users = sw.services.clients.stack_users
        found += [f"user {u.name}" for u in users.list_users() if u.name in wanted]
        found += [
            f"project {p.name}" for p in users.list_projects() if p.name in wanted
        ]
    return found


def metadata_document(sw: Swflows, server_id: str) -> dict[str, Any]:
    """The document the server reads, through its own channel (as an agent)."""
    section = sw.show_server(server_id)
    record = sw.store.get_server(server_id)
    channel = record.channel or {}
    if section["config_transport"] == names.POLL_TEMP_URL:
        url = channel["os-collect-config"]["request"]["metadata_url"]
        resp = requests.get(url, timeout=10)
        resp.raise_for_status()
        return dict(resp.json())
    # the newest message: a publisher posts, then deletes the older ones
    messages = sw.services.clients.messaging.list_messages(channel["queue"])
    return dict(messages[-1].body)


@pytest.mark.parametrize("transport", [names.POLL_TEMP_URL, names.ZAQAR_MESSAGE])
def test_enroll_deploy_signal_unenroll_leaves_nothing(
    sw: Swflows, transport: str
) -> None:
    server_id = str(uuid.uuid4())
    shown = sw.enroll_server(server_id, transport)
    assert shown["enrolled"] and shown["config_transport"] == transport
    assert shown["in_compute"] is False  # Nova does not know this id
    assert shown["deployments"] == []
    assert "os-collect-config" not in shown["channel"]
    first = sw.boot_data(server_id)
    doc = metadata_document(sw, server_id)
    assert doc["deployments"] == []
    collector = "request" if transport == names.POLL_TEMP_URL else "zaqar"
    assert doc["os-collect-config"]["collectors"] == [collector, "local"]

    again = sw.enroll_server(server_id)  # idempotent: same channel, same data
    assert again["channel"] == shown["channel"]
    assert sw.boot_data(server_id) == first

    config = script_config(sw, "#!/bin/sh\necho hi\n")
    dep = sw.deploy(
        server_id, config.id, signal_transport=names.TEMP_URL_SIGNAL, wait=False
    )
    until(lambda: metadata_document(sw, server_id)["deployments"], WAIT, "publish")
    put_signal(sw, dep.id, {"deploy_status_code": 0, "result": "ok"})
    done = sw.wait(dep.id, WAIT)
    assert done.status == states.COMPLETE, done.status_reason

    with pytest.raises(exceptions.ServerInUse, match=dep.id):
        sw.unenroll_server(server_id)
    assert sw.show_server(server_id)["deployments"] == [dep.id]
    sw.undeploy(dep.id)
    assert sw.unenroll_server(server_id) is True
    assert sw.unenroll_server(server_id) is False
    with pytest.raises(exceptions.ServerNotFound):
        sw.show_server(server_id)
    assert channel_leftovers(sw, server_id) == []
    assert leftovers(sw, dep.id) == {}


def test_forced_unenroll_cancels_and_undeploys(sw: Swflows) -> None:
    server_id = str(uuid.uuid4())
    sw.enroll_server(server_id, names.POLL_TEMP_URL)
    config = script_config(sw, "#!/bin/sh\necho hi\n")
    dep = sw.deploy(server_id, config.id, wait=False)
    assert sw.unenroll_server(server_id, force=True) is True
    with pytest.raises(exceptions.DeploymentNotFound):
        sw.show(dep.id)
    assert channel_leftovers(sw, server_id) == []
    assert leftovers(sw, dep.id) == {}


def test_transport_change_moves_the_channel(sw: Swflows) -> None:
    server_id = str(uuid.uuid4())
    sw.enroll_server(server_id, names.POLL_TEMP_URL)
    config = script_config(sw, "#!/bin/sh\necho hi\n")
    dep = sw.deploy(server_id, config.id, signal_transport=names.NO_SIGNAL)
    assert dep.status == states.COMPLETE
    old_object = f"{sw.conf.metadata_container}/{server_id}"
    assert channel_leftovers(sw, server_id) == [old_object]

    moved = sw.enroll_server(server_id, names.ZAQAR_MESSAGE)
    assert moved["config_transport"] == names.ZAQAR_MESSAGE
    queue = impl_zaqar_message.queue_name(server_id)
    assert moved["channel"] == {"queue": queue, "key": server_id}
    left = channel_leftovers(sw, server_id)
    assert old_object not in left and len(left) == 1 and left[0].endswith(queue)
    doc = metadata_document(sw, server_id)
    assert [d["id"] for d in doc["deployments"]] == [dep.config_id]
    occ = doc["os-collect-config"]
    assert occ["collectors"] == ["zaqar", "local"]
    assert occ["request"] == {"metadata_url": None}  # Heat's agents stop polling it
    agent_file = json.loads(sw.agent_config(server_id))
    assert agent_file["collectors"] == ["zaqar"] and "request" not in agent_file

    sw.undeploy(dep.id)
    sw.unenroll_server(server_id)
    assert channel_leftovers(sw, server_id) == []


def test_poll_server_heat_makes_the_users_heats_agents_need(sw: Swflows) -> None:
    server_id = str(uuid.uuid4())
    shown = sw.enroll_server(server_id, names.POLL_SERVER_HEAT)
    name = server_user.name(server_id, server_user.HEAT)
    assert channel_leftovers(sw, server_id) == [f"user {name}", f"project {name}"]
    assert set(shown["channel"]) == {"key", "user_id", "project_id"}
    ini = sw.agent_config(server_id, bootdata.HEAT_AGENTS)
    assert "collectors = heat" in ini
    assert f"user_id = {shown['channel']['user_id']}" in ini
    users = sw.services.clients.stack_users
    password = server_user.password(sw.services, server_id, server_user.HEAT)
    assert users.user_token_works(
        shown["channel"]["user_id"], password, shown["channel"]["project_id"]
    )
    with pytest.raises(exceptions.NotSupported):
        sw.boot_data(server_id, bootdata.SWFLOWS_AGENT)
    assert sw.unenroll_server(server_id)
    assert channel_leftovers(sw, server_id) == []


def test_bad_input_leaves_nothing(sw: Swflows) -> None:
    server_id = str(uuid.uuid4())
    with pytest.raises(exceptions.ValidationError, match="config_transport"):
        sw.enroll_server(server_id, "POLL_SERVER_CFN")
    with pytest.raises(exceptions.ValidationError, match="server_id"):
        sw.enroll_server("")
    with pytest.raises(exceptions.ServerNotFound):
        sw.boot_data(server_id)
    assert sw.store.list_servers() == []
    assert channel_leftovers(sw, server_id) == []


# -- servers booted through Nova ------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def standin(devcloud: dict[str, Any], tmp_path: Path) -> Iterator[str]:
    """A Nova stand-in of this test's own; its compute URL."""
    assert NOVA_CREDENTIALS.is_file(), f"no Nova service login at {NOVA_CREDENTIALS}"
    port = free_port()
    folder = tmp_path / "nova"
    folder.mkdir()
    log = folder / "standin.log"
    argv = [sys.executable, str(STANDIN), "--port", str(port)]
    argv += ["--data", str(folder / "servers.json")]
    argv += ["--keystone-config", str(NOVA_CREDENTIALS), "--agent-interval", "0.3"]
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            return requests.get(base + "/", timeout=2).status_code == 200
        except requests.ConnectionError:
            assert proc.poll() is None, log.read_text()
            return False

    try:
        until(answers, 60, "the Nova stand-in")
        yield base + "/v2.1"
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture
def nova_sw(
    devcloud: dict[str, Any], tmp_path: Path, standin: str
) -> Iterator[Swflows]:
    container = f"swflows-enroll-{uuid.uuid4().hex[:12]}"
    with isolated(
        devcloud,
        tmp_path / "swflows",
        metadata_container=container,
        compute__endpoint_override=standin,
    ) as made:
        try:
            yield made
        finally:
            made.services.clients.object_store.delete_container(container, force=True)


def standin_record(standin: str, server_id: str) -> dict[str, Any] | None:
    control = standin.removesuffix("/v2.1") + "/_standin/servers/" + server_id
    resp = requests.get(control, timeout=10)
    if resp.status_code == 404:
        return None
    resp.raise_for_status()
    return dict(resp.json()["server"])


def test_booted_server_runs_a_deployment_with_no_other_setup(
    nova_sw: Swflows, standin: str
) -> None:
    sw = nova_sw
    with pytest.raises(exceptions.CloudError, match="400"):
        sw.create_server("x" * 256, "cirros", "m1.tiny")  # Nova refuses the name
    swift = sw.services.clients.object_store
    assert swift.list_objects(sw.conf.metadata_container) == []  # channel removed
    assert sw.store.list_servers() == []

    shown = sw.create_server("web-1", "cirros", "m1.tiny")
    server_id, key = shown["server_id"], shown["channel"]["key"]
    assert shown["in_compute"] and shown["enrolled"] and server_id != key
    record = standin_record(standin, server_id)
    assert record is not None and record["agent"]["running"], record
    assert record["metadata"] == {
        enrollment.NOVA_CHANNEL_KEY: key,
        enrollment.NOVA_TRANSPORT_KEY: names.POLL_TEMP_URL,
    }
    assert sw.boot_data(server_id) == base64.b64decode(record["user_data"]).decode()

    config = script_config(
        sw,
        "#!/bin/sh\n"
        'printf "%s on $deploy_server_id" "$foo" > $heat_outputs_path.result\n',
    )
    dep = sw.deploy(server_id, config.id, input_values={"foo": "x"}, timeout=WAIT)
    assert dep.status == states.COMPLETE, dep.status_reason
    assert dep.output_values["result"] == f"x on {server_id}"

    sw.delete_server(server_id)
    assert standin_record(standin, server_id) is None
    with pytest.raises(exceptions.DeploymentNotFound):
        sw.show(dep.id)
    with pytest.raises(exceptions.ServerNotFound):
        sw.show_server(server_id)
    assert channel_leftovers(sw, server_id, key) == []
    assert leftovers(sw, dep.id) == {}
    with pytest.raises(exceptions.ServerNotFound):
        sw.delete_server(server_id)


def wait_for_value(check: Any, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_a_dead_agent_shows_in_server_show(nova_sw: Swflows, standin: str) -> None:
    sw = nova_sw
    server_id = sw.create_server("console-1", "cirros", "m1.tiny")["server_id"]
    record = standin_record(standin, server_id)
    assert record is not None and record["agent"]["running"], record
    assert "console" not in sw.show_server(server_id)  # only when asked

    os.kill(record["agent"]["pid"], signal.SIGKILL)
    shown = wait_for_value(
        lambda: (
            "exited" in (sw.show_server(server_id, console_lines=3)["console"])
            and sw.show_server(server_id, console_lines=3)
        )
    )
    assert shown, sw.show_server(server_id, console_lines=3)
    tail = shown["console"].splitlines()
    assert len(tail) <= 3
    assert tail[-1] == "[swflows-agent exited with status -9]"
    sw.delete_server(server_id)


def test_a_server_enrolled_without_nova_has_no_console(nova_sw: Swflows) -> None:
    sw = nova_sw
    sw.enroll_server("console-not-in-nova")
    shown = sw.show_server("console-not-in-nova", console_lines=5)
    assert shown["in_compute"] is False and "console" not in shown
    sw.unenroll_server("console-not-in-nova")


@pytest.mark.parametrize("how", ["deleted", "ERROR"])
def test_server_gone_fails_a_waiting_deployment_at_once(
    nova_sw: Swflows, standin: str, how: str
) -> None:
    sw = nova_sw
    # Heat's agents: the stand-in starts no agent, so the deployment waits
    shown = sw.create_server("db-1", "cirros", "m1.tiny", agent=bootdata.HEAT_AGENTS)
    server_id, key = shown["server_id"], shown["channel"]["key"]
    assert (standin_record(standin, server_id) or {})["agent"]["running"] is False
    config = script_config(sw, "#!/bin/sh\necho never\n")
    dep = sw.deploy(server_id, config.id, timeout=3600, wait=False)
    until(lambda: parked(sw, dep.id), WAIT, "the deployment to wait")
    control = standin.removesuffix("/v2.1") + "/_standin/servers/" + server_id
    started = time.monotonic()
    if how == "deleted":
        assert sw.services.clients.compute.delete_server(server_id)
    else:
        requests.put(control, json={"status": "ERROR"}, timeout=10).raise_for_status()
    done = sw.wait(dep.id, WAIT)
    took = time.monotonic() - started
    assert done.status == states.FAILED
    assert done.reason == {
        "kind": "server_gone",
        "server_id": server_id,
        "detail": "server deleted" if how == "deleted" else "server in ERROR",
    }
    assert done.status_reason.endswith(done.reason["detail"])
    print(f"server {how}: the deployment failed {took:.2f} s later")
    assert took < 30, f"{took:.1f} s"
    sw.delete_server(server_id)  # undeploys and unenrolls; Nova may be done
    assert channel_leftovers(sw, server_id, key) == []
    assert leftovers(sw, dep.id) == {}


# -- the docs' example --------------------------------------------------------

DOCS = REPO / "docs" / "enrollment.md"


def docs_example() -> str:
    text = DOCS.read_text()
    match = re.search(r"```python\n(.*?)```", text, re.S)
    assert match, "docs/enrollment.md has no python block"
    return match.group(1)


def test_docs_example_for_an_existing_server(sw: Swflows, tmp_path: Path) -> None:
    server_id = str(uuid.uuid4())
    agents: list[subprocess.Popen[bytes]] = []
    log = tmp_path / "agent.log"

    def start_agent(path: Path) -> None:
        argv = [sys.executable, "-m", "swflows.agent", "--config-file", str(path)]
        argv += ["--state-dir", str(tmp_path / "state"), "--interval", "0.3"]
        with log.open("ab") as out:
            agents.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT))

    names_ = {
        "sw": sw,
        "server_id": server_id,
        "agent_file": tmp_path / "agent.json",
        "start_agent": start_agent,
    }
    try:
        exec(compile(docs_example(), str(DOCS), "exec"), names_)  # noqa: S102
    finally:
        for proc in agents:
            proc.terminate()
            proc.wait(30)
    assert "Traceback" not in log.read_text()
    assert channel_leftovers(sw, server_id) == []


@pytest.mark.parametrize("transport", [names.POLL_TEMP_URL, names.ZAQAR_MESSAGE])
def test_boot_data_size(sw: Swflows, transport: str) -> None:
    """Well under Nova's limit (the docs say 2.1 to 2.6 KiB)."""
    server_id = str(uuid.uuid4())
    sw.enroll_server(server_id, transport)
    try:
        for agent in bootdata.AGENTS:
            if (agent, transport) == (bootdata.HEAT_AGENTS, names.ZAQAR_MESSAGE):
                continue
            size = len(base64.b64encode(sw.boot_data(server_id, agent).encode()))
            print(f"{transport} {agent}: {size} bytes in base64")
            assert size < 4096
    finally:
        sw.unenroll_server(server_id)


# -- the swflows server commands ---------------------------------------------


def test_server_commands(
    devcloud: dict[str, Any], tmp_path: Path, standin: str
) -> None:
    conf = flowkit.write_conf(
        devcloud,
        tmp_path / "swflows.conf",
        database=f"sqlite:///{tmp_path / 'swflows.sqlite'}",
    )
    with conf.open("a") as more:
        more.write(f"[compute]\nendpoint_override = {standin}\n")
    cli = Cli(tmp_path, conf)
    server_id = str(uuid.uuid4())
    shown = cli.json("server", "enroll", server_id)
    assert shown["config_transport"] == names.POLL_TEMP_URL and shown["enrolled"]
    assert cli.json("server", "show", server_id)["channel"] == shown["channel"]
    out = tmp_path / "user-data"
    cli("server", "boot-data", server_id, "--output", str(out))
    assert out.stat().st_mode & 0o777 == 0o600
    assert email.message_from_string(out.read_text()).is_multipart()
    ini = cli("server", "agent-config", server_id, "--agent", "heat").stdout
    assert ini.startswith("[DEFAULT]\n") and "[request]\nmetadata_url = http" in ini
    moved = cli.json(
        "server", "enroll", server_id, "--config-transport", "zaqar_message"
    )
    assert moved["config_transport"] == names.ZAQAR_MESSAGE
    refused = cli("server", "boot-data", server_id, "--agent", "heat", rc=2)
    assert "signed URL" in refused.stderr
    cli("server", "enroll", server_id, "--config-transport", "CFN", rc=2)
    cli("server", "show", str(uuid.uuid4()), rc=2)

    script = tmp_path / "hi.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    config = cli.json("config", "create", "hi", "--config-file", str(script))
    dep = cli.json(
        "deployment", "create", "hi", "--server", server_id,
        "--config", config["id"], "--signal-transport", "NO_SIGNAL",
    )  # fmt: skip
    refused = cli("server", "unenroll", server_id, rc=2)
    assert dep["id"] in refused.stderr and "force" in refused.stderr
    done = cli("server", "unenroll", server_id, "--force")
    assert done.stdout == f"server {server_id} unenrolled\n"
    assert cli("server", "unenroll", server_id).stdout.endswith("was not enrolled\n")

    booted = cli.json(
        "server", "create", "cli-1", "--image", "cirros", "--flavor", "m1.tiny"
    )
    assert booted["name"] == "cli-1" and booted["in_compute"]
    assert standin_record(standin, booted["server_id"]) is not None
    cli("server", "delete", booted["server_id"])
    assert standin_record(standin, booted["server_id"]) is None
    cli("server", "delete", booted["server_id"], rc=2)


def test_zaqar_message_with_credentials_for_heats_agents(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    """``zaqar_message_auth = credentials``: the server's own Keystone user
    reads a queue in its project, as Heat's zaqar collector needs; swflows'
    agent reads it the same way and runs a deployment."""
    with isolated(
        devcloud, tmp_path / "swflows", zaqar_message_auth="credentials"
    ) as sw:
        server_id = str(uuid.uuid4())
        shown = sw.enroll_server(server_id, names.ZAQAR_MESSAGE)
        assert set(shown["channel"]) == {"key", "queue", "user_id", "project_id"}
        queue = impl_zaqar_message.queue_name(server_id)
        user = server_user.name(server_id, server_user.ZAQAR)
        assert channel_leftovers(sw, server_id) == [
            f"{shown['channel']['project_id']}/{queue}",
            f"user {user}",
            f"project {user}",
        ]
        ini = configparser.ConfigParser(interpolation=None)
        ini.read_string(sw.agent_config(server_id, bootdata.HEAT_AGENTS))
        assert ini.get("DEFAULT", "collectors") == "zaqar"
        assert ini.get("zaqar", "queue_id") == queue
        assert ini.get("zaqar", "user_id") == shown["channel"]["user_id"]
        assert "signed_url" not in ini["zaqar"]
        assert email.message_from_string(
            sw.boot_data(server_id, bootdata.HEAT_AGENTS)
        ).is_multipart()

        conf = tmp_path / "agent.json"
        conf.write_text(sw.agent_config(server_id))
        argv = [sys.executable, "-m", "swflows.agent", "--config-file", str(conf)]
        argv += ["--state-dir", str(tmp_path / "state"), "--interval", "0.3"]
        log = tmp_path / "agent.log"
        with log.open("ab") as out:
            agent = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            config = script_config(
                sw, "#!/bin/sh\nprintf ok > $heat_outputs_path.result\n"
            )
            dep = sw.deploy(server_id, config.id, timeout=WAIT)
            assert dep.status == states.COMPLETE, (dep.status_reason, log.read_text())
            assert dep.output_values["result"] == "ok"
            sw.undeploy(dep.id)
        finally:
            agent.terminate()
            agent.wait(30)
        assert sw.enroll_server(server_id)["channel"] == shown["channel"]
        assert sw.unenroll_server(server_id)
        assert channel_leftovers(sw, server_id) == []
        assert leftovers(sw, dep.id) == {}


def test_server_check_costs_one_listing_per_interval(
    nova_sw: Swflows, standin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four waiting deployments on two Nova servers: one server listing every
    SERVER_CHECK_INTERVAL at most, no per-server call; deleting one server
    fails its two deployments only."""
    sw = nova_sw
    compute = sw.services.clients.compute
    calls: list[str] = []
    for method in ("list_servers", "get_server"):
        real = getattr(compute, method)

        def counted(*args: Any, _real: Any = real, _name: str = method) -> Any:
            calls.append(_name)
            return _real(*args)

        monkeypatch.setattr(compute, method, counted)
    servers = [
        sw.create_server(f"app-{i}", "cirros", "m1.tiny", agent=bootdata.HEAT_AGENTS)
        for i in range(2)
    ]
    config = script_config(sw, "#!/bin/sh\necho never\n")
    deps = {
        s["server_id"]: [
            sw.deploy(s["server_id"], config.id, timeout=3600, wait=False).id
            for _ in range(2)
        ]
        for s in servers
    }
    for ids in deps.values():
        for dep_id in ids:
            until(
                functools.partial(parked, sw, dep_id), WAIT, "the deployments to wait"
            )
    calls.clear()
    started = time.monotonic()
    time.sleep(6)
    seconds = time.monotonic() - started
    assert "get_server" not in calls
    assert 1 <= calls.count("list_servers") <= seconds / SERVER_CHECK_INTERVAL + 1

    gone, kept = (s["server_id"] for s in servers)
    assert compute.delete_server(gone)
    for dep_id in deps[gone]:
        assert (sw.wait(dep_id, WAIT).reason or {})["detail"] == "server deleted"
    for dep_id in deps[kept]:
        assert sw.show(dep_id).status == states.IN_PROGRESS
    for server_id in (gone, kept):
        sw.delete_server(server_id)
    assert leftovers(sw, *deps[gone], *deps[kept]) == {}


def test_enroll_adopts_a_boot_whose_enrollment_did_not_finish(
    nova_sw: Swflows, standin: str
) -> None:
    """swflows stopped between Nova's boot and recording the channel: the
    server's Nova metadata names its channel, and enrolling adopts it."""
    sw = nova_sw
    key = str(uuid.uuid4())
    options = {"container": sw.conf.metadata_container}
    channel = enrollment.make_channel(
        sw.services, names.POLL_TEMP_URL, options, key, key
    )
    user_data = bootdata.user_data(channel[enrollment.COLLECT])
    server = sw.services.clients.compute.create_server(
        "half-1",
        "cirros",
        "m1.tiny",
        user_data=user_data,
        metadata={
            enrollment.NOVA_CHANNEL_KEY: key,
            enrollment.NOVA_TRANSPORT_KEY: names.POLL_TEMP_URL,
        },
    )
    shown = sw.enroll_server(server.id)
    assert shown["channel"]["key"] == key and shown["in_compute"]
    assert sw.boot_data(server.id) == user_data
    assert channel_leftovers(sw, server.id, key) == [
        f"{sw.conf.metadata_container}/{key}"
    ]
    config = script_config(sw, "#!/bin/sh\nprintf ok > $heat_outputs_path.result\n")
    dep = sw.deploy(server.id, config.id, timeout=WAIT)
    assert dep.status == states.COMPLETE, dep.status_reason
    sw.delete_server(server.id)
    assert channel_leftovers(sw, server.id, key) == []
    assert leftovers(sw, dep.id) == {}


@pytest.mark.parametrize("transport", [names.POLL_SERVER_HEAT, names.ZAQAR_MESSAGE])
def test_a_failed_enrollment_leaves_nothing(
    devcloud: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    transport: str,
) -> None:
    """Keystone refuses the server's user after its project was made (and,
    for ZAQAR_MESSAGE, Zaqar refuses the queue after the user was made):
    what was made is removed, and nothing is recorded."""
    with isolated(
        devcloud, tmp_path / "swflows", zaqar_message_auth="credentials"
    ) as sw:
        server_id = str(uuid.uuid4())
        if transport == names.POLL_SERVER_HEAT:
            target: Any = sw.services.clients.stack_users
            method = "ensure_user"
        else:
            kind = server_user.ZAQAR
            user = server_user.ensure(sw.services, server_id, kind, server_id)
            target = sw.services.clients.messaging_for(
                user, server_user.password(sw.services, server_id, kind)
            )
            monkeypatch.setattr(sw.services.clients, "messaging_for", lambda *_: target)
            method = "ensure_queue"

        def refused(*args: Any, **kwargs: Any) -> None:
            raise exceptions.CloudError("identity", "refused for the test")

        monkeypatch.setattr(target, method, refused)
        with pytest.raises(exceptions.CloudError, match="refused for the test"):
            sw.enroll_server(server_id, transport)
        monkeypatch.undo()
        assert sw.store.list_servers() == []
        assert channel_leftovers(sw, server_id) == []


@pytest.mark.parametrize(
    "before", [names.ZAQAR_AUTH_SIGNED_URL, names.ZAQAR_AUTH_CREDENTIALS]
)
def test_a_failed_move_between_zaqar_auths_keeps_the_old_channel(
    sw: Swflows, monkeypatch: pytest.MonkeyPatch, before: str
) -> None:
    """Enrolling again with the other zaqar_message_auth fails half-way
    (Keystone refuses the new user; Zaqar refuses the signed URL): the
    server keeps the channel it has, queue and user included."""
    server_id = str(uuid.uuid4())
    (after,) = set(names.ZAQAR_AUTH_MODES) - {before}
    monkeypatch.setattr(sw, "_config_options", lambda name: {"auth": before})
    sw.enroll_server(server_id, names.ZAQAR_MESSAGE)
    kept = dict(sw.store.get_server(server_id).channel or {})

    def refused(*args: Any, **kwargs: Any) -> None:
        raise exceptions.CloudError("identity", "refused for the test")

    monkeypatch.setattr(sw, "_config_options", lambda name: {"auth": after})
    if after == names.ZAQAR_AUTH_CREDENTIALS:
        monkeypatch.setattr(sw.services.clients.stack_users, "ensure_user", refused)
    else:
        monkeypatch.setattr(sw.services.clients.messaging, "signed_url", refused)
    with pytest.raises(exceptions.CloudError, match="refused for the test"):
        sw.enroll_server(server_id, names.ZAQAR_MESSAGE)
    monkeypatch.undo()

    assert sw.store.get_server(server_id).channel == kept
    user = kept.get("user")
    if user:
        users = sw.services.clients.stack_users
        assert users.find_user(user["username"]) is not None
        password = server_user.password(sw.services, server_id, server_user.ZAQAR)
        stack_user = StackUser.from_dict(user)
        assert stack_user is not None
        messaging = sw.services.clients.messaging_for(stack_user, password)
    else:
        messaging = sw.services.clients.messaging
    # the document published before the failed move is still there to read
    assert messaging.list_messages(kept["queue"])
    sw.unenroll_server(server_id)
    assert channel_leftovers(sw, server_id) == []


def test_enroll_gives_a_poll_server_heat_server_its_user_after_a_deployment(
    sw: Swflows,
) -> None:
    """A server whose first deployment made its POLL_SERVER_HEAT channel
    (no user then) gets the user Heat's agents log in as when enrolled."""
    server_id = str(uuid.uuid4())
    metadata.publish_server(sw.services, server_id, names.POLL_SERVER_HEAT)
    shown = sw.enroll_server(server_id)
    assert shown["config_transport"] == names.POLL_SERVER_HEAT
    assert shown["channel"].get("user_id")
    assert f"user_id = {shown['channel']['user_id']}" in sw.agent_config(
        server_id, bootdata.HEAT_AGENTS
    )
    assert sw.enroll_server(server_id)["channel"] == shown["channel"]
    assert sw.unenroll_server(server_id)
    assert channel_leftovers(sw, server_id) == []


def test_delete_removes_the_channel_of_a_boot_whose_enrollment_did_not_finish(
    nova_sw: Swflows, standin: str
) -> None:
    """swflows stopped between Nova's boot and recording the channel, and
    the server is deleted instead of enrolled: its channel goes with it."""
    sw = nova_sw
    key = str(uuid.uuid4())
    options = {"container": sw.conf.metadata_container}
    channel = enrollment.make_channel(
        sw.services, names.POLL_TEMP_URL, options, key, key
    )
    server = sw.services.clients.compute.create_server(
        "half-2",
        "cirros",
        "m1.tiny",
        user_data=bootdata.user_data(channel[enrollment.COLLECT]),
        metadata={
            enrollment.NOVA_CHANNEL_KEY: key,
            enrollment.NOVA_TRANSPORT_KEY: names.POLL_TEMP_URL,
        },
    )
    assert channel_leftovers(sw, server.id, key) != []
    sw.delete_server(server.id)
    assert standin_record(standin, server.id) is None
    assert channel_leftovers(sw, server.id, key) == []
    assert sw.store.list_servers() == []


def test_a_failed_adoption_keeps_the_user_the_booted_server_logs_in_as(
    nova_sw: Swflows, standin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Enrolling a boot whose enrollment did not finish fails half-way: the
    Keystone user its boot data names is kept, and the next enrollment
    adopts that same user."""
    sw = nova_sw
    key = str(uuid.uuid4())
    channel = enrollment.make_channel(sw.services, names.POLL_SERVER_HEAT, {}, key, key)
    made = channel["user"]
    server = sw.services.clients.compute.create_server(
        "half-3",
        "cirros",
        "m1.tiny",
        metadata={
            enrollment.NOVA_CHANNEL_KEY: key,
            enrollment.NOVA_TRANSPORT_KEY: names.POLL_SERVER_HEAT,
        },
    )

    def refused(*args: Any, **kwargs: Any) -> None:
        raise exceptions.CloudError("identity", "refused for the test")

    monkeypatch.setattr(server_user, "credentials", refused)
    with pytest.raises(exceptions.CloudError, match="refused for the test"):
        sw.enroll_server(server.id)
    monkeypatch.undo()
    users = sw.services.clients.stack_users
    found = users.find_user(made["username"])
    assert found is not None and found.id == made["user_id"]

    shown = sw.enroll_server(server.id)
    assert shown["channel"]["user_id"] == made["user_id"]
    sw.delete_server(server.id)
    assert channel_leftovers(sw, server.id, key) == []
