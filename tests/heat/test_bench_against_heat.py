"""``tox -e bench-heat`` at its smallest: each side completes and waits,
and its figures are counted from the services' own access lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import against_heat


def test_the_bench_against_heat_runs_each_side(
    heat: dict[str, Any], devcloud: dict[str, Any], tmp_path: Path
) -> None:
    found = against_heat.run(
        devcloud, tmp_path, sizes=(2,), servers=2, window=3.0, log=print
    )
    sides = found["2"]
    assert set(sides) == set(against_heat.SIDES)
    for name, side in sides.items():
        assert "error" not in side and "cleanup" not in side, (name, side)
        complete, waiting = side["complete"], side["waiting"]
        # every deployment's signal came back through Swift, then COMPLETE
        assert complete["signals_seen"] >= 2, (name, complete)
        assert complete["last_signal_to_complete_s"] is not None, name
        # the phases: the metadata written before the agents signalled
        assert complete["first_signal_s"] <= complete["last_signal_s"], name
        if name != "library":  # Heat's server resource writes its object
            assert complete["first_metadata_put_s"] < complete["last_signal_s"]
        assert complete["cpu_s"] > 0, (name, complete)
        # while waiting, the waiting side asks Swift something: Heat its
        # objects, swflows its container listing
        assert waiting["swift"] > 0, (name, waiting)
    table = against_heat.table(found)
    assert "| 2 | create to all COMPLETE, s |" in table
