"""Heat's own agents (heat-agents' ``55-heat-config``, script hook and
``heat-config-notify``) run what swflows publishes, against the dev cloud.

The scripts are heat-agents' own, from the source tree named by
``SWFLOWS_HEAT_AGENTS``, else from its PyPI sdist as the dev cloud's Heat
image takes it (``tools/devcloud_lib/heat_image``: fetched once, its hash
checked, into ``~/.cache/swflows-tests``; the tests fail, naming what is
missing, when neither is there).  The test plays os-collect-config's
part, as the ``request`` collector and os-apply-config would: it GETs
the server's metadata URL and writes its ``deployments`` to the file
``55-heat-config`` reads.  The
hooks then run on this machine, and ``heat-config-notify`` PUTs the signal
to the deployment's TempURL.
"""

from __future__ import annotations

import configparser
import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from swflows import bootdata, exceptions, states
from swflows import transport_names as names
from swflows.api import Swflows
from tests.functional.test_agent import agent_server, isolated
from tests.functional.test_runner import until
from tools.devcloud_lib import heat_image
from tools.devcloud_lib.procs import DevcloudError

#: the scripts used, by their path in heat-agents' tree
SCRIPTS = {
    "55-heat-config": heat_image.HEAT_CONFIG,
    "hook-script": heat_image.HOOKS["script"],
    "heat-config-notify": heat_image.NOTIFY,
}
WAIT = 60


def _has_scripts(tree: Path) -> bool:
    return all((tree / path).is_file() for path in SCRIPTS.values())


@pytest.fixture(scope="module")
def heat_agents() -> Path:
    """The root of a heat-agents source tree."""
    named = os.environ.get("SWFLOWS_HEAT_AGENTS")
    why = ""
    try:
        tree = Path(named) if named else heat_image.heat_agents_tree()
    except DevcloudError as exc:
        tree, why = None, str(exc)
    if tree is None or not _has_scripts(tree):
        pytest.fail(
            "heat-agents' scripts not found: set SWFLOWS_HEAT_AGENTS to its "
            f"source tree, or let it be downloaded from PyPI into {heat_image.CACHE}"
            + (f" ({why})" if why else ""),
            pytrace=False,
        )
    return tree


@pytest.fixture
def sw(devcloud: dict[str, Any], tmp_path: Path) -> Iterator[Swflows]:
    with isolated(devcloud, tmp_path / "swflows") as made:
        yield made


class HeatServer:
    """A server enrolled for Heat's agents; :meth:`refresh` is one
    os-collect-config cycle: fetch the document, run ``55-heat-config``."""

    def __init__(self, sw: Swflows, tree: Path, folder: Path) -> None:
        self.id = str(uuid.uuid4())
        self.folder = folder
        sw.enroll_server(self.id, names.POLL_TEMP_URL, agent=bootdata.HEAT_AGENTS)
        ini = configparser.ConfigParser(interpolation=None)
        ini.read_string(sw.agent_config(self.id))
        self.metadata_url = ini.get("request", "metadata_url").replace("$$", "$")
        hooks = folder / "hooks"
        hooks.mkdir(parents=True)
        python = sys.executable  # it has requests and PyYAML, as the image would
        wrappers = {
            hooks / "script": tree / SCRIPTS["hook-script"],
            folder / "heat-config-notify": tree / SCRIPTS["heat-config-notify"],
        }
        for wrapper, script in wrappers.items():
            wrapper.write_text(f'#!/bin/sh\nexec {python} {script} "$@"\n')
            wrapper.chmod(0o700)
        self.command = [python, str(tree / SCRIPTS["55-heat-config"])]
        self.env = {
            **os.environ,
            "HEAT_SHELL_CONFIG": str(folder / "heat-config"),
            "HEAT_CONFIG_DEPLOYED": str(folder / "deployed"),
            "HEAT_CONFIG_DEPLOYED_OLD": str(folder / "deployed-old"),
            "HEAT_CONFIG_HOOKS": str(hooks),
            "HEAT_CONFIG_NOTIFY": str(folder / "heat-config-notify"),
            "HEAT_SCRIPT_WORKING": str(folder / "working"),
            "HEAT_SCRIPT_OUTPUTS": str(folder / "outputs"),
        }
        self.log = ""

    def document(self) -> dict[str, Any]:
        answer = requests.get(self.metadata_url, timeout=30)
        answer.raise_for_status()
        return dict(answer.json())

    def published(self) -> list[dict[str, Any]]:
        """The deployments published, once there are some."""
        found: list[dict[str, Any]] = until(
            lambda: self.document()["deployments"], WAIT, "the metadata"
        )
        return found

    def refresh(self) -> None:
        conf = Path(self.env["HEAT_SHELL_CONFIG"])
        conf.touch(mode=0o600)
        conf.write_text(json.dumps(self.published()))
        ran = subprocess.run(
            self.command, env=self.env, capture_output=True, timeout=120, check=False
        )
        self.log += ran.stderr.decode(errors="replace")
        assert ran.returncode == 0, self.log[-4000:]


