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
    """Say how many kill points ran, of how many the flows have."""
    counts = {}
    for outcome in ("passed", "failed", "skipped", "error", "xfailed", "xpassed"):
        reports = terminalreporter.stats.get(outcome, [])
        counts[outcome] = sum(
            1
            for report in reports
            if getattr(report, "when", "call") in ("call", "setup")
            and report.nodeid.startswith(MATRIX_TEST)
            and (outcome != "passed" or report.when == "call")
        )
    if not any(counts.values()):
        return
    total = len(matrix.kill_points())
    others = ", ".join(
        f"{n} {what}" for what, n in counts.items() if n and what != "passed"
    )
    terminalreporter.write_line(
        f"crash matrix: {counts['passed']} of {total} kill points passed"
        f" ({len(matrix.all_variants())} flow graphs x {len(matrix.PLANS)} "
        f"transports x {len(matrix.PHASES)} phases per atom)"
        + (f"; {others}" if others else "")
    )
