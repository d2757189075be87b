"""Unit tests: a runner that is not started, a Swflows on a local store,
and the fuzz case counts, summed and printed at the end of a run."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swflows import conf as sw_conf
from swflows.api import Swflows
from swflows.clients.cloud import Clients
from swflows.engine import runner as runner_mod
from swflows.persistence import Store
from swflows.services import Services
from tests.unit import fuzzing


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[runner_mod.Runner]:
    """A runner on a new SQLite store, not started: no threads, no cloud."""
    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as store:
        services = Services(
            store=store,
            conf=sw_conf.get_conf(config_files=[]),
            clients=Clients(),
            secret=b"k" * 32,
        )
        made = runner_mod.Runner(services, workers=1)
        try:
            yield made
        finally:
            made.close()


@pytest.fixture
def sw(tmp_path: Path) -> Iterator[Swflows]:
    """A Swflows on a new SQLite store with no cloud, resuming nothing at
    start, whose servers default to POLL_SERVER_HEAT (its metadata served
    by the caller, so no cloud is needed)."""
    conf = sw_conf.get_conf()
    conf.set_override("resume_on_start", False, "runner")
    conf.set_override("default_software_config_transport", "POLL_SERVER_HEAT")
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    made = Swflows(store, Clients(), conf)
    try:
        yield made
    finally:
        made.close()
        store.close()


_PROPERTY = "fuzz_cases"
_totals: collections.Counter[str] = collections.Counter()


@pytest.fixture(autouse=True)
def _count_fuzz_cases(request: pytest.FixtureRequest) -> Iterator[None]:
    before = fuzzing.counts.copy()
    yield
    ran = {k: n for k, n in (fuzzing.counts - before).items() if n}
    if ran:
        # user properties travel with the test's reports, also from xdist workers
        request.node.user_properties.append((_PROPERTY, ran))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "teardown":
        return
    for name, value in report.user_properties:
        if name == _PROPERTY and isinstance(value, dict):
            _totals.update(value)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not _totals:
        return
    parts = [f"{area}={_totals[area]}" for area in fuzzing.AREAS]
    terminalreporter.write_line(
        f"fuzz cases: {' '.join(parts)} total={sum(_totals.values())}"
    )
