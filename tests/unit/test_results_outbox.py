"""Results waited for outside swflows: kept in the store with their
deployment, sent once by whichever process sees it end (the process that
started it, or another after it died), through a trust shared with what
the caller does next and deleted with the last row acting through it."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swflows import callbacks, projects, states, trusts
from swflows import conf as sw_conf
from swflows.clients.cloud import Clients
from swflows.engine.outbox import Outbox
from swflows.persistence import Store
from swflows.persistence import flow_registry as flow_rows
from swflows.persistence import results as result_rows
from swflows.services import Services
from tests.unit.test_persistence_store import deployment
from tests.unit.test_trusts import _Deleting


class _Mistral(http.server.BaseHTTPRequestHandler):
    """Takes PUTs of action results; answers ``status`` (a list: one per
    request, the last repeated)."""

    received: list[tuple[str, str | None, dict[str, Any]]]
    statuses: list[int]

    def do_PUT(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length))
        self.received.append((self.path, self.headers.get("X-Auth-Token"), body))
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def mistral() -> Iterator[type[_Mistral]]:
    handler = type("Handler", (_Mistral,), {"received": [], "statuses": [200]})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    handler.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    yield handler
    server.shutdown()
    server.server_close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as made:
        yield made


def services_of(store: Store, trustee: Any = None) -> Services:
    clients = Clients(trustee=trustee, acting=lambda login: {"compute": None})
    return Services(store, sw_conf.get_conf(config_files=[]), clients, secret=b"k" * 32)


def outbox_of(services: Services) -> Outbox:
    return Outbox(services, flow_rows.FlowRegistry(services.store))


def test_the_end_of_a_deployment_reads_as_its_result() -> None:
    done = deployment(id="d1", status=states.COMPLETE)
    failed = deployment(
        id="d1",
        status=states.FAILED,
        status_reason="exit 3",
        reason={"kind": "exit_code"},
    )
    assert callbacks.outcome(callbacks.DEPLOYMENT, "d1", done) == (
        callbacks.SUCCESS,
        done.to_dict(),
    )
    state, output = callbacks.outcome(callbacks.DEPLOYMENT, "d1", failed)
    assert state == callbacks.ERROR and output["kind"] == "exit_code"
    assert output["message"] == "exit 3" and output["deployment"]["id"] == "d1"
    assert callbacks.outcome(callbacks.DEPLOYMENT, "d1", None)[1]["kind"] == (
        "not_found"
    )
    assert callbacks.outcome(callbacks.REMOVAL, "d1", None) == (
        callbacks.SUCCESS,
        {"id": "d1", "undeployed": True},
    )
    state, output = callbacks.outcome(callbacks.REMOVAL, "d1", done)
    assert state == callbacks.ERROR and output["kind"] == "flow_error"
    state, output = callbacks.outcome(callbacks.DEPLOYMENT, "d1", done, "lost")
    assert (state, output) == (
        callbacks.ERROR,
        {"kind": "flow_error", "message": "lost"},
    )


def test_a_result_row_keeps_its_token_sealed_and_is_claimed_by_one(
    store: Store,
) -> None:
    store.add_result(
        "7d1c1f04-0000-4000-8000-000000000001",
        "d1",
        shape=callbacks.DEPLOYMENT,
        url="http://mistral/v2/action_executions/a1",
        token="caller-token-secret",
    )
    with store.engine.connect() as conn:
        raw = conn.execute(store.tables.results.select()).all()
    assert "caller-token-secret" not in repr(raw)
    [row] = store.pending_results()
    assert row.token == "caller-token-secret"
    assert "caller-token-secret" not in repr(row)
    assert store.claim_result(row.id, 60)
    assert not store.claim_result(row.id, 60)  # held by the first
    store.release_result(row.id)
    assert store.claim_result(row.id, 60)
    store.result_sent(row.id, result_rows.DELIVERED, 0.0)
    assert not store.claim_result(row.id, 60)  # never sent twice
    assert store.pending_results() == []
    [sent] = store.results_of("d1")
    assert sent.outcome == result_rows.DELIVERED and sent.token is None
    assert [r.id for r in store.expired_results(time.time() + 1)] == [row.id]
    store.forget_result(row.id)
    assert store.results_of("d1") == []


def test_a_result_is_sent_once_when_its_deployment_ends_by_any_process(
    store: Store, mistral: Any
) -> None:
    services = services_of(store)
    registry = flow_rows.FlowRegistry(store)
    store.create_deployment(deployment(id="d1"))
    registry.add(
        "f1",
        kind="deploy",
        deployment_id="d1",
        server_id="srv",
        owner="runner",
        lease_until=0.0,
    )
    url = mistral.url + "/v2/action_executions/a1"
    result_id = "7d1c1f04-0000-4000-8000-000000000002"
    store.add_result(result_id, "d1", shape=callbacks.DEPLOYMENT, url=url, token="tok")
    starter, other = outbox_of(services), outbox_of(services)
    assert not starter.send(result_id)  # its flow still runs
    assert other.send_due() == 0
    registry.remove("f1")
    store.update_deployment("d1", status=states.COMPLETE)
    # the process that started it died: another one's cycle sends it
    assert other.send_due() == 1
    assert not starter.send(result_id) and other.send_due() == 0
    [(path, token, body)] = mistral.received
    assert path == "/v2/action_executions/a1" and token == "tok"
    assert body["state"] == "SUCCESS" and body["output"]["id"] == "d1"
    assert body["output"]["status"] == states.COMPLETE


def test_a_result_mistral_cannot_take_now_is_sent_later_and_a_refusal_is_final(
    store: Store, mistral: Any
) -> None:
    services = services_of(store)
    store.create_deployment(deployment(id="d1", status=states.COMPLETE))
    store.create_deployment(deployment(id="d2", status=states.COMPLETE))
    outbox = outbox_of(services)
    mistral.statuses[:] = [503, 200]
    result_id = "7d1c1f04-0000-4000-8000-000000000003"
    store.add_result(
        result_id,
        "d1",
        shape=callbacks.DEPLOYMENT,
        url=mistral.url + "/v2/action_executions/a1",
    )
    assert outbox.send_due() == 0  # Mistral down: kept, not dropped
    [waiting] = store.pending_results()
    assert waiting.claimed_until is not None
    assert waiting.claimed_until > time.time()  # and not tried again at once
    assert outbox.send_due() == 0 and len(mistral.received) == 1
    store.release_result(result_id)  # its wait is over
    assert outbox.send_due() == 1
    assert store.pending_results() == [] and len(mistral.received) == 2
    mistral.statuses[:] = [404]
    store.add_result(
        "7d1c1f04-0000-4000-8000-000000000004",
        "d2",
        shape=callbacks.REMOVAL,
        url=mistral.url + "/v2/action_executions/a2",
    )
    assert outbox.send_due() == 1
    [refused] = store.results_of("d2")
    assert refused.outcome == result_rows.REFUSED
    assert outbox.send_due() == 0  # never again


def test_a_trust_shared_by_a_result_and_a_deployment_goes_with_the_last(
    store: Store,
) -> None:
    # long enough that no ciphertext or hash holds it by chance ("t1" did)
    trust_id = "3f0c2b9e-trust-of-d1-and-d2"
    trustee = _Deleting()
    services = services_of(store, trustee)
    owner = projects.Owner("p1", "u1")
    key = trusts.callback_key("d1", "n1")
    store.set_owner(trusts.CALLBACK, key, owner)
    store.set_owner(projects.DEPLOYMENT, "d2", owner)
    store.set_trust(trusts.CALLBACK, key, trust_id)
    store.set_trust(projects.DEPLOYMENT, "d2", trust_id)  # the next action's
    with store.engine.connect() as conn:
        raw = conn.execute(store.tables.owners.select()).all()
    assert trust_id not in repr([tuple(r) for r in raw if r.kind != "server"])
    assert trusts.release(services, trusts.CALLBACK, key)
    assert trustee.deleted == []  # d2 still acts through it
    assert store.get_trust(trusts.CALLBACK, key) is None
    assert store.get_trust(projects.DEPLOYMENT, "d2") == trust_id
    assert trusts.release(services, projects.DEPLOYMENT, "d2")
    assert trustee.deleted == [trust_id]


def test_a_sent_results_trust_is_kept_then_deleted_with_its_row(
    store: Store, mistral: Any
) -> None:
    trustee = _Deleting()
    services = services_of(store, trustee)
    key = trusts.callback_key("d1", "n1")
    store.set_owner(trusts.CALLBACK, key, projects.Owner("p1", "u1"))
    store.set_trust(trusts.CALLBACK, key, "t1")
    store.create_deployment(deployment(id="d1", status=states.COMPLETE))
    result_id = "7d1c1f04-0000-4000-8000-000000000005"
    store.add_result(
        result_id,
        "d1",
        shape=callbacks.DEPLOYMENT,
        url=mistral.url + "/v2/action_executions/a1",
        trust_key=key,
    )
    outbox = outbox_of(services)
    outbox._token = lambda row: "trust-token"  # type: ignore[method-assign]
    assert outbox.send_due() == 1
    assert mistral.received[0][1] == "trust-token"
    # kept: the next action runs with a token of this trust
    assert (trusts.CALLBACK, key) not in trusts.unneeded(store)
    assert outbox.forget_expired() == 0 and trustee.deleted == []
    [sent] = store.results_of("d1")
    assert sent.keep_until is not None
    assert sent.keep_until - sent.delivered_at == pytest.approx(  # type: ignore[operator]
        float(services.conf.trustee.result_trust_keep)
    )
    store.result_sent(result_id, result_rows.DELIVERED, -1.0)  # its time passed
    assert outbox.forget_expired() == 1
    assert trustee.deleted == ["t1"]
    assert store.get_owner(trusts.CALLBACK, key) is None
    assert store.results_of("d1") == []


def test_results_waiting_their_turn_never_hide_a_newer_one(
    store: Store, mistral: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page of results postponed (their receiver down) is not read at
    all: a newer result past them is sent at the next cycle."""
    from swflows.engine import outbox as outbox_mod

    monkeypatch.setattr(outbox_mod, "BATCH", 1)
    services = services_of(store)
    store.create_deployment(deployment(id="d1", status=states.COMPLETE))
    store.create_deployment(deployment(id="d2", status=states.COMPLETE))
    url = mistral.url + "/v2/action_executions/"
    held, newer = (
        "7d1c1f04-0000-4000-8000-000000000006",
        "7d1c1f04-0000-4000-8000-000000000007",
    )
    store.add_result(held, "d1", shape=callbacks.DEPLOYMENT, url=url + "a1")
    assert store.claim_result(held, 600)  # older, and held for 10 minutes
    store.add_result(newer, "d2", shape=callbacks.DEPLOYMENT, url=url + "a2")
    assert outbox_of(services).send_due() == 1
    [(path, _, _)] = mistral.received
    assert path == "/v2/action_executions/a2"
    assert [r.id for r in store.pending_results()] == [held]