@contextlib.contextmanager
def heat_server(sw: Swflows, tree: Path, folder: Path) -> Iterator[HeatServer]:
    server = HeatServer(sw, tree, folder)
    try:
        yield server
    except BaseException:
        print(f"--- 55-heat-config's log ---\n{server.log[-6000:]}")
        raise
    finally:
        for dep in sw.list_deployments(server_id=server.id):
            with contextlib.suppress(exceptions.SwflowsError):
                sw.undeploy(dep.id, wait_timeout=WAIT)
        sw.unenroll_server(server.id)


def test_typed_and_valueless_inputs_reach_heats_script_hook(
    sw: Swflows, heat_agents: Path, tmp_path: Path
) -> None:
    """A Number, a Boolean and inputs given no value: Heat's hooks run the
    script (no KeyError on a missing ``value``, no crash on a number) and
    heat-config-notify's signal completes the deployment."""
    config = sw.create_config(
        "app",
        "#!/bin/sh\n"
        'printf \'%s|%s|%s|%s|%s\' "$port" "$flag" "$ratio" "$unset" "$none" \\\n'
        "  > $heat_outputs_path.result\n",
        group="script",
        inputs=[
            {"name": "port", "type": "Number"},
            {"name": "flag", "type": "Boolean", "default": False},
            {"name": "ratio", "type": "Number", "default": 0.5},
            {"name": "unset", "type": "Number"},
            {"name": "none"},
        ],
        outputs=[{"name": "result"}],
    )
    with heat_server(sw, heat_agents, tmp_path / "server") as server:
        dep = sw.deploy(
            server.id,
            config.id,
            input_values={"port": 8080, "flag": True},
            signal_transport=names.TEMP_URL_SIGNAL,
            timeout=WAIT,
            wait=False,
        )
        [item] = server.published()
        assert all("value" in i for i in item["inputs"])
        server.refresh()
        done = sw.wait(dep.id, WAIT)
        assert done.status == states.COMPLETE, (done.status_reason, server.log[-3000:])
        # a String with no value is "None" to Heat's agents, as under Heat
        assert done.output_values["result"] == "8080|true|0.5||None"
        assert done.output_values["deploy_status_code"] == 0


def test_a_failing_script_printing_its_environment(
    sw: Swflows, heat_agents: Path, tmp_path: Path
) -> None:
    """Through Heat's agents too, the signal URL's signature the script
    printed is stored masked."""
    config = sw.create_config(
        "app", "#!/bin/sh\nenv | sort >&2\nexit 2\n", group="script"
    )
    with heat_server(sw, heat_agents, tmp_path / "server") as server:
        dep = sw.deploy(
            server.id,
            config.id,
            signal_transport=names.TEMP_URL_SIGNAL,
            timeout=WAIT,
            wait=False,
        )
        assert dep.config_id is not None
        inputs = {i.name: i.value for i in sw.get_config(dep.config_id).inputs}
        signature = inputs["deploy_signal_id"].split("temp_url_sig=")[1][:40]
        server.refresh()
        done = sw.wait(dep.id, WAIT)
        assert done.status == states.FAILED
        assert done.reason == {"kind": "exit_code", "exit_code": 2}
        stderr = done.output_values["deploy_stderr"]
        assert "deploy_signal_id=" in stderr and "temp_url_sig=***" in stderr
        assert signature not in json.dumps(done.to_dict())


