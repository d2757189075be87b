"""Secrets a server echoes back are masked before an outcome is stored."""

from __future__ import annotations

import json
import shlex
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from swflows import derive, masking, model

SIG = "4f2d0c7cb53c3bfbd7a1e0c8b2f1d9e2a6b7c8d9"
PUT_URL = (
    "http://127.0.0.1:8080/v1/AUTH_p/swflows-signals/d1/1"
    f"?temp_url_sig={SIG}&temp_url_expires=2147483647"
)
PASSWORD = "Zq8-long-generated-password"
SIGNED = {
    "signature": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "expires": "2026-11-21T14:33:18",
    "methods": ["POST"],
    "paths": ["/v2/queues/q1/messages"],
    "project": "p1",
    "url": "http://127.0.0.1:8888",
}


def derived(*transport_inputs: tuple[str, object]) -> model.Config:
    return derive.derive(
        model.Config.create("app", "#!/bin/sh", group="script", inputs=[{"name": "a"}]),
        deployment_id="d1",
        generation=1,
        server_id="s1",
        action="CREATE",
        input_values={"a": "plain"},
        signal_transport="TEMP_URL_SIGNAL",
        transport_inputs=list(transport_inputs),
    )


def secrets_of(config: model.Config) -> frozenset[str]:
    return masking.known_secrets(masking.input_values(config.inputs))


def test_known_secrets_of_each_transport() -> None:
    temp_url = derived(*derive.temp_url_signal_inputs(PUT_URL))
    assert secrets_of(temp_url) == {SIG}
    heat = derived(*derive.heat_signal_inputs("http://ks", "u", "uid", PASSWORD, "p"))
    assert secrets_of(heat) == {PASSWORD}
    zaqar = derived(*derive.zaqar_signal_inputs("q1", signed_url=SIGNED))
    assert secrets_of(zaqar) == {SIGNED["signature"]}


def test_a_cfn_signature_is_known_raw_and_decoded() -> None:
    url = "http://cfn/v1/signal/x?Timestamp=1&Signature=ab%2Bcd%2Fefgh%3D"
    found = secrets_of(derived(*derive.cfn_signal_inputs(url)))
    assert found == {"ab%2Bcd%2Fefgh%3D", "ab+cd/efgh="}


def test_a_signal_url_without_a_known_signature_is_a_secret_whole() -> None:
    url = "https://signals.example/opaque-token-in-the-path"
    found = secrets_of(derived(*derive.cfn_signal_inputs(url)))
    assert found == {url}


def test_a_script_printing_its_environment() -> None:
    """What ``env`` prints in a hook given every secret input."""
    config = derived(
        *derive.temp_url_signal_inputs(PUT_URL),
        *derive.zaqar_signal_inputs(
            "q1",
            auth=derive.heat_signal_inputs("http://ks", "u", "uid", PASSWORD, "p"),
        ),
    )
    env = "\n".join(
        f"{spec.name}={shlex.quote(json.dumps(spec.value))}" for spec in config.inputs
    )
    masked = masking.mask_text(env, secrets_of(config))
    assert SIG not in masked and PASSWORD not in masked
    assert "temp_url_sig=***&temp_url_expires=2147483647" in masked
    assert "deploy_password='\"***\"'" in masked
    assert "deploy_server_id='\"s1\"'" in masked  # the rest is kept


def test_patterns_without_known_secrets() -> None:
    text = (
        "PUT http://swift/x?temp_url_expires=9&temp_url_sig=deadbeef01 failed\n"
        "curl -H 'X-Auth-Token: gAAAAABtoken-123' http://x\n"
        '{"X-Subject-Token": "gAAAAAB456", "signature": "cafe"}\n'
        "URL-Signature: abc123\n"
        "https://ec2/?AWSAccessKeyId=k&Signature=sig%2B%3D&Timestamp=1\n"
    )
    assert masking.mask_text(text) == (
        "PUT http://swift/x?temp_url_expires=9&temp_url_sig=*** failed\n"
        "curl -H 'X-Auth-Token: ***' http://x\n"
        '{"X-Subject-Token": "***", "signature": "***"}\n'
        "URL-Signature: ***\n"
        "https://ec2/?AWSAccessKeyId=k&Signature=***&Timestamp=1\n"
    )


def test_mask_outputs_reaches_nested_values_and_keeps_the_rest() -> None:
    values: dict[str, Any] = {
        "deploy_stdout": f"my password is {PASSWORD}",
        "deploy_stderr": "",
        "deploy_status_code": 1,
        "result": {"urls": [PUT_URL], PASSWORD: True, "n": 2.5, "none": None},
    }
    masked = masking.mask_outputs(values, {PASSWORD, SIG})
    assert masked == {
        "deploy_stdout": "my password is ***",
        "deploy_stderr": "",
        "deploy_status_code": 1,
        "result": {
            "urls": [PUT_URL.replace(SIG, "***")],
            "***": True,
            "n": 2.5,
            "none": None,
        },
    }
    assert values["deploy_stdout"].endswith(PASSWORD)  # a copy


def test_short_known_secrets_are_left_alone() -> None:
    assert masking.mask_text("a1 b2 abcde", {"a1", "abcde"}) == "a1 b2 abcde"


@given(
    st.text(),
    st.text(alphabet="abcdef0123456789", min_size=masking.MIN_SECRET_LENGTH),
)
def test_no_known_secret_survives(prefix: str, secret: str) -> None:
    text = f"{prefix}{secret}{prefix}{secret}"
    assert secret not in masking.mask_text(text, {secret})
