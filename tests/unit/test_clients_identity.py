"""The pure parts of the stack-user adapter: password derivation, value types."""

from __future__ import annotations

import hashlib
import re

import pytest

from swflows.clients import identity
from swflows.exceptions import ValidationError

SECRET = b"0123456789abcdef0123456789abcdef"
#: What Keystone deployments typically put in ``[security_compliance] password_regex``.
TYPICAL_RULES = [
    r"^.{12,}$",
    r"^(?=.*\d)(?=.*[a-zA-Z]).{7,}$",
    r"^(?=.*[a-z])(?=.*[A-Z])(?=.*\d)(?=.*[^a-zA-Z0-9]).{8,}$",
]


def test_derive_password_is_stable_and_url_safe() -> None:
    first = identity.derive_password(SECRET, "deployment-1", "user")
    assert first == identity.derive_password(SECRET, "deployment-1", "user")
    assert len(first) >= 32
    assert re.fullmatch(r"[A-Za-z0-9_-]+", first)
    for rule in TYPICAL_RULES:
        assert re.match(rule, first), rule


@pytest.mark.parametrize(
    "other",
    [
        (SECRET, "deployment-2", "user"),
        (SECRET[::-1], "deployment-1", "user"),
        (SECRET, "deployment-1user"),
        (SECRET, "deployment-", "1user"),
        (SECRET, "deployment-1", "user", ""),
    ],
)
def test_derive_password_differs_for_other_inputs(other: tuple[bytes, ...]) -> None:
    base = identity.derive_password(SECRET, "deployment-1", "user")
    secret, *parts = other
    assert identity.derive_password(secret, *parts) != base  # type: ignore[arg-type]


def test_derive_password_rules_hold_for_many_inputs() -> None:
    for i in range(500):
        password = identity.derive_password(SECRET, str(i))
        for rule in TYPICAL_RULES:
            assert re.match(rule, password), (rule, i)


def test_derive_password_refuses_weak_input() -> None:
    with pytest.raises(ValidationError, match="secret"):
        identity.derive_password(b"short", "x")
    with pytest.raises(ValidationError, match="parts"):
        identity.derive_password(SECRET)


def test_ec2_credential_id_is_keystones() -> None:
    assert identity.ec2_credential_id("abc") == hashlib.sha256(b"abc").hexdigest()


def test_ec2_credential_repr_hides_the_secret() -> None:
    cred = identity.Ec2Credential(access="AK", secret="top-secret", credential_id="c1")
    assert "top-secret" not in repr(cred)
    assert "AK" in repr(cred)
