"""Results waited for outside swflows (see
:func:`swflows.persistence.tables.results_table`): written when the
caller's action starts, sent by whichever process sees its deployment end
(:mod:`swflows.engine.outbox`)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import sqlalchemy as sa

from swflows import exceptions
from swflows.persistence.database import Database, check_id

#: what became of a sent result
DELIVERED = "delivered"
REFUSED = "refused"
GIVEN_UP = "given_up"


@dataclasses.dataclass(frozen=True)
class PendingResult:
    """A result row, its token opened (never printed)."""

    id: str
    deployment_id: str
    shape: str
    url: str
    trust_key: str | None
    created_at: float
    attempts: int
    token: str | None = dataclasses.field(default=None, repr=False)
    claimed_until: float | None = None
    delivered_at: float | None = None
    outcome: str | None = None
    keep_until: float | None = None


class ResultRows(Database):
    """Pending and delivered results."""

    def add_result(
        self,
        result_id: str,
        deployment_id: str,
        *,
        shape: str,
        url: str,
        token: str | None = None,
        trust_key: str | None = None,
    ) -> None:
        """Record a result to send when the deployment's action ends;
        the token (when no trust carries it) is sealed."""
        r = self._tables.results
        values = {
            "id": check_id("result_id", result_id),
            "deployment_id": check_id("deployment_id", deployment_id),
            "shape": shape,
            "url": url,
            "token": None if token is None else self._seal(token),
            "trust_key": trust_key,
            "created_at": time.time(),
            "attempts": 0,
        }
        self._write(
            "add a result", lambda conn: conn.execute(sa.insert(r).values(values))
        )

    def pending_results(
        self, limit: int = 100, *, free_at: float | None = None
    ) -> list[PendingResult]:
        """Results not sent yet, oldest first; with ``free_at``, only those
        no process holds (or postponed) at that time, so a page of held
        ones never hides the rest."""
        r = self._tables.results
        query = sa.select(r).where(r.c.delivered_at.is_(None))
        if free_at is not None:
            query = query.where(
                sa.or_(r.c.claimed_until.is_(None), r.c.claimed_until < free_at)
            )
        query = query.order_by(r.c.created_at).limit(limit)
        return self._read("list pending results", lambda c: self._rows(c, query))

    def results_of(self, deployment_id: str) -> list[PendingResult]:
        """Every result row of a deployment, sent or not."""
        r = self._tables.results
        query = sa.select(r).where(r.c.deployment_id == deployment_id)
        return self._read("list results", lambda c: self._rows(c, query))

    def get_result(self, result_id: str) -> PendingResult:
        r = self._tables.results
        query = sa.select(r).where(r.c.id == result_id)
        found = self._read("read a result", lambda c: self._rows(c, query))
        if not found:
            raise exceptions.NotFound(result_id, f"result {result_id} not found")
        return found[0]

    def claim_result(self, result_id: str, seconds: float) -> bool:
        """Hold an unsent result for ``seconds`` while sending it; False
        when it is sent already or another process holds it."""
        r = self._tables.results
        now = time.time()

        def op(conn: sa.Connection) -> bool:
            done = conn.execute(
                sa.update(r)
                .where(
                    r.c.id == result_id,
                    r.c.delivered_at.is_(None),
                    sa.or_(r.c.claimed_until.is_(None), r.c.claimed_until < now),
                )
                .values(claimed_until=now + seconds, attempts=r.c.attempts + 1)
            )
            return bool(done.rowcount)

        return self._write("claim a result", op)

    def release_result(self, result_id: str) -> None:
        """Let another process (or a later try) send a claimed result."""
        r = self._tables.results
        self._write(
            "release a result",
            lambda conn: conn.execute(
                sa.update(r).where(r.c.id == result_id).values(claimed_until=None)
            ),
        )

    def postpone_result(self, result_id: str, seconds: float) -> None:
        """Leave a claimed result unsent for ``seconds`` (its receiver did
        not answer): no process tries it again before."""
        r = self._tables.results
        until = time.time() + seconds
        self._write(
            "postpone a result",
            lambda conn: conn.execute(
                sa.update(r).where(r.c.id == result_id).values(claimed_until=until)
            ),
        )

    def result_sent(self, result_id: str, outcome: str, keep_seconds: float) -> None:
        """Mark a result sent (or refused, or given up): never sent again;
        the row (and the trust it names) is kept ``keep_seconds``.  Its
        token is dropped now."""
        r = self._tables.results
        now = time.time()
        self._write(
            "mark a result sent",
            lambda conn: conn.execute(
                sa.update(r)
                .where(r.c.id == result_id)
                .values(
                    delivered_at=now,
                    outcome=outcome,
                    keep_until=now + keep_seconds,
                    claimed_until=None,
                    token=None,
                )
            ),
        )

    def expired_results(self, now: float | None = None) -> list[PendingResult]:
        """Sent results whose keeping time has passed."""
        r = self._tables.results
        cutoff = time.time() if now is None else now
        query = sa.select(r).where(
            r.c.delivered_at.is_not(None), r.c.keep_until < cutoff
        )
        return self._read("list expired results", lambda c: self._rows(c, query))

    def forget_result(self, result_id: str) -> None:
        r = self._tables.results
        self._write(
            "forget a result",
            lambda conn: conn.execute(sa.delete(r).where(r.c.id == result_id)),
        )

    def result_trust_keys(self) -> set[str]:
        """The trusts' keys results (sent or not) still name."""
        r = self._tables.results
        return set(
            self._read(
                "list results' trusts",
                lambda conn: conn.scalars(
                    sa.select(r.c.trust_key).where(r.c.trust_key.is_not(None))
                ).all(),
            )
        )

    def _rows(self, conn: sa.Connection, query: sa.Select[Any]) -> list[PendingResult]:
        out = []
        for row in conn.execute(query).mappings():
            token = row["token"]
            out.append(
                PendingResult(
                    id=row["id"],
                    deployment_id=row["deployment_id"],
                    shape=row["shape"],
                    url=row["url"],
                    trust_key=row["trust_key"],
                    created_at=float(row["created_at"]),
                    attempts=int(row["attempts"]),
                    token=None if token is None else str(self._open(token)),
                    claimed_until=row["claimed_until"],
                    delivered_at=row["delivered_at"],
                    outcome=row["outcome"],
                    keep_until=row["keep_until"],
                )
            )
        return out