def test_zaqar_signal_is_refused_for_heats_agents(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    """heat-config-notify cannot post to current Zaqar: refused up front,
    naming TEMP_URL_SIGNAL; AUTO passes over ZAQAR_SIGNAL for this server
    only."""
    order = [names.ZAQAR_SIGNAL, names.TEMP_URL_SIGNAL]
    with isolated(
        devcloud,
        tmp_path / "swflows",
        auto_signal_transport_order=order,
        default_deployment_signal_transport=names.AUTO,
    ) as made:
        config = made.create_config("app", "#!/bin/sh\n", group="script")
        heat_id, ours_id = str(uuid.uuid4()), str(uuid.uuid4())
        made.enroll_server(heat_id, names.POLL_TEMP_URL, agent=bootdata.HEAT_AGENTS)
        made.enroll_server(ours_id, names.POLL_TEMP_URL)
        try:
            with pytest.raises(exceptions.NotSupported, match="TEMP_URL_SIGNAL"):
                made.deploy(heat_id, config.id, signal_transport=names.ZAQAR_SIGNAL)
            assert made.list_deployments(server_id=heat_id) == []
            dep = made.deploy(heat_id, config.id, timeout=WAIT, wait=False)
            assert dep.signal_transport == names.TEMP_URL_SIGNAL
            ours = made.deploy(ours_id, config.id, timeout=WAIT, wait=False)
            assert ours.signal_transport == names.ZAQAR_SIGNAL
            with pytest.raises(exceptions.NotSupported, match="TEMP_URL_SIGNAL"):
                made.trigger(dep.id, "CREATE", signal_transport=names.ZAQAR_SIGNAL)
            assert made.show_server(heat_id)["agent"] == bootdata.HEAT_AGENTS
            assert made.show_server(ours_id)["agent"] == bootdata.SWFLOWS_AGENT
        finally:
            for server_id in (heat_id, ours_id):
                made.unenroll_server(server_id, force=True)


#: heat-agents' hooks for tools no test machine has, run by swflows' agent
TOOL_HOOKS = {
    "puppet": "heat-config-puppet/install.d/hook-puppet.py",
    "ansible": "heat-config-ansible/install.d/hook-ansible.py",
}
#: stands in for ``puppet apply``: writes the facts it was given as outputs
FAKE_PUPPET = """#!/bin/sh
printf '%s' "$FACTER_unset" > "$FACTER_heat_outputs_path.unset"
printf '%s' "$FACTER_greeting" > "$FACTER_heat_outputs_path.greeting"
"""
#: stands in for ``ansible-playbook``: writes the variables it was given
FAKE_ANSIBLE = """#!{python}
import json, sys
extra = sys.argv[sys.argv.index("--extra-vars") + 1]
variables = json.load(open(extra[1:]))
base = variables["heat_outputs_path"]
for name in ("unset", "greeting", "flag", "port"):
    with open(f"{{base}}.{{name}}", "w") as out:
        out.write(json.dumps(variables[name]))
"""


def _tool_hooks(tree: Path, folder: Path) -> Path:
    """A hook folder with heat-agents' puppet and ansible hooks, each
    pointed at a stand-in for its tool and at folders of the test's own."""
    hooks = folder / "hooks"
    hooks.mkdir(parents=True)
    tools = {
        folder / "puppet": FAKE_PUPPET,
        folder / "ansible-playbook": FAKE_ANSIBLE.format(python=sys.executable),
    }
    for path, text in tools.items():
        path.write_text(text)
        path.chmod(0o700)
    env = {
        "puppet": {
            "HEAT_PUPPET_CMD": folder / "puppet",
            "HEAT_PUPPET_WORKING": folder / "puppet-working",
            "HEAT_PUPPET_OUTPUTS": folder / "puppet-outputs",
            "HEAT_PUPPET_LOGDIR": folder / "puppet-logs",
        },
        "ansible": {
            "HEAT_ANSIBLE_CMD": folder / "ansible-playbook",
            "HEAT_ANSIBLE_WORKING": folder / "ansible-working",
            "HEAT_ANSIBLE_OUTPUTS": folder / "ansible-outputs",
        },
    }
    for group, script in TOOL_HOOKS.items():
        exports = "".join(f"export {k}={v}\n" for k, v in env[group].items())
        wrapper = hooks / group
        wrapper.write_text(
            f'#!/bin/sh\n{exports}exec {sys.executable} {tree / script} "$@"\n'
        )
        wrapper.chmod(0o700)
    return hooks


def test_heats_puppet_and_ansible_hooks_under_swflows_agent(
    sw: Swflows, heat_agents: Path, tmp_path: Path
) -> None:
    """swflows' agent hands Heat's hook programs what ``55-heat-config``
    would: String inputs as text (one given no value as ``"None"``; the
    puppet hook put a null into the environment and crashed), the other
    types as they are."""
    hooks = _tool_hooks(heat_agents, tmp_path / "tools")
    inputs = [
        {"name": "unset"},
        {"name": "greeting", "type": "String"},
        {"name": "flag", "type": "Boolean"},
        {"name": "port", "type": "Number"},
    ]
    with agent_server(sw, tmp_path / "server", hook_dirs=[str(hooks)]) as server:
        puppet = sw.create_config(
            "site",
            "notice('hello')\n",
            group="puppet",
            inputs=inputs[:2],
            outputs=[{"name": "unset"}, {"name": "greeting"}],
        )
        ansible = sw.create_config(
            "play",
            "- hosts: localhost\n",
            group="ansible",
            inputs=inputs,
            outputs=[{"name": n["name"]} for n in inputs],
        )
        values = {"greeting": "hi", "flag": True, "port": 8080}
        done = {
            config.group: sw.deploy(
                server.id,
                config.id,
                input_values={
                    k: v
                    for k, v in values.items()
                    if k in {i.name for i in config.inputs}
                },
                signal_transport=names.TEMP_URL_SIGNAL,
                timeout=WAIT,
            )
            for config in (puppet, ansible)
        }
        for dep in done.values():
            assert dep.status == states.COMPLETE, (dep.status_reason, dep.output_values)
        assert done["puppet"].output_values["unset"] == "None"
        assert done["puppet"].output_values["greeting"] == "hi"
        got = {k: json.loads(done["ansible"].output_values[k]) for k in values}
        assert got == values
        assert json.loads(done["ansible"].output_values["unset"]) == "None"
