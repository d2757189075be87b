"""Fixtures of the crash matrix, and its summary line.

``devcloud`` is the functional tests' fixture (the dev cloud's cloud.json);
``fork_context`` is one fork server per pytest worker, ``crash_clients``
the worker's cloud clients.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.crash import matrix, scenarios
from tests.functional.conftest import devcloud

__all__ = ["devcloud"]

MATRIX_TEST = "tests/crash/test_crash_matrix.py::test_kill_and_resume["


@pytest.fixture(scope="session")
def fork_context() -> Any:
    return scenarios.fork_server()


@pytest.fixture(scope="session")
def crash_clients(devcloud: dict[str, Any], tmp_path_factory: Any) -> Any:
    return scenarios.cloud_clients(devcloud, tmp_path_factory.mktemp("clients"))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say how many kill points passed, of how many the flows have."""
    outcomes = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
    reports = {
        outcome: [
            report
            for report in terminalreporter.stats.get(outcome, [])
            if getattr(report, "nodeid", "").startswith(MATRIX_TEST)
        ]
        for outcome in outcomes
    }
    ran = {outcome: {r.nodeid for r in found} for outcome, found in reports.items()}
    busy = sum(r.duration for found in reports.values() for r in found)
    if not any(ran.values()):
        return
    total = len(matrix.kill_points())
    others = [
        f"{len(ids)} {what}" for what, ids in ran.items() if ids and what != "passed"
    ]
    terminalreporter.write_line(
        f"crash matrix: {len(ran['passed'])} of {total} kill points passed"
        f" ({len(matrix.all_variants())} flow graphs x "
        f"{', '.join(matrix.PLANS)} (+ {', '.join(matrix.EXTRA_PLANS)} for "
        f"its own atoms) x {len(matrix.PHASES)} boundaries per atom)"
        f" in {busy:.0f} s of worker time"
        + (f"; {', '.join(others)}" if others else "")
    )
