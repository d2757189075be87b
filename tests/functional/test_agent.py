"""swflows' agent as a real process (``swflows-agent``) against the dev cloud.

Each test enrolls a fresh server (its metadata channel is made, as on its
first deployment), writes the agent's configuration from the channel's
``os-collect-config`` section, as an embedder would put it in the
server's user data, and starts the agent; hooks run on this machine.
HEAT_SIGNAL is not tested here: swflows has no HTTP API for an agent to
signal (its notifier is pluggable and unit tested).

Each test's swflows keeps its TEMP_URL_SIGNAL objects in a container of its
own and does not sweep: a watcher's sweep removes every signal object whose
deployment its own store does not know, so swflows instances with other
stores on the same Swift account (other test runs) would otherwise delete
these tests' signals.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

import swflows
from swflows import metadata, model, states
from swflows import transport_names as names
from swflows.agent import collectors
from swflows.api import Swflows
from tests.functional.flowkit import leftovers
from tests.functional.test_runner import instance, until

#: the agent's settings in these tests: poll fast, give up fast
AGENT_OPTIONS = {
    "interval": 0.2,
    "min_interval": 0.2,
    "jitter": 0.2,
    "notify_backoff": 0.1,
    "hook_dirs": [],
}
WAIT = 90


@contextlib.contextmanager
def isolated(
    cloud: dict[str, Any], folder: Path, **overrides: Any
) -> Iterator[Swflows]:
    """A Swflows with its own signal container, which never sweeps."""
    container = f"swflows-agent-{uuid.uuid4().hex[:12]}"
    folder.mkdir(parents=True, exist_ok=True)
    with instance(
        cloud,
        folder,
        signal_container=container,
        watcher__sweep_interval=86400,
        **overrides,
    ) as made:
        try:
            yield made
        finally:
            made.services.clients.object_store.delete_container(container, force=True)


@pytest.fixture
def sw(devcloud: dict[str, Any], tmp_path: Path) -> Iterator[Swflows]:
    with isolated(devcloud, tmp_path / "swflows") as made:
        yield made


def agent_command() -> list[str]:
    """The console script beside this interpreter, else ``python -m``."""
    script = Path(sys.executable).with_name("swflows-agent")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "swflows.agent"]


def agent_env() -> dict[str, str]:
    """The environment of an agent that runs the swflows these tests import
    (a tree on PYTHONPATH, not the one installed beside the interpreter)."""
    tree = str(Path(swflows.__file__).resolve().parents[1])
    path = [tree, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


@dataclasses.dataclass
class AgentProcess:
    conf: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> AgentProcess:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [*agent_command(), "--config-file", str(self.conf)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=agent_env(),
            )
        return self

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> int:
        """SIGTERM, as systemd stops it; the agent's exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError("the agent did not stop on SIGTERM") from None
        return int(self.proc.returncode)

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclasses.dataclass
class Server:
    id: str
    agent: AgentProcess
    state_dir: Path
    folder: Path


@contextlib.contextmanager
def agent_server(
    sw: Swflows, folder: Path, transport: str = names.POLL_TEMP_URL, **options: Any
) -> Iterator[Server]:
    """A new server on ``transport``, its agent running until the block ends."""
    server_id = str(uuid.uuid4())
    folder.mkdir(parents=True, exist_ok=True)
    metadata.publish_server(sw.services, server_id, transport, {})
    channel = metadata.find_server(sw.services, server_id).channel
    state_dir = folder / "agent-state"
    conf = folder / "agent.json"
    conf.touch(mode=0o600)
    body = {
        "agent": {**AGENT_OPTIONS, "state_dir": str(state_dir), **options},
        **channel["os-collect-config"],
    }
    conf.write_text(json.dumps(body))
    agent = AgentProcess(conf, folder / "agent.log").start()
    try:
        yield Server(server_id, agent, state_dir, folder)
        assert agent.stop() == 0, agent.text()[-3000:]
    except BaseException:
        agent.stop()
        print(f"--- agent log ---\n{agent.text()[-6000:]}")
        raise
    finally:
        sw.services.config_transport(transport).remove_channel(
            sw.services, server_id, channel
        )
    assert "Traceback" not in agent.text(), agent.text()[-6000:]


