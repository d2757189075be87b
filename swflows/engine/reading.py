"""Reading the signal stores of every parked flow in one look.

The stores are grouped by transport, its options and the trust they are
reached through (:mod:`swflows.trusts`); each group is asked about all its
stores at once (for TEMP_URL_SIGNAL, one container listing per container,
and a GET only for an object whose ETag moved), and the groups are read at
once with each other, so a slow one (a read per Zaqar queue) holds no
listing up.  What fails for one group or store is contained
(:mod:`swflows.engine.containment`): a group whose read fails for its
data is read store by store, so one bad store spoils no other read.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from swflows import trusts
from swflows.engine import fanout, faults
from swflows.persistence import flow_registry as flow_rows
from swflows.services import Services
from swflows.transports.base import SignalRead

_T = TypeVar("_T")


class SignalReader:
    """What one look at the parked flows' signal stores found."""

    def __init__(
        self,
        services: Services,
        offload: Callable[[Callable[[], object]], bool],
        contain: Callable[..., None],
    ) -> None:
        self.services = services
        #: hands a job to an idle worker of the runner (False: none idle)
        self.offload = offload
        #: contains a failure: ``contain(step, error, row=None)``
        self.contain = contain
        #: id of a parked row's transport options -> (those options, their
        #: canonical text), as of the last look: the rows of an unchanged
        #: flow are the same objects look after look (``ParkedRows``)
        self._options_text: dict[int, tuple[object, str]] = {}

    def observe(
        self, rows: Iterable[flow_rows.FlowRow]
    ) -> list[tuple[flow_rows.FlowRow, SignalRead | None]]:
        """Each row with its store's read (None: nothing to read)."""
        rows = list(rows)
        groups: dict[tuple[str, str, str], list[flow_rows.FlowRow]] = {}
        out: list[tuple[flow_rows.FlowRow, SignalRead | None]] = []
        through = self._trusts(rows)
        known, texts = self._options_text, {}
        for row in rows:
            waiting = row.waiting or {}
            if not waiting.get("store"):
                out.append((row, None))
                continue
            options = waiting.get("options")
            seen = known.get(id(options))
            if seen is None or seen[0] is not options:
                seen = (options, json.dumps(options, sort_keys=True))
            texts[id(options)] = seen
            key = (
                waiting["transport"],
                seen[1],
                # a store made through a trust is read through it
                through.get(row.deployment_id, ""),
            )
            groups.setdefault(key, []).append(row)
        self._options_text = texts
        # each transport (its options, its trust) is read at once with the
        # others: a slow one (a read per Zaqar queue) holds no listing up
        looks = [
            functools.partial(
                self._read_group, trust, name, json.loads(options), members
            )
            for (name, options, trust), members in groups.items()
        ]
        for members, reads in zip(groups.values(), self.run_all(looks), strict=True):
            out.extend((row, reads.get(row.id)) for row in members)
        return out

    def _read_group(
        self,
        trust: str,
        name: str,
        options: dict[str, Any],
        members: list[flow_rows.FlowRow],
    ) -> dict[str, SignalRead]:
        """The reads of one transport's stores; what fails is contained."""
        try:
            services = self.services.for_trust(trust or None)
            return self._reads(services, name, options, members)
        except Exception as exc:
            if faults.is_outage(exc):
                # the service is down: deadlines still count
                self.contain(f"reading {name} signals", exc)
                return {}
            # one flow's store, most likely: read each alone
            return self._reads_one_by_one(trust, name, options, members)

    def _trusts(self, rows: list[flow_rows.FlowRow]) -> dict[str, str]:
        """Deployment id -> the trust its store is reached through."""
        if self.services.clients.trustee is None:
            return {}
        return trusts.acting_trusts(
            self.services.store, (row.deployment_id for row in rows)
        )

    def _reads(
        self,
        services: Services,
        name: str,
        options: dict[str, Any],
        members: list[flow_rows.FlowRow],
    ) -> dict[str, SignalRead]:
        transport = services.signal_transport(name, options)
        if not transport.pulled:
            return {}
        stores = {row.id: row.waiting["store"] for row in members if row.waiting}
        known = {row.id: (row.waiting or {}).get("seen") for row in members}
        return dict(transport.observe(services, stores, known, self._read_all))

    def run_all(self, jobs: Sequence[Callable[[], _T]]) -> list[_T]:
        """Jobs run at once on this thread and the runner's idle workers."""
        workers = int(self.services.conf.runner.workers)
        return fanout.run_all(jobs, self.offload, workers)

    def _read_all(self, reads: Sequence[Callable[[], SignalRead]]) -> list[SignalRead]:
        """:data:`~swflows.transports.base.ReadAll` on the runner's workers."""
        workers = int(self.services.conf.runner.workers)
        return fanout.read_all(reads, self.offload, workers)

    def _reads_one_by_one(
        self,
        trust: str,
        name: str,
        options: dict[str, Any],
        members: list[flow_rows.FlowRow],
    ) -> dict[str, SignalRead]:
        reads: dict[str, SignalRead] = {}
        for row in members:
            try:
                services = self.services.for_trust(trust or None)
                reads.update(self._reads(services, name, options, [row]))
            except Exception as exc:
                self.contain("read", exc, row)
        return reads


__all__ = ["SignalReader"]
