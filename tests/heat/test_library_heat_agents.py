"""swflows used directly, without Heat's engine, on a server it boots for
Heat's own agents: cloud-init writes ``/etc/os-collect-config.conf`` from
swflows' boot data and starts os-collect-config (the Nova stand-in does
both with the agents image ``tools/devcloud heat-up`` lays out), which
polls the server's TempURL, runs the script through heat-agents' hook and
signals with ``heat-config-notify``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swflows import bootdata, conf, states
from swflows import transport_names as names
from swflows.api import Swflows
from tests.functional import flowkit
from tests.heat.test_server_in_stack import agent_log, booted


@pytest.fixture
def library(devcloud: dict[str, Any], tmp_path: Path) -> Iterator[Swflows]:
    """swflows with a runner of its own in this process."""
    path = flowkit.write_conf(
        devcloud,
        tmp_path / "swflows.conf",
        database=f"sqlite:///{tmp_path / 'swflows.sqlite'}",
    )
    made = Swflows.from_conf(conf.get_conf(config_files=[str(path)]))
    yield made
    made.close()
    made.store.close()


def test_heats_agents_on_a_server_swflows_booted_run_its_deployment(
    library: Swflows, heat: dict[str, Any], devcloud: dict[str, Any]
) -> None:
    sw = library
    shown = sw.create_server(
        "occ-1",
        "cirros",
        "m1.tiny",
        config_transport=names.POLL_TEMP_URL,
        agent=bootdata.HEAT_AGENTS,
    )
    server_id = str(shown["server_id"])
    config = sw.create_config(
        "greeting",
        '#!/bin/sh\necho "hello $name" > "$heat_outputs_path.result"\n',
        group="script",
        inputs=[{"name": "name"}],
        outputs=[{"name": "result"}],
    )
    try:
        assert "Heat's agents" in booted(devcloud, server_id)["agent"]["why"]
        # published right after the server's first document: within the
        # same second, as Heat's request collector must still fetch it
        done = sw.deploy(
            server_id,
            config.id,
            input_values={"name": "olga"},
            signal_transport=names.TEMP_URL_SIGNAL,
            wait_timeout=120,
        )
        assert done.status == states.COMPLETE, (done.reason, agent_log(server_id))
        assert sw.outputs(done.id)["result"] == "hello olga\n"
        sw.undeploy(done.id, wait_timeout=120)
    except BaseException:
        print(f"--- the server's agents ---\n{agent_log(server_id)}")
        raise
    finally:
        sw.delete_server(server_id)
        sw.delete_config(config.id)
