"""Notifiers: targets, trimming, retries, and each transport's request."""

from __future__ import annotations

import importlib.metadata
import json
import threading
from typing import Any

import pytest
import requests

from swflows import exceptions, signals
from swflows.agent import notify
from tests.unit.agent_http import FakeHttp, fake_http

__all__ = ["fake_http"]

SIGNED = {
    "signature": "s1gn",
    "expires": "2030-01-01T00:00:00",
    "methods": ["POST"],
    "paths": ["/v2/queues/sws-q/messages"],
    "project": "p1",
}


class TestTarget:
    @pytest.mark.parametrize(
        ("inputs", "transport"),
        [
            ({"deploy_signal_transport": "TEMP_URL_SIGNAL"}, "TEMP_URL_SIGNAL"),
            ({"deploy_signal_transport": "TEMP_URL_POLL"}, "TEMP_URL_SIGNAL"),
            ({"deploy_signal_transport": "ZAQAR_MESSAGE"}, "ZAQAR_SIGNAL"),
            ({"deploy_signal_transport": "NO_SIGNAL"}, "NO_SIGNAL"),
            # configs without deploy_signal_transport: Heat's agent's choice
            ({"deploy_signal_id": "u", "deploy_signal_verb": "PUT"}, "TEMP_URL_SIGNAL"),
            ({"deploy_signal_id": "u"}, "CFN_SIGNAL"),
            ({"deploy_queue_id": "q"}, "ZAQAR_SIGNAL"),
            ({"deploy_auth_url": "a"}, "HEAT_SIGNAL"),
            ({}, "NO_SIGNAL"),
        ],
    )
    def test_transport(self, inputs: dict[str, Any], transport: str) -> None:
        assert notify.target_of("c1", inputs).transport == transport

    @pytest.mark.parametrize("value", ["CARRIER_PIGEON", 3])
    def test_unknown_transport(self, value: Any) -> None:
        with pytest.raises(exceptions.ValidationError):
            notify.target_of("c1", {"deploy_signal_transport": value})

    def test_wants_started(self) -> None:
        assert notify.wants_started({"deploy_signal_started": "true"})
        assert notify.wants_started({"deploy_signal_started": True})
        assert not notify.wants_started({"deploy_signal_started": "false"})
        assert not notify.wants_started({})


class TestPrepare:
    def test_small_payload_unchanged(self) -> None:
        payload = {"deploy_stdout": "é", "deploy_status_code": 0}
        assert notify.prepare(payload, 1000) == signals.encode_payload(payload)

    def test_trims_streams_from_the_left(self) -> None:
        payload = {
            "deploy_stdout": "o" * 600_000 + "OUT-END",
            "deploy_stderr": "e" * 600_000 + "ERR-END",
            "deploy_status_code": 1,
            "result": "r",
        }
        body = notify.prepare(payload, signals.AGENT_SIGNAL_BYTES)
        assert len(body) <= signals.AGENT_SIGNAL_BYTES < signals.MAX_SIGNAL_BYTES
        sent = json.loads(body)
        assert sent["deploy_stdout"].endswith("OUT-END")
        assert sent["deploy_stderr"].endswith("ERR-END")
        assert sent["deploy_status_code"] == 1 and sent["result"] == "r"

    def test_oversized_keys_go_the_status_stays(self) -> None:
        body = notify.prepare({"deploy_status_code": 5, "x" * 500: 1}, 200)
        assert json.loads(body) == {"deploy_status_code": 5}

    def test_impossible_fit_still_signals_the_status(self) -> None:
        body = notify.prepare({"deploy_status_code": 5}, 10)
        sent = json.loads(body)
        assert sent["deploy_status_code"] == 5
        assert "could not be made to fit" in sent["deploy_stderr"]


def http_target(url: str, verb: str = "PUT") -> notify.Target:
    return notify.target_of(
        "c1",
        {
            "deploy_signal_transport": "TEMP_URL_SIGNAL",
            "deploy_signal_id": url,
            "deploy_signal_verb": verb,
        },
    )


def notifiers(**kwargs: Any) -> notify.Notifiers:
    return notify.Notifiers(entry_points=False, timeout=5, **kwargs)