def script_config(sw: Swflows, script: str, **kwargs: Any) -> model.Config:
    return sw.create_config(
        "app",
        script,
        group="script",
        inputs=kwargs.pop("inputs", [{"name": "foo", "default": "d"}]),
        outputs=kwargs.pop("outputs", [{"name": "result"}]),
        **kwargs,
    )


def test_script_inputs_and_outputs(sw: Swflows, tmp_path: Path) -> None:
    config = script_config(
        sw,
        "#!/bin/sh\n"
        'echo "deploying $foo"\n'
        'printf \'%s/%s/%s\' "$foo" "$count" "$flag" > $heat_outputs_path.result\n'
        "printf '%s' \"$data\" > $heat_outputs_path.data\n",
        inputs=[
            {"name": "foo", "default": "d"},
            {"name": "count", "type": "Number", "default": 1},
            {"name": "flag", "type": "Boolean", "default": False},
            {"name": "data", "type": "Json", "default": {}},
        ],
        outputs=[{"name": "result"}, {"name": "data"}],
    )
    with agent_server(sw, tmp_path) as server:
        dep = sw.deploy(
            server.id,
            config.id,
            input_values={"foo": "bar", "count": 3, "flag": True, "data": {"k": [1]}},
            timeout=WAIT,
        )
        assert dep.status == states.COMPLETE, dep.status_reason
        assert dep.output_values == {
            "result": "bar/3/true",
            "data": '{"k": [1]}',
            "deploy_stdout": "deploying bar\n",
            "deploy_stderr": "",
            "deploy_status_code": 0,
        }
        marker = server.state_dir / "deployed" / f"{dep.config_id}.json"
        assert json.loads(marker.read_text())["status_code"] == 0
        sw.undeploy(dep.id)
        assert leftovers(sw, dep.id) == {}


def test_failing_script_over_zaqar(sw: Swflows, tmp_path: Path) -> None:
    """FAILED with its stderr; a stdout bigger than a Zaqar message is
    trimmed from the left to fit (Heat's agent would have its post refused)."""
    config = script_config(
        sw,
        "#!/bin/sh\n"
        "head -c 600000 /dev/zero | tr '\\0' x\n"
        "echo END\n"
        "echo partial > $heat_outputs_path.result\n"
        'echo "cannot configure $foo" >&2\n'
        "exit 3\n",
    )
    with agent_server(sw, tmp_path, names.ZAQAR_MESSAGE) as server:
        dep = sw.deploy(
            server.id,
            config.id,
            input_values={"foo": "db"},
            signal_transport=names.ZAQAR_SIGNAL,
            timeout=WAIT,
        )
        assert dep.status == states.FAILED
        assert dep.reason == {"kind": "exit_code", "exit_code": 3}
        assert dep.output_values["deploy_stderr"] == "cannot configure db\n"
        assert dep.output_values["result"] == "partial\n"
        stdout = dep.output_values["deploy_stdout"]
        assert stdout.endswith("xxxxEND\n") and 100_000 < len(stdout) < 256 * 1024
        sw.undeploy(dep.id)
        assert leftovers(sw, dep.id) == {}


def test_zaqar_signal_as_stack_user(devcloud: dict[str, Any], tmp_path: Path) -> None:
    """Heat's ZAQAR_SIGNAL form: the agent logs in to Keystone as the stack
    user and finds Zaqar in the catalogue."""
    with isolated(devcloud, tmp_path, zaqar_signal_auth="credentials") as made:
        config = script_config(
            made, '#!/bin/sh\nprintf %s "$foo!" > $heat_outputs_path.result\n'
        )
        with agent_server(made, tmp_path / "server") as server:
            dep = made.deploy(
                server.id,
                config.id,
                input_values={"foo": "zq"},
                signal_transport=names.ZAQAR_SIGNAL,
                timeout=WAIT,
            )
            assert dep.status == states.COMPLETE, dep.status_reason
            assert dep.output_values["result"] == "zq!"
            made.undeploy(dep.id)
            assert leftovers(made, dep.id) == {}


