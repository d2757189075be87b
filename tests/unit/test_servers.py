"""Servers booted through Nova, against a Nova that refuses (no cloud)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from swflows import conf as sw_conf
from swflows import enrollment, exceptions, states
from swflows.api import Swflows, servers
from swflows.clients.cloud import Clients
from swflows.persistence.store import Store


class RefusingNova:
    def create_server(self, *args: Any, **kwargs: Any) -> Any:
        raise exceptions.CloudError("compute", "boot refused for the test")


@pytest.fixture
def sw(tmp_path: Path) -> Iterator[Swflows]:
    conf = sw_conf.get_conf()
    conf.set_override("resume_on_start", False, "runner")
    conf.set_override("default_software_config_transport", "POLL_SERVER_HEAT")
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    made = Swflows(store, Clients(compute=RefusingNova), conf)  # type: ignore[arg-type]
    try:
        yield made
    finally:
        made.close()
        store.close()


def test_a_refused_boot_is_the_error_even_when_the_channel_stays(
    sw: Swflows, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Nova refuses the boot and removing the channel fails too: the error
    raised is Nova's, and what was left behind is logged."""

    def made(*args: Any, **kwargs: Any) -> dict[str, Any]:
        section = {"collectors": ["request", "local"], "request": {"metadata_url": "u"}}
        return {enrollment.KEY: "k", enrollment.COLLECT: section}

    def fails(*args: Any, **kwargs: Any) -> None:
        raise exceptions.CloudError("object-store", "removal failed for the test")

    monkeypatch.setattr(enrollment, "make_channel", made)
    monkeypatch.setattr(enrollment, "remove_channel", fails)
    with caplog.at_level(logging.WARNING, logger="swflows.api.servers"):
        with pytest.raises(exceptions.CloudError, match="boot refused for the test"):
            sw.create_server("web-1", "cirros", "m1.tiny")
    assert "removal failed for the test" in caplog.text
    assert sw.store.list_servers() == []


def test_undeploy_all_skips_a_deployment_removed_meanwhile(
    sw: Swflows, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A waiting deployment listed, then undeployed by another caller before
    it is cancelled here, is done: the forced removal goes on."""
    gone = SimpleNamespace(
        id=str(uuid.uuid4()), status=states.IN_PROGRESS, parent_id=None
    )
    monkeypatch.setattr(sw.store, "list_deployments", lambda **_: [gone])
    assert servers.undeploy_all(sw, "s1") == []


@pytest.mark.parametrize(
    ("channel", "transport", "agent"),
    [
        (None, None, "swflows"),
        ({"key": "k"}, "POLL_TEMP_URL", "swflows"),
        ({"key": "k", "agent": "heat"}, "POLL_TEMP_URL", "heat"),
        ({"key": "k", "agent": "swflows"}, "ZAQAR_MESSAGE", "swflows"),
        ({"key": "k"}, "POLL_SERVER_HEAT", "heat"),  # only Heat's agents read it
        ({"agent": "puppet"}, "POLL_TEMP_URL", "swflows"),
    ],
)
def test_the_agent_a_server_runs(
    channel: dict[str, Any] | None, transport: str | None, agent: str
) -> None:
    from swflows import metadata

    assert metadata.channel_agent(channel, transport) == agent
    record = SimpleNamespace(channel=channel, config_transport=transport)
    assert metadata.agent_of(record) == agent
    assert metadata.agent_of(None) == "swflows"
