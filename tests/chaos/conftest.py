"""Options of the chaos soak (``tox -e chaos -- --minutes 30 --seed 7``)
and the dev cloud's fixtures it shares with the functional tests."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos.soak import SUMMARIES
from tests.functional.conftest import devcloud
from tests.functional.db_fixtures import mysql_url, pg_url

__all__ = ["devcloud", "mysql_url", "pg_url"]  # fixtures, used by name

#: the stream's length on each board when ``--minutes`` is not given
DEFAULT_MINUTES = 1.0
#: the seed of each board when ``--seed`` is not given: fixed schedules
#: that, in a minute each, make every kind of fault between them (and
#: kill the elected watcher on both boards)
DEFAULT_SEEDS = {"redis": 8, "zookeeper": 2}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chaos", "the chaos soak")
    group.addoption(
        "--minutes",
        type=float,
        default=DEFAULT_MINUTES,
        help="minutes of operations and faults on each board "
        f"(default {DEFAULT_MINUTES:g}); setup, drain and checks come on top",
    )
    group.addoption(
        "--seed",
        type=int,
        default=None,
        help="seed of the operations and the fault schedule, on every board "
        f"(default: {DEFAULT_SEEDS})",
    )
    group.addoption(
        "--database",
        choices=("postgresql", "mariadb"),
        default="postgresql",
        help="the store under the conductors (default postgresql)",
    )
    group.addoption(
        "--conductors", type=int, default=3, help="conductor processes (default 3)"
    )
    group.addoption(
        "--servers",
        type=int,
        default=4,
        help="servers booted on the Nova stand-in, each running an agent (default 4)",
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for text in terminalreporter.config.stash.get(SUMMARIES, []):
        terminalreporter.write_line(text)