def _secrets_given(sw: Swflows, dep: model.Deployment) -> dict[str, str]:
    """The secrets the deployment's agent was given, by input name."""
    assert dep.config_id is not None
    values = {spec.name: spec.value for spec in sw.get_config(dep.config_id).inputs}
    found = {}
    if values.get("deploy_password"):
        found["deploy_password"] = values["deploy_password"]
    url = values.get("deploy_signal_id")
    if url and "temp_url_sig=" in url:
        found["temp_url_sig"] = url.split("temp_url_sig=")[1].split("&")[0]
    return found


@pytest.mark.parametrize("transport", [names.TEMP_URL_SIGNAL, names.ZAQAR_SIGNAL])
def test_a_hook_printing_its_secrets_stores_them_masked(
    devcloud: dict[str, Any],
    tmp_path: Path,
    transport: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A script that prints its environment (the signal URL and its TempURL
    signature, the stack user's password) and fails: what is stored and
    logged has them masked."""
    caplog.set_level(logging.DEBUG)
    with isolated(devcloud, tmp_path, zaqar_signal_auth="credentials") as made:
        config = script_config(
            made,
            "#!/bin/sh\n"
            "env | sort >&2\n"
            'echo "signalling to $deploy_signal_id as $deploy_password"\n'
            'printf %s "$deploy_signal_id $deploy_password" \\\n'
            "  > $heat_outputs_path.result\n"
            "exit 1\n",
        )
        with agent_server(made, tmp_path / "server") as server:
            dep = made.deploy(
                server.id, config.id, signal_transport=transport, timeout=WAIT
            )
            assert dep.status == states.FAILED, dep.status_reason
            secrets = _secrets_given(made, dep)
            wanted = {
                names.TEMP_URL_SIGNAL: {"temp_url_sig"},
                names.ZAQAR_SIGNAL: {"deploy_password"},
            }[transport]
            assert set(secrets) == wanted
            stored = made.show(dep.id)
            text = json.dumps(stored.to_dict()) + caplog.text
            for name, secret in secrets.items():
                assert secret not in text, f"{name} stored or logged in clear"
            stderr = stored.output_values["deploy_stderr"]
            assert "deploy_server_id=" in stderr and "***" in stderr
            made.undeploy(dep.id)


def test_unknown_group_fails_naming_it(sw: Swflows, tmp_path: Path) -> None:
    config = sw.create_config("site", "class { 'x': }", group="puppet")
    with agent_server(sw, tmp_path) as server:
        dep = sw.deploy(server.id, config.id, timeout=WAIT)
        assert dep.status == states.FAILED
        assert dep.output_values["deploy_status_code"] == 127
        assert "no hook for group 'puppet'" in dep.output_values["deploy_stderr"]
        sw.undeploy(dep.id)


def component_config(sw: Swflows, log: Path) -> model.Config:
    """A component whose every action appends ``<action> <foo>`` to ``log``."""
    step = (
        "#!/bin/sh\n"
        'echo "$deploy_action $foo" >> "$log"\n'
        'printf %s "$deploy_action:$foo" > $heat_outputs_path.result\n'
    )
    return sw.create_config(
        "db",
        {
            "configs": [
                {"actions": ["CREATE", "UPDATE"], "config": step, "tool": "script"},
                {"actions": ["BACKUP"], "config": step, "tool": "script"},
                {"actions": ["DELETE"], "config": step, "tool": "script"},
            ]
        },
        group="component",
        inputs=[{"name": "foo", "default": "x"}, {"name": "log", "default": str(log)}],
        outputs=[{"name": "result"}],
    )


def test_trigger_backup_with_an_overridden_input(sw: Swflows, tmp_path: Path) -> None:
    log = tmp_path / "actions.log"
    config = component_config(sw, log)
    with agent_server(sw, tmp_path / "server") as server:
        dep = sw.deploy(
            server.id, config.id, input_values={"foo": "prod"}, timeout=WAIT
        )
        assert dep.status == states.COMPLETE, dep.status_reason
        backup = sw.trigger(dep.id, "BACKUP", input_values={"foo": "nightly"})
        assert backup.status == states.COMPLETE, backup.status_reason
        assert backup.output_values["result"] == "BACKUP:nightly"
        assert sw.show(dep.id).output_values["result"] == "CREATE:prod"
        sw.undeploy(backup.id)  # a trigger's record: no DELETE run
        assert log.read_text() == "CREATE prod\nBACKUP nightly\n"
        sw.undeploy(dep.id)


def test_redeploy_and_trigger_without_waiting_return_the_new_action(
    sw: Swflows, tmp_path: Path
) -> None:
    """``wait=False`` returns the IN_PROGRESS row of the action it started,
    not the row as it was (COMPLETE, the previous action)."""
    log, release = tmp_path / "actions.log", tmp_path / "release"
    step = (
        "#!/bin/sh\n"
        'echo "$deploy_action $foo" >> "$log"\n'
        'if [ "$deploy_action" != CREATE ]; then\n'
        '  while [ ! -e "$release" ]; do sleep 0.05; done\n'
        "fi\n"
        'printf %s "$deploy_action:$foo" > $heat_outputs_path.result\n'
    )
    config = sw.create_config(
        "db",
        {
            "configs": [
                {"actions": ["CREATE", "UPDATE"], "config": step, "tool": "script"},
                {"actions": ["BACKUP"], "config": step, "tool": "script"},
            ]
        },
        group="component",
        inputs=[
            {"name": "foo", "default": "x"},
            {"name": "log", "default": str(log)},
            {"name": "release", "default": str(release)},
        ],
        outputs=[{"name": "result"}],
    )
    with agent_server(sw, tmp_path / "server") as server:
        dep = sw.deploy(server.id, config.id, input_values={"foo": "a"}, timeout=WAIT)
        assert dep.status == states.COMPLETE, dep.status_reason

        update = sw.redeploy(dep.id, input_values={"foo": "b"}, wait=False)
        assert (update.id, update.action) == (dep.id, "UPDATE")
        assert update.status == states.IN_PROGRESS, update.status_reason
        assert update.generation == dep.generation + 1
        assert update.config_id != dep.config_id
        assert update.input_values["foo"] == "b"
        release.touch()
        done = sw.wait(dep.id, WAIT)
        assert done.status == states.COMPLETE, done.status_reason
        assert done.output_values["result"] == "UPDATE:b"

        release.unlink()
        backup = sw.trigger(dep.id, "BACKUP", wait=False)
        assert backup.id != dep.id
        assert (backup.action, backup.status) == ("BACKUP", states.IN_PROGRESS)
        release.touch()
        assert sw.wait(backup.id, WAIT).output_values["result"] == "BACKUP:b"
        assert log.read_text() == "CREATE a\nUPDATE b\nBACKUP b\n"
        sw.undeploy(backup.id)
        sw.undeploy(dep.id)


def test_undeploy_runs_the_delete_action(sw: Swflows, tmp_path: Path) -> None:
    log = tmp_path / "actions.log"
    config = component_config(sw, log)
    with agent_server(sw, tmp_path / "server") as server:
        dep = sw.deploy(server.id, config.id, input_values={"foo": "app"}, timeout=WAIT)
        assert dep.status == states.COMPLETE, dep.status_reason
        assert sw.undeploy(dep.id) is None
        assert log.read_text() == "CREATE app\nDELETE app\n"
        assert sw.list_deployments(server_id=server.id) == []
        assert leftovers(sw, dep.id) == {}


def test_killed_mid_hook_runs_it_again_after_restart(
    sw: Swflows, tmp_path: Path
) -> None:
    """No marker before the signal: the hook runs again, the deployment
    completes once, and the killed agent's hook died with it."""
    runs, release = tmp_path / "runs", tmp_path / "release"
    config = script_config(
        sw,
        "#!/bin/sh\n"
        'echo "run $$" >> "$runs"\n'
        'while [ ! -e "$release" ]; do sleep 0.05; done\n'
        "printf done > $heat_outputs_path.result\n",
        inputs=[{"name": "runs"}, {"name": "release"}],
    )

    def started() -> list[int]:
        text = runs.read_text() if runs.exists() else ""
        return [int(line.split()[1]) for line in text.splitlines()]

    with agent_server(sw, tmp_path / "server") as server:
        dep = sw.deploy(
            server.id,
            config.id,
            input_values={"runs": str(runs), "release": str(release)},
            timeout=WAIT,
            wait=False,
        )
        [first] = until(started, WAIT, "the hook to start")
        server.agent.kill()
        until(lambda: not _alive(first), 10, "the hook to die with its agent")
        assert not (server.state_dir / "deployed" / f"{dep.config_id}.json").exists()
        assert sw.show(dep.id).status == states.IN_PROGRESS

        server.agent.start()  # the same configuration and state
        until(lambda: len(started()) == 2, WAIT, "the hook to run again")
        release.touch()
        done = sw.wait(dep.id, WAIT)
        assert done.status == states.COMPLETE, done.status_reason
        assert done.output_values["result"] == "done"
        time.sleep(1)  # a few more polls: it is not run a third time
        assert len(started()) == 2
        assert (server.state_dir / "deployed" / f"{dep.config_id}.json").exists()
        sw.undeploy(dep.id)


def test_twenty_deployments_to_one_server_in_parallel(
    sw: Swflows, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    config = script_config(
        sw,
        "#!/bin/sh\n"
        'echo "$foo" >> "$ran"\n'
        'printf %s "out-$foo" > $heat_outputs_path.result\n',
        inputs=[{"name": "foo"}, {"name": "ran", "default": str(ran)}],
    )
    with agent_server(sw, tmp_path / "server") as server:
        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            futures = [
                pool.submit(
                    sw.deploy,
                    server.id,
                    config.id,
                    input_values={"foo": f"n{i}"},
                    name=f"app-{i:02d}",
                    timeout=WAIT,
                    wait_timeout=WAIT,
                )
                for i in range(20)
            ]
            deps = [f.result() for f in futures]
        for i, dep in enumerate(deps):
            assert dep.status == states.COMPLETE, (dep.name, dep.status_reason)
            assert dep.output_values["result"] == f"out-n{i}"
        assert sorted(ran.read_text().split()) == sorted(f"n{i}" for i in range(20))
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(sw.undeploy, [d.id for d in deps]))
        assert sw.list_deployments(server_id=server.id) == []


def test_started_signal_tells_running_from_never_picked_up(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    """A hook running longer than the delivery timeout is not "never picked
    up": the agent said "started" (Heat's agents cannot)."""
    # the hook outlasts the delivery timeout twice over; the timeout itself
    # leaves a loaded machine time to start the hook and say "started"
    with isolated(devcloud, tmp_path, delivery_timeout=4) as made:
        config = script_config(
            made, "#!/bin/sh\nsleep 8\nprintf ok > $heat_outputs_path.result\n"
        )
        with agent_server(made, tmp_path / "server") as server:
            dep = made.deploy(server.id, config.id, timeout=WAIT)
            assert dep.status == states.COMPLETE, dep.status_reason
            assert dep.output_values["result"] == "ok"
            made.undeploy(dep.id)


def test_request_collector_sees_two_writes_within_one_second(sw: Swflows) -> None:
    """Against the real Swift, whose Last-Modified has whole seconds (and
    which answers 304 when If-Modified-Since alone matches)."""
    swift = sw.services.clients.object_store
    name = f"agent-probe-{uuid.uuid4()}"
    swift.ensure_container("swflows-metadata")
    try:
        url = swift.temp_url("swflows-metadata", name, "GET", 2**31 - 1)
        collector = collectors.RequestCollector(url, session=requests.Session())
        for _ in range(10):
            swift.put_object("swflows-metadata", name, b'{"n": 1}')
            assert collector.collect() == b'{"n": 1}'
            first = requests.head(url, timeout=10).headers["Last-Modified"]
            swift.put_object("swflows-metadata", name, b'{"n": 2}')
            second = requests.head(url, timeout=10).headers["Last-Modified"]
            assert collector.collect() == b'{"n": 2}'
            assert collector.collect() is None
            if first == second:
                break  # both writes fell in one second: the case that matters
        else:
            raise AssertionError("never managed two writes within one second")
    finally:
        swift.delete_object("swflows-metadata", name)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie no one reaped yet does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"
