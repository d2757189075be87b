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
        base: set[str] = set()
        for plan in matrix.PLANS.values():
            atoms = variant.atoms(plan)
            assert len(atoms) == len(set(atoms)), f"{variant.label}: names repeat"
            base.update(atoms)
            expected += len(atoms) * len(matrix.PHASES)
        for plan in matrix.EXTRA_PLANS.values():
            extra = set(variant.atoms(plan)) - base
            assert extra, f"{variant.label}: the extra plan adds no atom"
            expected += len(extra) * len(matrix.PHASES)
    assert len(POINTS) == expected
    assert len({point.id for point in POINTS}) == expected
    # every task class of every flow has its kill points
    for variant in matrix.all_variants():
        for plan in matrix.ALL_PLANS.values():
            classes = {type(atom) for atom in variant.build(plan)}
            killed = {
                type(atom)
                for atom in variant.build(plan)
                if any(p.atom == atom.name and p.variant == variant for p in POINTS)
            }
            assert classes == killed, variant.label


@pytest.mark.parametrize("point", POINTS, ids=[point.id for point in POINTS])
def test_kill_and_resume(
    point: matrix.KillPoint,
    devcloud: dict[str, Any],
    fork_context: Any,
    crash_clients: Any,
    tmp_path: Path,
) -> None:
    scenarios.run_case(point, devcloud, tmp_path, fork_context, crash_clients)
