"""Sending the results outside callers wait for, from the store.

An asynchronous Mistral action writes down its result's address when it
starts (:meth:`~swflows.persistence.results.ResultRows.add_result`): the
URL to PUT to, the trust (or, without trusts, the sealed token) to PUT
with, and how the deployment's end reads as a result
(:mod:`swflows.callbacks`).  The process that started it sends it as soon
as it sees the deployment end; if that process is gone, the elected
watcher sends it at its next cycle (every runner's watcher in a single
process).  A result is held by one process while it is sent (a claim in
its row), then marked sent and never sent again: a process killed between
the PUT and the mark sends it once more after the claim expires, which
Mistral takes as the same result.  Mistral unreachable: tried again at
later cycles, waiting twice as long each time (up to five minutes), for
:data:`GIVE_UP_AFTER` seconds, then logged and given up.

A sent result's row, and the trust it was sent through, are kept for
``[trustee] result_trust_keep`` seconds: Mistral goes on with the workflow
with a token of that trust, which dies with it.  The sweep then deletes
the trust (unless a deployment made by that next action acts through it:
it goes with the last of them) and forgets the row.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Final

from keystoneauth1 import exceptions as ksa_exc

from swflows import callbacks, exceptions, model, states, trusts
from swflows.clients import base as client_base
from swflows.clients.callback import PUT_TIMEOUT, put_result
from swflows.persistence import flow_registry as flow_rows
from swflows.persistence import results as result_rows
from swflows.services import Services

LOG = logging.getLogger(__name__)

#: seconds a process holds a result while sending it
CLAIM_SECONDS: Final = PUT_TIMEOUT * 2
#: seconds an undeliverable result is tried for (Mistral's own action
#: timeout, when it has one, fails the action long before)
GIVE_UP_AFTER: Final = 86400.0
#: results looked at in one cycle
BATCH: Final = 100
#: seconds before a result its receiver did not take is tried again: this
#: doubled at each attempt, up to :data:`LONGEST_WAIT`
FIRST_WAIT: Final = 2.0
LONGEST_WAIT: Final = 300.0
#: one attempt per send: a receiver that does not answer holds up no
#: watcher cycle, the result waits its turn instead
ONE_ATTEMPT: Final = client_base.RetryPolicy(attempts=1)


class Outbox:
    """Sends ended deployments' results; see the module's text."""

    def __init__(self, services: Services, registry: flow_rows.FlowRegistry) -> None:
        self.services = services
        self.registry = registry

    @property
    def keep_seconds(self) -> float:
        return float(self.services.conf.trustee.result_trust_keep)

    def send_due(self) -> int:
        """Send every pending result whose deployment's action ended; how
        many were sent (or refused, or given up)."""
        pending = self.services.store.pending_results(BATCH, free_at=time.time())
        if not pending:
            return 0
        ended = self.ended({r.deployment_id for r in pending})
        sent = 0
        for row in pending:
            if row.deployment_id in ended and self._send(
                row, *ended[row.deployment_id]
            ):
                sent += 1
        return sent

    def send(self, result_id: str) -> bool:
        """Send one result now if its deployment's action ended; whether
        it was sent here."""
        try:
            row = self.services.store.get_result(result_id)
        except exceptions.NotFound:
            return False
        if row.delivered_at is not None:
            return False
        found = self.ended([row.deployment_id]).get(row.deployment_id)
        return found is not None and self._send(row, *found)

    def ended(
        self, deployment_ids: Iterable[str]
    ) -> dict[str, tuple[model.Deployment | None, str | None]]:
        """Deployment id -> (its last state or None when removed, what set
        its flow aside or None), for those whose action no flow runs any
        more.  One still IN_PROGRESS with no flow is not ended: a flow
        a user composed runs it, or the reconciler will end it."""
        wanted = set(deployment_ids)
        busy: set[str] = set()
        broken: dict[str, str] = {}
        for row in self.registry.of_deployments(wanted):
            if row.kind not in flow_rows.ACTION_FLOWS:
                continue
            if row.state == flow_rows.BROKEN:
                broken.setdefault(row.deployment_id, row.note or "broken")
            else:
                busy.add(row.deployment_id)
        out: dict[str, tuple[model.Deployment | None, str | None]] = {}
        for deployment_id in sorted(wanted - busy):
            try:
                deployment: model.Deployment | None = (
                    self.services.store.get_deployment(deployment_id)
                )
            except exceptions.DeploymentNotFound:
                deployment = None
            note = broken.get(deployment_id)
            if note is not None:
                out[deployment_id] = (deployment, note)
            elif deployment is None or deployment.status != states.IN_PROGRESS:
                out[deployment_id] = (deployment, None)
        return out

    def _send(
        self,
        row: result_rows.PendingResult,
        deployment: model.Deployment | None,
        broken: str | None,
    ) -> bool:
        store = self.services.store
        if not store.claim_result(row.id, CLAIM_SECONDS):
            return False
        note = None if broken is None else f"its flow was set aside: {broken}"
        state, output = callbacks.outcome(
            row.shape, row.deployment_id, deployment, note
        )
        try:
            status = put_result(
                row.url,
                callbacks.body(state, output),
                self._token(row),
                retry=ONE_ATTEMPT,
            )
        except exceptions.SwflowsError as exc:
            if time.time() - row.created_at < GIVE_UP_AFTER and exc.retryable:
                LOG.warning(
                    "result %s of deployment %s not sent yet: %s",
                    row.id,
                    row.deployment_id,
                    exc,
                )
                wait = min(FIRST_WAIT * 2**row.attempts, LONGEST_WAIT)
                store.postpone_result(row.id, wait)
                return False
            LOG.error(
                "result %s of deployment %s given up: %s",
                row.id,
                row.deployment_id,
                exc,
            )
            store.result_sent(row.id, result_rows.GIVEN_UP, self.keep_seconds)
            return True
        if 200 <= status < 300:
            outcome = result_rows.DELIVERED
            LOG.info(
                "result %s of deployment %s sent: %s", row.id, row.deployment_id, state
            )
        else:
            outcome = result_rows.REFUSED
            LOG.error(
                "result %s of deployment %s refused: HTTP %s",
                row.id,
                row.deployment_id,
                status,
            )
        store.result_sent(row.id, outcome, self.keep_seconds)
        return True

    def _token(self, row: result_rows.PendingResult) -> str | None:
        """The token a result is sent with: one of its trust's when it has
        one (the caller's may be gone), else the caller's own."""
        if row.trust_key is None:
            return row.token
        trust_id = self.services.store.get_trust(trusts.CALLBACK, row.trust_key)
        trustee = self.services.clients.trustee
        if trust_id is None or trustee is None:
            raise exceptions.SwflowsError(f"result {row.id}: its trust is gone")
        try:
            token = trustee.session(trust_id).get_token()
        except ksa_exc.ClientException as exc:
            raise client_base.ksa_error("identity", "trust login", exc) from None
        return str(token) if token else None

    def forget_expired(self) -> int:
        """Delete the trusts of results sent more than ``result_trust_keep``
        seconds ago (kept while a deployment acts through one), and forget
        their rows; how many.  A trust that cannot be deleted now keeps its
        row for the next sweep."""
        store = self.services.store
        done = 0
        for row in store.expired_results():
            if row.trust_key is not None:
                trusts.let_go(self.services, trusts.CALLBACK, row.trust_key)
            store.forget_result(row.id)
            done += 1
        return done


__all__ = ["BATCH", "CLAIM_SECONDS", "GIVE_UP_AFTER", "Outbox"]
