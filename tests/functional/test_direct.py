"""Statements run on the driver's cursor (``swflows.persistence.direct``)
on a SQLite file, PostgreSQL and MariaDB."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from swflows.persistence import database
from tests.functional.db_fixtures import *  # noqa: F403 (fixtures)
from tests.unit.test_persistence_direct import DirectContract


class TestDirectSQL(DirectContract):
    @pytest.fixture
    def engine(self, db_url: str) -> Iterator[sa.Engine]:
        made = database.create_engine(sa.make_url(db_url))
        yield made
        made.dispose()
