"""The owner tag written with metadata channels (pure)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from swflows.transports import owner


def services(secret: bytes, prefix: str) -> Any:
    return SimpleNamespace(secret=secret, store=SimpleNamespace(table_prefix=prefix))


def test_the_tag_is_the_installations() -> None:
    one = owner.tag(services(b"k" * 32, "swflows_"))
    assert one == owner.tag(services(b"k" * 32, "swflows_"))  # every host
    assert one != owner.tag(services(b"j" * 32, "swflows_"))  # another key
    assert one != owner.tag(services(b"k" * 32, "other_"))  # other tables
    assert one.isalnum() and len(one) == 24


def test_the_tag_is_read_back_from_a_content_type() -> None:
    written = owner.content_type("abc123")
    assert written.startswith("application/json;")
    assert owner.of_content_type(written) == "abc123"
    # as a Swift listing shows it
    assert owner.of_content_type("application/json;swflows_owner=abc123") == "abc123"
    assert owner.of_content_type('application/json; SWFLOWS_OWNER="x"') == "x"


def test_no_tag_in_other_content_types() -> None:
    for value in (
        "",
        "application/json",
        "text/plain; charset=utf-8",
        "a; b",
        "a; swflows_owner=",
    ):
        assert owner.of_content_type(value) is None
