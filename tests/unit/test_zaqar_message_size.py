"""ZAQAR_MESSAGE refuses, before posting, a document Zaqar would refuse."""

from __future__ import annotations

import types
from typing import Any

import pytest

from swflows import exceptions
from swflows.transports import impl_zaqar_message


class Messaging:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def list_messages(self, queue: str) -> list[Any]:
        self.calls.append("list")
        return []

    def post(self, queue: str, body: Any, ttl: int) -> str:
        self.calls.append("post")
        return "m1"


def document(deployments: int, config_bytes: int) -> dict[str, Any]:
    return {
        "deployments": [
            {"id": f"d{n}", "config": "x" * config_bytes} for n in range(deployments)
        ],
        "os-collect-config": {},
        "generation": 1,
    }


def publish(doc: dict[str, Any], **options: Any) -> Messaging:
    messaging = Messaging()
    services = types.SimpleNamespace(clients=types.SimpleNamespace(messaging=messaging))
    transport = impl_zaqar_message.ZaqarMessage(options)
    transport.publish(services, "s1", {"queue": "swm-s1"}, doc)
    return messaging


def test_a_document_that_fits_is_posted() -> None:
    assert publish(document(90, 1000)).calls == ["list", "post"]


def test_a_document_larger_than_a_zaqar_message_is_refused_before_posting() -> None:
    """The loaded soak's servers held about 90 deployments each: Zaqar
    answered the post 400 "Message collection size is too large", an
    error that named neither the server, nor the size, nor what to do."""
    messaging = Messaging()
    services = types.SimpleNamespace(clients=types.SimpleNamespace(messaging=messaging))
    transport = impl_zaqar_message.ZaqarMessage({})
    with pytest.raises(exceptions.TransportError) as caught:
        transport.publish(
            services,
            "s1",
            {"queue": "swm-s1"},
            document(90, 3000),
        )
    text = str(caught.value)
    assert "server s1's metadata (90 deployments) is 27" in text
    assert "(262144 bytes" in text and "POLL_TEMP_URL" in text
    assert messaging.calls == []  # nothing listed, nothing posted


def test_the_limit_is_zaqars_as_configured() -> None:
    with pytest.raises(exceptions.TransportError, match=r"\(2048 bytes"):
        publish(document(1, 3000), max_message_size=2048)
    assert publish(document(1, 1000), max_message_size=2048).calls == [
        "list",
        "post",
    ]


def test_the_limit_comes_from_the_configuration() -> None:
    from swflows import conf as sw_conf
    from swflows import transport_names as names
    from swflows.clients.cloud import Clients
    from swflows.services import Services

    conf = sw_conf.get_conf(config_files=[])
    conf.set_override("zaqar_max_message_size", 4096)
    services = Services(store=None, conf=conf, clients=Clients(), secret=b"k" * 32)  # type: ignore[arg-type]
    options = services.config_options(names.ZAQAR_MESSAGE)
    assert options["max_message_size"] == 4096
