"""The progress line of ``--wait`` and ``watch``."""

from __future__ import annotations

import types

from swflows import model, states
from swflows.cli.progress import describe


def row(state: str, **kw: object) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        kind="deploy", state=state, waiting=kw.get("waiting"), note=kw.get("note")
    )


def deployment(status: str = states.IN_PROGRESS) -> model.Deployment:
    return model.Deployment(
        id="d",
        server_id="s",
        config_id=None,
        source_config_id=None,
        action="CREATE",
        status=status,
        status_reason="Outputs received" if status == states.COMPLETE else "",
    )


def test_a_running_flow_names_its_step() -> None:
    line = describe(deployment(), [row("RUNNING")], "PublishMetadata")
    assert line == "CREATE IN_PROGRESS, deploy running, step PublishMetadata"
    assert describe(deployment(), [row("RUNNING")]) == (
        "CREATE IN_PROGRESS, deploy running"
    )


def test_a_parked_flow_says_whether_it_was_picked_up() -> None:
    waiting = {"transport": "TEMP_URL_SIGNAL", "picked_up": True}
    assert describe(deployment(), [row("PARKED", waiting=waiting)]).endswith(
        "waiting for the server's signal (TEMP_URL_SIGNAL), picked up"
    )


def test_the_end() -> None:
    assert describe(deployment(states.COMPLETE), []) == "COMPLETE: Outputs received"
    assert describe(None, []) == "removed"
    assert describe(deployment(), [row("BROKEN", note="why")]).endswith(
        "set aside: why"
    )