class TestHttpSignal:
    def test_put(self, fake_http: FakeHttp) -> None:
        target = http_target(f"{fake_http.url}/v1/AUTH_x/c/o?temp_url_sig=abc")
        assert notifiers().deliver(
            target, {"deploy_status_code": 0}, attempts=1, backoff=0
        )
        [seen] = fake_http.seen
        assert (seen.method, seen.path) == ("PUT", "/v1/AUTH_x/c/o?temp_url_sig=abc")
        assert seen.headers["content-type"] == "application/json"
        assert json.loads(seen.body) == {"deploy_status_code": 0}

    def test_retries_5xx_then_succeeds(self, fake_http: FakeHttp) -> None:
        fake_http.answers = [(503, {}, b""), (500, {}, b"")]
        notifiers().deliver(
            http_target(fake_http.url, "POST"), {"a": 1}, attempts=3, backoff=0.01
        )
        assert [s.method for s in fake_http.seen] == ["POST"] * 3

    def test_gives_up_after_attempts(self, fake_http: FakeHttp) -> None:
        fake_http.answers = [(503, {}, b"")] * 5
        with pytest.raises(exceptions.CloudError) as exc:
            notifiers().deliver(
                http_target(fake_http.url), {}, attempts=2, backoff=0.01
            )
        assert exc.value.retryable and exc.value.status == 503
        assert len(fake_http.seen) == 2

    def test_4xx_is_not_retried(self, fake_http: FakeHttp) -> None:
        fake_http.answers = [(401, {}, b"Unauthorized")]
        with pytest.raises(exceptions.CloudError) as exc:
            notifiers().deliver(
                http_target(f"{fake_http.url}/o?temp_url_sig=SECRET"),
                {},
                attempts=5,
                backoff=0.01,
            )
        assert not exc.value.retryable and exc.value.status == 401
        assert "SECRET" not in str(exc.value)
        assert len(fake_http.seen) == 1

    def test_connection_refused_is_retried(self) -> None:
        with pytest.raises(exceptions.CloudError) as exc:
            notifiers().deliver(
                http_target("http://127.0.0.1:9/x?temp_url_sig=SECRET"),
                {},
                attempts=2,
                backoff=0.01,
            )
        assert exc.value.retryable and "SECRET" not in str(exc.value)

    def test_stop_cuts_retries_short(self, fake_http: FakeHttp) -> None:
        fake_http.answers = [(503, {}, b"")] * 50
        stop = threading.Event()
        stop.set()
        with pytest.raises(exceptions.CloudError):
            notifiers().deliver(
                http_target(fake_http.url), {}, attempts=50, backoff=5, stop=stop
            )
        assert len(fake_http.seen) == 1

    @pytest.mark.parametrize(
        "inputs",
        [
            {"deploy_signal_transport": "TEMP_URL_SIGNAL"},
            {
                "deploy_signal_transport": "TEMP_URL_SIGNAL",
                "deploy_signal_id": "http://x",
                "deploy_signal_verb": "DELETE",
            },
        ],
    )
    def test_bad_target(self, inputs: dict[str, Any]) -> None:
        with pytest.raises(exceptions.ValidationError):
            notifiers().deliver(
                notify.target_of("c", inputs), {}, attempts=3, backoff=0
            )

    def test_no_signal_sends_nothing(self) -> None:
        target = notify.target_of("c", {"deploy_signal_transport": "NO_SIGNAL"})
        assert not notifiers().deliver(target, {}, attempts=1, backoff=0)


class TestZaqarSignal:
    def test_signed_url(self, fake_http: FakeHttp) -> None:
        fake_http.answers = [(201, {}, b'{"resources": []}')]
        target = notify.target_of(
            "c1",
            {
                "deploy_signal_transport": "ZAQAR_SIGNAL",
                "deploy_queue_id": "sws-q",
                "deploy_queue_signed_url": {**SIGNED, "url": fake_http.url + "/"},
            },
        )
        notifiers().deliver(target, {"deploy_status_code": 0}, attempts=1, backoff=0)
        [seen] = fake_http.seen
        assert (seen.method, seen.path) == ("POST", "/v2/queues/sws-q/messages")
        assert seen.headers["url-signature"] == "s1gn"
        assert seen.headers["url-methods"] == "POST"
        assert seen.headers["url-paths"] == "/v2/queues/sws-q/messages"
        assert seen.headers["url-expires"] == "2030-01-01T00:00:00"
        assert seen.headers["x-project-id"] == "p1"
        assert seen.headers["client-id"]
        assert json.loads(seen.body) == {
            "messages": [{"body": {"deploy_status_code": 0}, "ttl": 600}]
        }

    def test_trimmed_to_zaqar_size(self, fake_http: FakeHttp) -> None:
        target = notify.target_of(
            "c1",
            {
                "deploy_signal_transport": "ZAQAR_SIGNAL",
                "deploy_queue_signed_url": json.dumps({**SIGNED, "url": fake_http.url}),
            },
        )
        payload = {"deploy_stdout": "x" * 2_000_000 + "END", "deploy_status_code": 0}
        notifiers().deliver(target, payload, attempts=1, backoff=0)
        [seen] = fake_http.seen
        assert len(seen.body) <= 256 * 1024
        assert json.loads(seen.body)["messages"][0]["body"]["deploy_stdout"].endswith(
            "END"
        )


def keystone_answer(catalog: list[dict[str, Any]]) -> tuple[int, dict[str, str], bytes]:
    body = {"token": {"expires_at": "2099-01-01T00:00:00Z", "catalog": catalog}}
    return 201, {"X-Subject-Token": "tok"}, json.dumps(body).encode()


def credentials(url: str) -> dict[str, Any]:
    return {
        "deploy_auth_url": f"{url}/v3",
        "deploy_user_id": "u1",
        "deploy_password": "pw",
        "deploy_project_id": "p1",
    }


