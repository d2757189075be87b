"""The benchmarks' quick mode runs end to end, so the bench cannot rot.

Every measurement runs at a small size against the dev cloud and
PostgreSQL; the figures' shape and the relations that hold at any size
are checked, not the timings (the machine may be loaded).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import __main__ as bench_main
from bench import parked, waiting
from bench.proxy import kind_of
from tests.functional.conftest import CLOUD_JSON


def test_percentile() -> None:
    assert waiting.percentile([3.0], 99) == 3.0
    assert waiting.percentile([1.0, 2.0, 3.0, 4.0, 5.0], 50) == 3.0
    assert waiting.percentile([0.0, 10.0], 99) == pytest.approx(9.9)


def test_kind_of_a_swift_path() -> None:
    assert kind_of("/auth/v1.0") == "auth"
    assert kind_of("/v1/AUTH_test?format=json") == "account"
    assert kind_of("/v1/AUTH_test/c?format=json&marker=x") == "container"
    assert kind_of("/v1/AUTH_test/c/dep/1") == "object"


@pytest.mark.xdist_group("scale")
def test_quick_mode_measures_everything(
    devcloud: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results.json"
    argv = ["--quick", "--json", str(out), "--cloud", str(CLOUD_JSON)]
    assert bench_main.main(argv) == 0
    printed = capsys.readouterr().out
    results = json.loads(out.read_text())
    sizes = bench_main.QUICK
    assert results["mode"] == "quick"

    # 1. the proxy counted both sides: one listing against a HEAD each
    for n in (sizes.small, sizes.large):
        idle = results["waiting"]["requests"][str(n)]["idle"]
        assert idle["swflows"]["by_kind"] == {"GET container": 1}
        assert idle["heat_style"]["by_kind"] == {"HEAD object": n}
        landed = results["waiting"]["requests"][str(n)]["signals"]
        k = landed["landed"]
        assert landed["swflows"]["by_kind"] == {"GET container": 1, "GET object": k}
        assert landed["heat_style"]["by_kind"] == {"HEAD object": n, "GET object": k}
    # 2. every sampled signal completed its deployment
    for transport in ("TEMP_URL_SIGNAL", "ZAQAR_SIGNAL"):
        found = results["waiting"]["latency"][transport]
        assert found["signals"] == sizes.sample
        assert found["p50_s"] <= found["p99_s"] <= found["max_s"]
        assert 0 < found["sent_p50_s"] <= found["sent_p99_s"]
    heat = results["waiting"]["heat_style_latency"]
    assert sorted(heat, key=int) == [str(sizes.tiny), str(sizes.large)]
    for n, found in heat.items():
        assert found["waiting"] == int(n) and found["signals"] >= 1
        assert 0 < found["p50_s"] <= found["p99_s"] <= found["max_s"]
    assert "Heat-style poller" in printed
    pushed = results["waiting"]["pushed"]
    assert pushed["ZAQAR_SIGNAL"]["signals"] == sizes.sample
    assert pushed["HEAT_SIGNAL"]["signals"] == sizes.heat_sample
    for found in pushed.values():
        if isinstance(found, dict):
            assert 0 < found["sent_p50_s"] <= found["sent_p99_s"]
    assert "pushed by a Zaqar subscription" in printed
    # 3. the runner's threads do not grow with the flows it holds; the
    # fleet is real deployments, each of its signals completed one
    small = results["waiting"]["held"][str(sizes.large)]
    fleet = results["parked"]
    large = fleet["held"]
    assert small["parked"] == sizes.large and large["parked"] == sizes.fleet
    assert large["how"] == "real deployments"
    assert large["threads"]["runner"] <= small["threads"]["runner"]
    assert parked.peak(fleet)["runner_threads"] <= parked.GOAL["runner_threads"]
    assert large["cycle_requests"] >= 1
    assert fleet["latency"]["signals"] == sizes.sample
    assert fleet["latency"]["waiting"] == sizes.fleet
    assert fleet["launch"]["per_s"] == pytest.approx(sizes.fleet / fleet["launch"]["s"])
    assert f"3. one runner holding {sizes.fleet} parked (real)" in printed
    # 4. both databases, both sides
    for db in ("sqlite", "postgresql"):
        for label in ("deploy", "linear5"):
            one = results["overhead"][db][label]
            assert one["swflows"]["flows"] == one["stock"]["flows"] == 3
            assert one["ratio_median"] > 0
    # 5. every interrupted flow was parked again
    assert results["waiting"]["resume"]["flows"] == sizes.large
    assert "5. resume" in printed and "ratio" in printed
    # 6. three start-ups, each a median of new processes
    started = results["startup"]
    for side in ("swflows", "interpreter", "libraries"):
        assert started[side]["runs"] == 3
    assert started["interpreter"]["median_s"] < started["swflows"]["median_s"]
    assert "6. CLI start-up" in printed
    # 7. every job drained, by one conductor then two
    drained = results["conductors"]["drain"]
    for count in ("1", "2"):
        one = drained[count]
        assert one["conductors"] == int(count) and one["jobs"] == 10
        assert one["per_s"] == pytest.approx(10 / one["drain_s"])
    assert drained["ratio"] > 0
    # 8. the claim was taken over, on both boards, within its expiry and a
    # poll of the board
    for kind in ("redis", "zookeeper"):
        one = results["conductors"]["takeover"][kind]
        assert one["rounds"] == 1
        assert 0 < one["max_s"] <= one["claim_expiry_s"] + 10
    assert "8. claim takeover after SIGKILL, zookeeper" in printed
    # 9. launched on one runner, then through one conductor and two
    assert results["launch"]["deployments"] == sizes.large
    assert results["launch_engines"]["deployments"] == sizes.large
    by_conductors = results["launch_conductors"]
    assert sorted(by_conductors) == ["1", "2"]
    for count, one in by_conductors.items():
        assert one["conductors"] == int(count)
        assert one["per_s"] == pytest.approx(sizes.large / one["s"])
    assert "9. ... the same, an engine each" in printed
    assert "9. ... driven by 2 conductor(s)" in printed
