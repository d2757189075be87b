"""The examples of ``examples/`` (shown in ``docs/composing.md``), run
against the dev cloud with swflows' agent as a real process on each server;
the hooks run scripts on this machine."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples import backup_verify, maintenance, rolling
from swflows import model, states
from swflows.api import Swflows
from swflows.flows import compose
from tests.functional.flowkit import leftovers
from tests.functional.test_agent import WAIT, agent_server, isolated


@pytest.fixture
def sw(devcloud: dict[str, Any], tmp_path: Path) -> Iterator[Swflows]:
    with isolated(devcloud, tmp_path / "swflows") as made:
        yield made


def component(sw: Swflows, name: str, actions: dict[str, str], **kwargs: Any) -> Any:
    """A component config: each action its shell script."""
    return sw.create_config(
        name,
        {
            "configs": [
                {
                    "actions": [action],
                    "config": "#!/bin/sh\n" + script,
                    "tool": "script",
                }
                for action, script in actions.items()
            ]
        },
        group="component",
        **kwargs,
    )


def deployed(sw: Swflows, server: str, config: model.Config, **inputs: Any) -> str:
    dep = sw.deploy(server, config.id, input_values=inputs, timeout=WAIT)
    assert dep.status == states.COMPLETE, dep.status_reason
    return str(dep.id)


def test_backup_then_verify(sw: Swflows, tmp_path: Path) -> None:
    backups = tmp_path / "backups"
    database = component(
        sw,
        "database",
        {
            "CREATE": "true\n",
            "BACKUP": 'mkdir -p "$dir"\n'
            'echo "rows of $label" > "$dir/$label.dump"\n'
            'printf %s "$dir/$label.dump" > "$heat_outputs_path.archive"\n',
        },
        inputs=[{"name": "dir", "default": str(backups)}, {"name": "label"}],
        outputs=[{"name": "archive"}],
    )
    checker = component(
        sw,
        "checker",
        {
            "CREATE": "true\n",
            "VERIFY": 'test -s "$archive" || exit 3\n'
            "sum=$(sha256sum \"$archive\" | cut -d' ' -f1)\n"
            'printf %s "$sum" > "$heat_outputs_path.checksum"\n',
        },
        inputs=[{"name": "archive", "default": ""}],
        outputs=[{"name": "checksum"}],
    )
    with (
        agent_server(sw, tmp_path / "db") as db_server,
        agent_server(sw, tmp_path / "checker") as check_server,
    ):
        flow_id = sw.run_flow(
            backup_verify.make_flow,
            database=deployed(sw, db_server.id, database, label="x"),
            verifier=deployed(sw, check_server.id, checker),
            label="nightly",
        )
        ended = sw.wait_flow(flow_id, timeout=WAIT * 2)
    archive = backups / "nightly.dump"
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    result = ended["result"]
    assert result["backup"]["outputs"]["archive"] == str(archive)
    assert result["verify"]["outputs"]["checksum"] == digest
    assert result["report"] == (
        f"backup {archive}: COMPLETE; verify: COMPLETE ({digest})"
    )
    triggered = [
        compose.trigger_deployment_id(flow_id, n) for n in ("backup", "verify")
    ]
    assert sw.show(triggered[1]).input_values["archive"] == str(archive)
    assert sw.list_flows() == []
    assert leftovers(sw, *triggered) == {}


def test_rolling_upgrade_stops_at_the_first_failure(
    sw: Swflows, tmp_path: Path
) -> None:
    config = component(
        sw,
        "app",
        {
            "CREATE": 'echo "$deploy_action" >> "$log"\n',
            "UPGRADE": 'echo "$deploy_action" >> "$log"\n'
            '[ "$broken" = yes ] && { echo "cannot upgrade" >&2; exit 2; }\n'
            "true\n",
        },
        inputs=[{"name": "log"}, {"name": "broken", "default": "no"}],
    )
    logs = [tmp_path / f"server-{i}.log" for i in range(3)]
    with (
        agent_server(sw, tmp_path / "s0") as s0,
        agent_server(sw, tmp_path / "s1") as s1,
        agent_server(sw, tmp_path / "s2") as s2,
    ):
        deps = [
            deployed(sw, s0.id, config, log=str(logs[0])),
            deployed(sw, s1.id, config, log=str(logs[1]), broken="yes"),
            deployed(sw, s2.id, config, log=str(logs[2])),
        ]
        flow_id = sw.run_flow(rolling.make_flow, deployment_ids=deps)
        ended = sw.wait_flow(flow_id, timeout=WAIT * 3)
    result = ended["result"]
    assert rolling.stopped_at(result, 3) == 1
    assert result["server-0"]["status"] == states.COMPLETE
    failed = result["server-1"]
    assert failed["status"] == states.FAILED
    assert failed["reason"]["exit_code"] == 2
    assert "cannot upgrade" in failed["outputs"]["deploy_stderr"]
    # done before: kept as it is; after: untouched
    assert [log.read_text().split() for log in logs] == [
        ["CREATE", "UPGRADE"],
        ["CREATE", "UPGRADE"],
        ["CREATE"],
    ]
    assert len(sw.list_deployments(server_id=s2.id)) == 1
    names = [f"server-{i}" for i in range(3)]
    triggered = [compose.trigger_deployment_id(flow_id, n) for n in names]
    assert leftovers(sw, *triggered) == {}


def test_a_step_of_ones_own_with_its_revert(sw: Swflows, tmp_path: Path) -> None:
    tickets = tmp_path / "tickets"
    tickets.mkdir()
    config = component(
        sw,
        "app",
        {
            "CREATE": "true\n",
            "UPGRADE": 'printf %s "$version" > "$heat_outputs_path.v"\n',
        },
        inputs=[{"name": "version", "default": "1"}],
        outputs=[{"name": "v"}],
    )
    with agent_server(sw, tmp_path / "server") as server:
        dep = deployed(sw, server.id, config)
        flow_id = sw.run_flow(
            maintenance.make_flow,
            deployment_id=dep,
            ticket_dir=str(tickets),
            input_values={"version": "2"},
        )
        ended = sw.wait_flow(flow_id, timeout=WAIT)
        assert ended["result"]["change"]["outputs"]["v"] == "2"
        assert ended["result"]["closed"] == states.COMPLETE
        ticket = json.loads(maintenance.ticket_path(str(tickets), flow_id).read_text())
        assert ticket == {"flow": flow_id, "state": "closed", "outcome": "COMPLETE"}
        # the same flow with an action the config lacks: reverted, its
        # ticket withdrawn by its own revert
        failing = sw.run_flow(
            maintenance.make_flow,
            deployment_id=dep,
            ticket_dir=str(tickets),
            action="ROLLBACK",
        )
        with pytest.raises(Exception, match="no entry for ROLLBACK"):
            sw.wait_flow(failing, timeout=WAIT)
        assert sw.flow_result(failing)["state"] == "REVERTED"
        assert not maintenance.ticket_path(str(tickets), failing).exists()
    changed = [compose.trigger_deployment_id(f, "change") for f in (flow_id, failing)]
    assert leftovers(sw, *changed) == {}
