"""Cancel reaches swflows' agent: a real agent process, the dev cloud.

A cancelled deployment's derived config leaves the server's metadata; the
agent, which polls on while a hook runs, stops the hook's process group
(SIGTERM, then SIGKILL after ``kill_grace``), runs the next config at once,
and neither it nor a restarted agent runs the cancelled config again.  The
agent runs the swflows these tests import (``test_agent.agent_env``).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import requests

from swflows import model, outcomes, signals, states
from swflows import transport_names as names
from swflows.api import Swflows
from tests.functional.test_agent import (
    WAIT,
    _alive,
    agent_server,
    script_config,
    sw,
)
from tests.functional.test_runner import instance, parked, until

__all__ = ["sw"]

#: the agent's SIGTERM-to-SIGKILL grace in these tests
GRACE = 2.0
#: one poll of the test agents (0.2 s, jitter 0.2) and a loaded machine
POLL_AND_SLACK = 5.0


def sleeper(sw: Swflows, pids: Path) -> model.Config:
    """A config whose hook sleeps 600 s in a child, noting the child's pid;
    neither heeds SIGTERM."""
    return script_config(
        sw,
        f"#!/bin/sh\ntrap '' TERM\nsleep 600 &\necho $! >> \"{pids}\"\nwait\n",
        inputs=[],
    )


def started(pids: Path) -> list[int]:
    text = pids.read_text() if pids.exists() else ""
    return [int(line) for line in text.split()]


def quick(sw: Swflows) -> model.Config:
    return script_config(sw, "#!/bin/sh\nprintf ok > $heat_outputs_path.result\n")


def listed(sw: Swflows, server_id: str) -> list[str]:
    return [item["id"] for item in sw.store.server_metadata(server_id).deployments]


def published(server: Any) -> list[str]:
    """The config ids of the document the server's agent reads now."""
    conf = json.loads(server.agent.conf.read_text())
    body = requests.get(conf["request"]["metadata_url"], timeout=10).json()
    return [item["id"] for item in body["deployments"]]


