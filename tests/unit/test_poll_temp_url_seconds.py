"""POLL_TEMP_URL read by Heat's agents: their ``request`` collector fetches
the server's object only when its ``Last-Modified`` (whole seconds) is
newer than the one it read, so two versions are never written within the
same second; swflows' agent tells versions by ETag and is not made to wait."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from swflows import bootdata
from swflows import transport_names as names
from swflows.fixture import LocalSwflows
from swflows.transports import impl_poll_temp_url


class Clock:
    """``time.time`` and ``time.sleep`` of the transport, under the test's hand."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.slept: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    made = Clock(1000.2)
    monkeypatch.setattr(impl_poll_temp_url, "time", made)
    return made


@pytest.fixture
def local() -> Iterator[LocalSwflows]:
    with LocalSwflows() as made:
        yield made


def publish(local: LocalSwflows, channel: dict[str, str], version: int) -> None:
    transport = local.sw.services.config_transport(names.POLL_TEMP_URL, None)
    transport.publish(local.sw.services, channel["object"], channel, {"v": version})


def test_a_second_version_for_heats_agents_waits_for_the_next_second(
    clock: Clock, local: LocalSwflows
) -> None:
    channel = {
        "container": "meta",
        "object": "heat-read",
        bootdata.CHANNEL_AGENT: bootdata.HEAT_AGENTS,
    }
    publish(local, channel, 1)
    assert clock.slept == []
    clock.now += 0.3  # 1000.5: the same whole second as the first write
    publish(local, channel, 2)
    assert clock.slept == [
        pytest.approx(1001.0 + impl_poll_temp_url.SECOND_MARGIN - 1000.5)
    ]
    clock.now += 2.0  # a later second: no wait
    publish(local, channel, 3)
    assert len(clock.slept) == 1


def test_swflows_agent_reads_by_etag_and_is_not_made_to_wait(
    clock: Clock, local: LocalSwflows
) -> None:
    channel = {"container": "meta", "object": "etag-read"}
    for version in range(3):
        publish(local, channel, version)
    assert clock.slept == []
