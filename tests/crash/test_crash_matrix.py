"""The crash matrix: every flow killed with SIGKILL at every atom boundary,
per signal transport, and resumed by a fresh process (see
:mod:`tests.crash.matrix` for the kill points and
:mod:`tests.crash.scenarios` for what each case checks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from swflows import flows
from tests.crash import matrix, scenarios

POINTS = matrix.kill_points()


def test_every_atom_of_every_flow_is_a_kill_point() -> None:
    """The cases are derived from the factories, none left out."""
    assert {v.kind for v in matrix.all_variants()} == set(flows.FACTORIES)
    assert set(scenarios.SCENARIOS) == {v.label for v in matrix.all_variants()}
    expected = 0
    for variant in matrix.all_variants():
        for plan in matrix.PLANS.values():
            atoms = variant.atoms(plan)
            assert len(atoms) == len(set(atoms)), f"{variant.label}: names repeat"
            expected += len(atoms) * len(matrix.PHASES)
    assert len(POINTS) == expected
    assert len({point.id for point in POINTS}) == expected
    # what each phase needs: undeploy without DELETE has the fewest atoms
    assert min(len(point.atoms) for point in POINTS) >= 2


@pytest.mark.parametrize("point", POINTS, ids=[point.id for point in POINTS])
def test_kill_and_resume(
    point: matrix.KillPoint,
    devcloud: dict[str, Any],
    fork_context: Any,
    crash_clients: Any,
    tmp_path: Path,
) -> None:
    scenarios.run_case(point, devcloud, tmp_path, fork_context, crash_clients)