def test_cancel_stops_the_running_hook(sw: Swflows, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    config = sleeper(sw, pids)
    with agent_server(sw, tmp_path / "server", kill_grace=GRACE) as server:
        dep = sw.deploy(server.id, config.id, timeout=WAIT, wait=False)
        [child] = until(lambda: started(pids), WAIT, "the hook to start")
        cancelled_at = time.monotonic()
        cancelled = sw.cancel(dep.id, "operator")
        assert cancelled.status == states.FAILED
        assert cancelled.reason == {"kind": "cancelled", "by": "operator"}
        # withdrawn from the document the agent reads, when cancel returns
        assert dep.config_id not in listed(sw, server.id)
        assert dep.config_id not in published(server)
        until(
            lambda: not _alive(child),
            GRACE + POLL_AND_SLACK,
            "the hook's process group to be stopped",
        )
        took = time.monotonic() - cancelled_at
        # it ignores SIGTERM: it took the SIGKILL after the grace
        assert took >= GRACE
        marker = server.state_dir / "deployed" / f"{dep.config_id}.json"
        until(marker.exists, 10, "the cancelled config's marker")
        assert "cancelled" in json.loads(marker.read_text())["note"]
        assert "SIGKILL after 2 s" in server.agent.text()

        # the agent is free: a redeploy completes at once
        redeploy_at = time.monotonic()
        again = sw.redeploy(
            dep.id, config_id=quick(sw).id, timeout=WAIT, wait_timeout=30
        )
        assert again.status == states.COMPLETE, again.status_reason
        assert again.output_values["result"] == "ok"
        assert time.monotonic() - redeploy_at < 20

        # a restarted agent runs neither again
        assert server.agent.stop() == 0
        server.agent.start()
        until(
            lambda: server.agent.text().count("agent started") == 2,
            WAIT,
            "the agent to start again",
        )
        time.sleep(2)  # several polls
        assert started(pids) == [child]
        assert server.agent.text().count(f"({dep.config_id}, group") == 1
        sw.undeploy(dep.id)


def test_cancel_reaches_an_agent_reading_zaqar(sw: Swflows, tmp_path: Path) -> None:
    """ZAQAR_MESSAGE: the document without the config is the queue's newest
    message, which the agent reads while the hook runs."""
    pids = tmp_path / "pids"
    config = sleeper(sw, pids)
    server_dir = tmp_path / "server"
    with agent_server(sw, server_dir, names.ZAQAR_MESSAGE, kill_grace=GRACE) as server:
        dep = sw.deploy(
            server.id,
            config.id,
            signal_transport=names.ZAQAR_SIGNAL,
            timeout=WAIT,
            wait=False,
        )
        [child] = until(lambda: started(pids), WAIT, "the hook to start")
        assert sw.cancel(dep.id).status == states.FAILED
        until(
            lambda: not _alive(child),
            GRACE + POLL_AND_SLACK,
            "the hook's process group to be stopped",
        )
        again = sw.redeploy(
            dep.id, config_id=quick(sw).id, timeout=WAIT, wait_timeout=30
        )
        assert again.status == states.COMPLETE, again.status_reason
        assert started(pids) == [child]
        sw.undeploy(dep.id)


def test_cancelled_while_the_agent_is_down_does_not_run_after_restart(
    sw: Swflows, tmp_path: Path
) -> None:
    """The agent dies mid-hook (no marker: it would run the hook again),
    the deployment is cancelled meanwhile: the restarted agent does not run
    it, since it left the metadata (what also keeps Heat's agents off it)."""
    pids = tmp_path / "pids"
    # the hook's own process sleeps: it is what dies with a killed agent
    config = script_config(
        sw, f'#!/bin/sh\necho $$ >> "{pids}"\nexec sleep 600\n', inputs=[]
    )
    with agent_server(sw, tmp_path / "server") as server:
        dep = sw.deploy(server.id, config.id, timeout=WAIT, wait=False)
        [child] = until(lambda: started(pids), WAIT, "the hook to start")
        server.agent.kill()
        until(lambda: not _alive(child), 10, "the hook to die with its agent")
        assert sw.cancel(dep.id).status == states.FAILED

        server.agent.start()
        until(
            lambda: server.agent.text().count("agent started") == 2,
            WAIT,
            "the agent to start again",
        )
        after = quick(sw)
        nxt = sw.deploy(server.id, after.id, name="after", timeout=WAIT)
        assert nxt.status == states.COMPLETE, nxt.status_reason
        assert started(pids) == [child]
        sw.undeploy(nxt.id)
        sw.undeploy(dep.id)


def test_a_cancel_that_died_before_publishing_is_withdrawn_by_its_flow(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    """cancel records the outcome, then publishes; a process dying in
    between leaves the document unpublished, and the flow's wait step,
    when the flow goes on, publishes it without the config."""
    with instance(devcloud, tmp_path) as made:
        server_id = str(uuid.uuid4())
        dep = made.deploy(server_id, quick(made).id, timeout=60, wait=False)
        until(lambda: parked(made, dep.id), what="the flow to park")
        channel = made.store.get_server(server_id).channel
        url = channel["os-collect-config"]["request"]["metadata_url"]

        def document() -> list[str]:
            body = requests.get(url, timeout=10).json()
            return [item["id"] for item in body["deployments"]]

        assert document() == [dep.config_id]
        # what cancel does before it publishes
        assert outcomes.record_outcome(
            made.services, dep.id, dep.generation, signals.cancelled_outcome("op")
        )
        record = made.store.get_server(server_id)
        assert record.published_version < record.metadata_version
        assert listed(made, server_id) == []
        made.runner.wake()
        until(lambda: not made.list_flows(dep.id), 30, "the flow to end")
        assert document() == []
        record = made.store.get_server(server_id)
        assert record.published_version == record.metadata_version
        assert (made.show(dep.id).reason or {})["kind"] == "cancelled"
        made.undeploy(dep.id)
