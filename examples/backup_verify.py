"""Back up a database on one server, then verify the archive on another.

BACKUP runs on the database server (a new deployment made from the
``database`` deployment's config); its ``archive`` output becomes the
``archive`` input of VERIFY on the verification server; a step of our own
then writes a one-line report.  VERIFY runs only if the backup ended
COMPLETE; if it did not, VERIFY and the report are left untouched and the
flow still ends: a FAILED backup is a result, read from ``backup``.

    flow_id = sw.run_flow(backup_verify.make_flow, database=db.id,
                          verifier=checker.id, label="nightly")
    sw.wait_flow(flow_id)["result"]["report"]
"""

from __future__ import annotations

from typing import Any

from taskflow import task
from taskflow.patterns import graph_flow

from swflows import link_if_complete, trigger_subflow


class Report(task.Task):  # type: ignore[misc]
    """Our own step: sum both actions up in one line (no side effect)."""

    def execute(self, backup: dict[str, Any], verify: dict[str, Any]) -> str:
        archive = backup["outputs"].get("archive")
        return (
            f"backup {archive}: {backup['status']}; "
            f"verify: {verify['status']} ({verify['outputs'].get('checksum')})"
        )


def make_flow(database: str, verifier: str, label: str = "nightly") -> Any:
    """``database`` and ``verifier`` are deployments whose configs have a
    BACKUP and a VERIFY action."""
    flow = graph_flow.Flow("examples.backup_verify")
    backup = trigger_subflow(
        "backup",
        deployment_id=database,
        action="BACKUP",
        input_values={"label": label},
    )
    verify = trigger_subflow(
        "verify",
        deployment_id=verifier,
        action="VERIFY",
        inputs_from={"archive": "backup.outputs.archive"},
    )
    flow.add(backup, verify, Report("examples.backup_verify.Report", provides="report"))
    link_if_complete(flow, backup, verify, "backup")
    return flow
