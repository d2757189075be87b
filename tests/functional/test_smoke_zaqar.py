"""Zaqar as swflows uses it: a server posts through a signed URL, the
library claims and deletes."""

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from keystoneauth1 import session as ks_session
from zaqarclient.queues.v2 import client as zaqar_client
from zaqarclient.transport import errors as zaqar_errors


def signed_url_client(zaqar_url: str, signed: dict[str, Any], **override: Any) -> Any:
    """A client that holds nothing but the signed URL (as a server does)."""
    options = {
        "signature": signed["signature"],
        "expires": signed["expires"],
        "methods": signed["methods"],
        "paths": signed["paths"],
        "os_project_id": signed["project"],
    }
    options.update(override)
    return zaqar_client.Client(
        zaqar_url,
        version=2,
        conf={"auth_opts": {"backend": "signed-url", "options": options}},
    )


@pytest.fixture
def queue(keystone_demo_session: ks_session.Session, zaqar_url: str) -> Iterator[Any]:
    client = zaqar_client.Client(zaqar_url, version=2, session=keystone_demo_session)
    queue = client.queue("smoke-" + uuid.uuid4().hex[:24], force_create=True)
    yield queue
    queue.delete()


def test_signed_url_post_then_claim_and_delete(zaqar_url: str, queue: Any) -> None:
    signed = queue.signed_url(
        paths=["messages"], ttl_seconds=600, methods=["GET", "POST"]
    )
    server = signed_url_client(zaqar_url, signed).queue(queue.name, auto_create=False)
    server.post({"body": {"deploy_status_code": 0}, "ttl": 300})
    # echo=False (the default) hides a client's own messages from it.
    assert list(server.messages()) == []
    assert len(list(server.messages(echo=True))) == 1

    claim = queue.claim(ttl=60, grace=60, limit=10)  # both must be >= 60
    messages = list(claim)
    assert [m.body for m in messages] == [{"deploy_status_code": 0}]
    for message in messages:
        message.delete()
    assert list(queue.messages(echo=True)) == []


def test_tampered_signed_url_and_no_token_are_refused(
    zaqar_url: str, queue: Any
) -> None:
    signed = queue.signed_url(
        paths=["messages"], ttl_seconds=600, methods=["GET", "POST"]
    )
    sig = signed["signature"]
    tampered = signed_url_client(
        zaqar_url, signed, signature=sig[:-1] + ("0" if sig[-1] != "0" else "1")
    )
    # Zaqar answers a signature that does not verify with 404, not 401/403.
    with pytest.raises(zaqar_errors.ResourceNotFound):
        tampered.queue(queue.name, auto_create=False).post(
            {"body": "forged", "ttl": 300}
        )
    # A valid signature covers only its paths: claims were not signed.
    with pytest.raises(zaqar_errors.ResourceNotFound):
        signed_url_client(zaqar_url, signed).queue(queue.name, auto_create=False).claim(
            ttl=60, grace=60
        )

    resp = requests.post(
        f"{zaqar_url}/v2/queues/{queue.name}/messages",
        json={"messages": [{"body": "x", "ttl": 300}]},
        headers={"Client-ID": str(uuid.uuid4())},
    )
    assert resp.status_code == 401
    assert list(queue.messages(echo=True)) == []