class TestCredentials:
    def test_zaqar_as_stack_user(self, fake_http: FakeHttp) -> None:
        catalog = [
            {
                "type": "messaging",
                "endpoints": [
                    {"interface": "admin", "url": "http://wrong"},
                    {"interface": "public", "url": fake_http.url + "/v2"},
                ],
            }
        ]
        fake_http.answers = [
            keystone_answer(catalog),
            (201, {}, b"{}"),
            (201, {}, b"{}"),
        ]
        target = notify.target_of(
            "c1",
            {
                **credentials(fake_http.url),
                "deploy_signal_transport": "ZAQAR_SIGNAL",
                "deploy_queue_id": "sws-q",
            },
        )
        sender = notifiers()
        sender.deliver(target, {"deploy_status_code": 0}, attempts=1, backoff=0)
        sender.deliver(target, {"deploy_status_code": 0}, attempts=1, backoff=0)
        login, post, again = fake_http.seen
        assert login.path == "/v3/auth/tokens"
        auth = json.loads(login.body)["auth"]
        assert auth["identity"]["password"]["user"] == {"id": "u1", "password": "pw"}
        assert auth["scope"] == {"project": {"id": "p1"}}
        assert post.path == "/v2/queues/sws-q/messages"
        assert post.headers["x-auth-token"] == "tok"
        assert again.path == post.path  # the token was kept

    def test_heat_api_with_a_stack(self, fake_http: FakeHttp) -> None:
        catalog = [
            {
                "type": "orchestration",
                "endpoints": [{"interface": "public", "url": fake_http.url + "/v1/p1"}],
            }
        ]
        fake_http.answers = [keystone_answer(catalog), (200, {}, b"")]
        target = notify.target_of(
            "c1",
            {
                **credentials(fake_http.url),
                "deploy_signal_transport": "HEAT_SIGNAL",
                "deploy_stack_id": "mystack/sid",
                "deploy_resource_name": "deployment",
            },
        )
        notifiers().deliver(target, {"deploy_status_code": 0}, attempts=1, backoff=0)
        assert (
            fake_http.seen[1].path
            == "/v1/p1/stacks/mystack/sid/resources/deployment/signal"
        )

    def test_heat_signal_to_the_embedder(self, fake_http: FakeHttp) -> None:
        fake_http.answers = [keystone_answer([]), (401, {}, b""), keystone_answer([])]
        target = notify.target_of(
            "c1",
            {
                **credentials(fake_http.url),
                "deploy_signal_transport": "HEAT_SIGNAL",
                "deploy_server_id": "srv",
            },
        )
        sender = notifiers(
            heat_signal_url=fake_http.url + "/signal/{server_id}/{config_id}"
        )
        sender.deliver(target, {"deploy_status_code": 0}, attempts=1, backoff=0)
        paths = [s.path for s in fake_http.seen]
        # a token refused once is renewed once
        assert paths == [
            "/v3/auth/tokens",
            "/signal/srv/c1",
            "/v3/auth/tokens",
            "/signal/srv/c1",
        ]

    def test_heat_signal_without_target_is_retryable(self, fake_http: FakeHttp) -> None:
        fake_http.answers = [keystone_answer([])]
        target = notify.target_of(
            "c1",
            {**credentials(fake_http.url), "deploy_signal_transport": "HEAT_SIGNAL"},
        )
        with pytest.raises(exceptions.CloudError, match="heat_signal_url") as exc:
            notifiers().deliver(target, {}, attempts=1, backoff=0)
        assert exc.value.retryable

    def test_missing_credentials(self) -> None:
        target = notify.target_of(
            "c1", {"deploy_signal_transport": "ZAQAR_SIGNAL", "deploy_queue_id": "q"}
        )
        with pytest.raises(exceptions.ValidationError, match="deploy_auth_url"):
            notifiers().deliver(target, {}, attempts=1, backoff=0)


class TestPluggable:
    def test_given_notifier(self) -> None:
        sent: list[tuple[str, bytes]] = []

        class Embedder(notify.Notifier):
            def send(self, target: notify.Target, body: bytes) -> None:
                sent.append((target.config_id, body))

        sender = notifiers(notifiers={"HEAT_SIGNAL": Embedder()})
        target = notify.target_of("c1", {"deploy_signal_transport": "HEAT_SIGNAL"})
        sender.deliver(target, {"deploy_status_code": 0}, attempts=1, backoff=0)
        assert sent == [("c1", b'{"deploy_status_code": 0}')]

    def test_entry_point(self, monkeypatch: pytest.MonkeyPatch) -> None:
        class Mine(notify.Notifier):
            def send(self, target: notify.Target, body: bytes) -> None:
                pass

        class Plugin:
            name = "CFN_SIGNAL"
            value = "pkg:Mine"

            @staticmethod
            def load() -> type[notify.Notifier]:
                return Mine

        monkeypatch.setattr(
            importlib.metadata, "entry_points", lambda group: [Plugin()]
        )
        assert isinstance(
            notify.Notifiers(session=requests.Session()).find("CFN_SIGNAL"), Mine
        )
