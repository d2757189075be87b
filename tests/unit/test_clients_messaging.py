"""The pure parts of the Zaqar adapter: name and TTL rules, response parsing."""

from __future__ import annotations

from typing import Any

import pytest

from swflows.clients import messaging
from swflows.exceptions import ValidationError


class Untouchable:
    """A zaqarclient stand-in that fails the test if any request is prepared."""

    api_url = "http://zaqar.invalid"

    def _request_and_transport(self) -> Any:
        raise AssertionError("a request was made")


@pytest.fixture
def zaqar() -> messaging.Messaging:
    return messaging.Messaging(Untouchable())


@pytest.mark.parametrize("name", ["q", "a" * 64, "sws-1.2_3-x", "A.b-C_9"])
def test_queue_names_zaqar_accepts(name: str) -> None:
    assert messaging.check_queue_name(name) == name


@pytest.mark.parametrize("name", ["", "a" * 65, "a/b", "a b", "é", "q\n"])
def test_queue_names_zaqar_refuses(name: str) -> None:
    with pytest.raises(ValidationError) as caught:
        messaging.check_queue_name(name)
    assert caught.value.field == "queue"


@pytest.mark.parametrize(
    "call",
    [
        lambda z: z.ensure_queue("a" * 65),
        lambda z: z.delete_queue("a" * 65),
        lambda z: z.queue_exists("bad name"),
        lambda z: z.post("q", {}, ttl=59),
        lambda z: z.post("q", {}, ttl=10**9),
        lambda z: z.claim("q", ttl=30),
        lambda z: z.claim("q", grace=0),
        lambda z: z.claim("q", limit=0),
        lambda z: z.signed_url("q", ttl_seconds=0),
        lambda z: z.signed_url("q", paths=["queues"], ttl_seconds=60),
        lambda z: z.signed_url("q", methods=["BREW"], ttl_seconds=60),
        lambda z: z.list_messages("a" * 65),
    ],
)
def test_refused_before_any_request(zaqar: messaging.Messaging, call: Any) -> None:
    with pytest.raises(ValidationError):
        call(zaqar)


def test_message_from_a_listing() -> None:
    item = {"href": "/v2/queues/q/messages/m1", "body": {"a": 1}, "age": 3, "ttl": 60}
    assert messaging._message(item) == messaging.Message("m1", {"a": 1}, None, 3)


def test_message_from_a_claim() -> None:
    item = {"href": "/v2/queues/q/messages/m2?claim_id=c9", "body": [1], "age": 0}
    assert messaging._message(item) == messaging.Message("m2", [1], "c9", 0)


def test_next_marker() -> None:
    page = {"links": [{"rel": "next", "href": "/v2/queues?marker=q20&limit=20"}]}
    assert messaging._next_marker(page) == "q20"
    assert messaging._next_marker({"links": []}) is None


def test_signed_queue_comes_from_the_paths() -> None:
    signed = {"paths": ["/v2/queues/sws-1.a/messages"]}
    assert messaging._signed_queue(signed) == "sws-1.a"
    with pytest.raises(ValidationError):
        messaging._signed_queue({"paths": ["/v2/ping"]})
