"""StartAction knows its own write when the store retried it."""

from __future__ import annotations

import dataclasses
import datetime
import types
from typing import Any

import pytest

from swflows import exceptions
from swflows.tasks import deployment


@dataclasses.dataclass
class Row:
    generation: int
    config_id: str
    updated_time: Any = dataclasses.field(
        default_factory=lambda: datetime.datetime.now(datetime.UTC)
    )


class InDoubtStore:
    """The row as a store shows it when a write committed but its answer
    was lost (a connection reset): the store's retry finds the row moved
    on and raises ConcurrentUpdate."""

    def __init__(self, after: Row) -> None:
        self.rows = [Row(1, "cfg-1"), after]

    def get_deployment(self, deployment_id: str) -> Row:
        return self.rows[0] if len(self.rows) > 1 else self.rows[-1]

    def update_deployment(self, deployment_id: str, **changes: Any) -> Row:
        self.rows.pop(0)
        raise exceptions.ConcurrentUpdate(
            f"deployment {deployment_id} is IN_PROGRESS at generation 2, "
            "not IN_PROGRESS at generation 1"
        )


def start(store: InDoubtStore) -> tuple[float, str | None]:
    task = deployment.StartAction("undeploy", config_transport="POLL_TEMP_URL")
    services: Any = types.SimpleNamespace(store=store)
    return task.execute(
        services,
        deployment_id="d1",
        derived_config_id="cfg-2",
        action="DELETE",
        input_values={},
        generation=2,
        timeout=60,
        source_config_id=None,
    )


def test_its_own_retried_write_is_its_start() -> None:
    """The 30-minute Redis soak: an undeploy's StartAction failed with
    "IN_PROGRESS at generation 2, not IN_PROGRESS at generation 1", its
    own write retried after a store reset; the flow reverted over a DELETE
    its agent ran, and the DELETE hook ran twice."""
    _, previous = start(InDoubtStore(Row(2, "cfg-2")))
    assert previous == "cfg-1"


def test_another_actions_write_is_still_a_conflict() -> None:
    with pytest.raises(exceptions.ConcurrentUpdate):
        start(InDoubtStore(Row(2, "cfg-other")))
