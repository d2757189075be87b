"""``Swflows.list_servers`` and ``swflows server list``: enrollment, agent,
deployments and when each server was last seen, in the caller's project."""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path

import pytest
from oslo_context import context as oslo_context

from swflows import exceptions, model, projects, states
from swflows.api import Swflows
from swflows.cli import main as cli_main
from tests.unit.test_view_times import ISO_Z

P1 = oslo_context.RequestContext(project_id="p1", user_id="u1", roles=["member"])
P2 = oslo_context.RequestContext(project_id="p2", user_id="u2", roles=["member"])


def deployed(sw: Swflows, server_id: str, count: int) -> None:
    for n in range(count):
        sw.store.create_deployment(
            model.Deployment(
                id=model.new_id(),
                server_id=server_id,
                config_id=None,
                source_config_id=None,
                action="CREATE",
                status=states.COMPLETE,
                name=f"d{n}",
            )
        )


def test_servers_with_their_agent_deployments_and_last_seen(sw: Swflows) -> None:
    sw.enroll_server("web-1")
    sw.enroll_server("web-2")
    deployed(sw, "web-1", 2)
    assert [s["last_seen"] for s in sw.list_servers()] == [None, None]

    sw.server_metadata("web-2")  # it read its metadata through swflows
    web1, web2 = sw.list_servers()
    assert web1 == {
        "server_id": "web-1",
        "config_transport": "POLL_SERVER_HEAT",
        "agent": "heat",  # only Heat's agents read POLL_SERVER_HEAT
        "enrolled": True,
        "deployments": 2,
        "last_seen": None,
    }
    assert web2["deployments"] == 0
    assert ISO_Z.match(web2["last_seen"]), web2
    assert sw.show_server("web-2")["last_seen"] == web2["last_seen"]


def test_a_project_lists_its_own_servers(sw: Swflows) -> None:
    sw.enroll_server("a", context=P1)
    sw.enroll_server("b", context=P2)
    assert [s["server_id"] for s in sw.list_servers(context=P1)] == ["a"]
    assert [s["server_id"] for s in sw.list_servers(context=P2)] == ["b"]
    assert [s["server_id"] for s in sw.list_servers()] == ["a", "b"]
    with pytest.raises(exceptions.Forbidden):
        sw.list_servers(context=P1, all_projects=True)
    owner = sw.store.get_owner(projects.SERVER, "a")
    assert owner is not None and owner.project_id == "p1"


def test_the_command_lists_them_as_json(sw: Swflows, tmp_path: Path) -> None:
    sw.enroll_server("web-1")
    sw.server_metadata("web-1")
    conf = tmp_path / "swflows.conf"
    conf.write_text(
        "[DEFAULT]\ndefault_software_config_transport = POLL_SERVER_HEAT\n"
        f"[database]\nconnection = sqlite:///{tmp_path / 's.sqlite'}\n"
    )
    app = cli_main.SwflowsApp()
    app.stdout = io.StringIO()
    app.stderr = io.StringIO()
    argv = ["--config-file", str(conf), "server", "list", "-f", "json"]
    assert app.run(argv) == 0, app.stderr.getvalue()
    (shown,) = json.loads(app.stdout.getvalue())
    assert shown["server_id"] == "web-1" and shown["deployments"] == 0
    assert ISO_Z.match(shown["last_seen"]), shown


def test_a_server_polling_often_is_written_seen_every_few_seconds(
    sw: Swflows, monkeypatch: pytest.MonkeyPatch
) -> None:
    from swflows.persistence import servers as server_rows

    sw.enroll_server("web-1")
    sw.store.saw_server("web-1")
    first = sw.store.get_server("web-1").last_seen
    assert first is not None
    clock = iter([first + dt.timedelta(seconds=server_rows.SEEN_EVERY - 1)])
    monkeypatch.setattr(model, "utcnow", lambda: next(clock))
    sw.store.saw_server("web-1")  # within SEEN_EVERY: not written
    assert sw.store.get_server("web-1").last_seen == first
    later = first + dt.timedelta(seconds=server_rows.SEEN_EVERY)
    monkeypatch.setattr(model, "utcnow", lambda: later)
    sw.store.saw_server("web-1")
    assert sw.store.get_server("web-1").last_seen == later
    sw.store.saw_server("nobody")  # unknown: nothing
