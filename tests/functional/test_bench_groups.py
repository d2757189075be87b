"""The group bench's quick mode runs end to end (``bench/groups.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench import groups as bench_groups
from tests.functional.conftest import CLOUD_JSON


def test_quick_group_bench(devcloud: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "groups.json"
    argv = ["--quick", "--json", str(out), "--cloud", str(CLOUD_JSON)]
    assert bench_groups.main(argv) == 0
    results = json.loads(out.read_text())
    assert results["members"] == 20 and results["max_concurrency"] == 5
    assert results["agents"].startswith("scripted")
    # waits are parked: the runner's threads do not grow with the members
    assert results["runner_threads_peak"] < results["members"]
    assert results["group_s"] > 0 and results["single_deploys_s"] > 0
