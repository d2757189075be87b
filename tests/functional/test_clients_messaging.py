"""Messaging and SignedUrlClient against the dev cloud's real Zaqar (keystone auth).

Queues are named with a per-test uuid prefix; each test checks that no
queue with its prefix is left behind.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from swflows.clients import NO_RETRY, Messaging, SignedUrlClient
from swflows.exceptions import CloudError, ValidationError


@pytest.fixture(scope="module")
def zaqar(devcloud: dict[str, Any]) -> Messaging:
    ks = devcloud["keystone"]
    session = ks_session.Session(
        auth=v3.Password(auth_url=ks["auth_url"], **ks["demo"])
    )
    return Messaging.from_session(session, url=devcloud["zaqar"]["url"])


@pytest.fixture
def prefix(zaqar: Messaging) -> Iterator[str]:
    tag = f"swft-{uuid.uuid4().hex[:12]}"
    yield tag
    left = [q for q in zaqar.list_queues() if q.startswith(tag)]
    for name in left:
        zaqar.delete_queue(name)
    assert left == []


@pytest.fixture
def queue(zaqar: Messaging, prefix: str) -> Iterator[str]:
    name = f"{prefix}-q"
    zaqar.ensure_queue(name)
    yield name
    zaqar.delete_queue(name)


def test_queue_lifecycle(zaqar: Messaging, prefix: str) -> None:
    name = f"{prefix}.d1-0"  # dots are allowed in v2
    assert not zaqar.queue_exists(name)
    zaqar.ensure_queue(name)
    zaqar.ensure_queue(name)
    assert zaqar.queue_exists(name)
    assert name in zaqar.list_queues()
    assert zaqar.delete_queue(name) is True
    assert zaqar.delete_queue(name) is False
    assert not zaqar.queue_exists(name)


def test_long_queue_name_is_refused_before_any_call(
    zaqar: Messaging, prefix: str
) -> None:
    name = prefix + "x" * (65 - len(prefix))
    assert len(name) == 65
    with pytest.raises(ValidationError) as caught:
        zaqar.ensure_queue(name)
    assert caught.value.field == "queue"
    assert not any(q.startswith(prefix) for q in zaqar.list_queues())
    zaqar.ensure_queue(name[:64])  # the limit itself is fine
    assert zaqar.delete_queue(name[:64]) is True


def test_post_list_claim_delete(zaqar: Messaging, queue: str) -> None:
    first = zaqar.post(queue, {"deploy_status_code": 0}, ttl=120)
    second = zaqar.post(queue, {"deploy_status_code": 1}, ttl=120)
    listed = zaqar.list_messages(queue)
    assert [(m.id, m.body, m.claim_id) for m in listed] == [
        (first, {"deploy_status_code": 0}, None),
        (second, {"deploy_status_code": 1}, None),
    ]
    # Zaqar hides a client's own messages unless it asks for echo.
    assert zaqar.list_messages(queue, echo=False) == []

    claimed = zaqar.claim(queue, ttl=60, grace=60, limit=10)
    assert [m.id for m in claimed] == [first, second]
    assert len({m.claim_id for m in claimed}) == 1 and claimed[0].claim_id
    assert zaqar.claim(queue) == []  # nothing left unclaimed
    assert zaqar.list_messages(queue) == []  # claimed ones are not listed

    for message in claimed:
        zaqar.delete_message(queue, message.id, message.claim_id)
    zaqar.delete_message(queue, first)  # already gone: fine
    assert zaqar.claim(queue) == []


def test_listing_pages_through_every_message(zaqar: Messaging, queue: str) -> None:
    posted = [zaqar.post(queue, {"i": i}, ttl=120) for i in range(25)]
    listed = zaqar.list_messages(queue)
    assert [m.id for m in listed] == posted
    assert [m.body["i"] for m in listed] == list(range(25))


def test_zaqar_minimums_are_checked_before_any_call(
    zaqar: Messaging, queue: str
) -> None:
    for call in (
        lambda: zaqar.post(queue, {}, ttl=59),
        lambda: zaqar.claim(queue, ttl=59),
        lambda: zaqar.claim(queue, grace=59),
    ):
        with pytest.raises(ValidationError):
            call()
    assert zaqar.list_messages(queue) == []


def test_signed_url_is_all_an_agent_needs(zaqar: Messaging, queue: str) -> None:
    signed = zaqar.signed_url(
        queue, paths=("messages",), methods=("GET", "POST"), ttl_seconds=600
    )
    assert set(signed) == {"signature", "expires", "methods", "paths", "project", "url"}
    assert json.loads(json.dumps(signed)) == signed  # storable as JSON

    agent = SignedUrlClient(signed)
    assert agent.queue == queue
    message_id = agent.post({"deploy_stdout": "hi"}, ttl=120)
    [seen] = zaqar.list_messages(queue, echo=False)  # another client's message
    assert (seen.id, seen.body) == (message_id, {"deploy_stdout": "hi"})
    assert [m.id for m in agent.list_messages()] == [message_id]


def test_signed_url_refuses_what_it_does_not_grant(
    zaqar: Messaging, queue: str
) -> None:
    post_only = zaqar.signed_url(queue, methods=("POST",), ttl_seconds=600)
    agent = SignedUrlClient(post_only, retry=NO_RETRY)
    agent.post({"ok": True}, ttl=60)
    with pytest.raises(CloudError) as caught:
        agent.list_messages()
    assert caught.value.status in (401, 403, 404) and not caught.value.retryable
    assert post_only["signature"] not in str(caught.value)

    forged = dict(post_only, signature="0" * len(post_only["signature"]))
    with pytest.raises(CloudError) as caught:
        SignedUrlClient(forged, retry=NO_RETRY).post({"forged": True}, ttl=60)
    assert caught.value.status in (401, 403, 404)

    # The signature covers the queue: the same one for another queue fails.
    other = dict(
        post_only, paths=[p.replace(queue, queue + "x") for p in post_only["paths"]]
    )
    with pytest.raises(CloudError):
        SignedUrlClient(other, retry=NO_RETRY).post({"elsewhere": True}, ttl=60)
    assert [m.body for m in zaqar.list_messages(queue)] == [{"ok": True}]


def test_projects_are_isolated(
    devcloud: dict[str, Any], zaqar: Messaging, queue: str
) -> None:
    ks = devcloud["keystone"]
    admin = Messaging.from_session(
        ks_session.Session(auth=v3.Password(auth_url=ks["auth_url"], **ks["admin"])),
        url=devcloud["zaqar"]["url"],
    )
    zaqar.post(queue, {"secret": "demo's"}, ttl=60)
    assert not admin.queue_exists(queue)
    assert admin.list_messages(queue) == []


def test_bad_token_is_a_clean_error(devcloud: dict[str, Any]) -> None:
    ks = devcloud["keystone"]
    session = ks_session.Session(
        auth=v3.Password(
            auth_url=ks["auth_url"], **dict(ks["demo"], password="Wrong-1")
        )
    )
    bad = Messaging.from_session(session, url=devcloud["zaqar"]["url"], retry=NO_RETRY)
    with pytest.raises(CloudError) as caught:
        bad.list_queues()
    assert (caught.value.service, caught.value.status) == ("identity", 401)
    assert "Wrong-1" not in str(caught.value)


def test_endpoint_from_the_catalog(devcloud: dict[str, Any]) -> None:
    ks = devcloud["keystone"]
    session = ks_session.Session(
        auth=v3.Password(auth_url=ks["auth_url"], **ks["demo"])
    )
    assert Messaging.from_session(session).url.rstrip("/") == devcloud["zaqar"][
        "url"
    ].rstrip("/")
