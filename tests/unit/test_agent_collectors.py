"""Collectors: conditional GETs, the newest Zaqar message, errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

from swflows import exceptions
from swflows.agent import collectors, http
from tests.unit.agent_http import FakeHttp, Seen, fake_http

__all__ = ["fake_http"]


MODIFIED = "Sat, 21 Nov 2026 10:00:00 GMT"


def swift_like(doc: dict[str, Any], etag: str = "e1", modified: str = MODIFIED) -> Any:
    """Answers as Swift does: 304 when If-None-Match names the current ETag,
    or when If-Modified-Since is not older than Last-Modified (either one)."""

    def answer(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        if seen.headers.get("if-none-match") == etag:
            return 304, {"ETag": etag}, b""
        if seen.headers.get("if-modified-since") == modified:
            return 304, {"ETag": etag}, b""
        headers = {"ETag": etag, "Last-Modified": modified}
        return 200, headers, json.dumps(doc).encode()

    return answer


class TestRequestCollector:
    def test_unchanged_costs_a_304(self, fake_http: FakeHttp) -> None:
        doc: dict[str, Any] = {"deployments": []}
        fake_http.answers = [swift_like(doc), swift_like(doc), swift_like(doc, "e2")]
        collector = collectors.RequestCollector(
            f"{fake_http.url}/meta?temp_url_sig=x", session=requests.Session()
        )
        assert json.loads(collector.collect() or b"") == doc
        assert collector.collect() is None
        assert json.loads(collector.collect() or b"") == doc  # a new ETag
        first, second, _third = fake_http.seen
        assert "if-none-match" not in first.headers
        assert second.headers["if-none-match"] == "e1"
        # never both: Swift would answer 304 to a change within the same second
        assert "if-modified-since" not in second.headers

    def test_change_within_the_same_second(self, fake_http: FakeHttp) -> None:
        fake_http.answers = [swift_like({"n": 1}, "e1"), swift_like({"n": 2}, "e2")]
        collector = collectors.RequestCollector(
            fake_http.url, session=requests.Session()
        )
        assert json.loads(collector.collect() or b"") == {"n": 1}
        assert json.loads(collector.collect() or b"") == {"n": 2}

    def test_if_modified_since_without_etags(self, fake_http: FakeHttp) -> None:
        headers = {"Last-Modified": MODIFIED}
        fake_http.answers = [(200, headers, b"{}"), (304, headers, b"")]
        collector = collectors.RequestCollector(
            fake_http.url, session=requests.Session()
        )
        assert collector.collect() == b"{}"
        assert collector.collect() is None
        assert fake_http.seen[1].headers["if-modified-since"] == MODIFIED

    def test_server_ignoring_conditions(self, fake_http: FakeHttp) -> None:
        fake_http.answers = [(200, {"ETag": "e"}, b"{}"), (200, {"ETag": "e"}, b"{}")]
        collector = collectors.RequestCollector(
            fake_http.url, session=requests.Session()
        )
        assert collector.collect() == b"{}"
        assert collector.collect() is None

    def test_forget(self, fake_http: FakeHttp) -> None:
        fake_http.answers = [swift_like({}), swift_like({})]
        collector = collectors.RequestCollector(
            fake_http.url, session=requests.Session()
        )
        collector.collect()
        collector.forget()
        assert collector.collect() is not None

    @pytest.mark.parametrize(("status", "retryable"), [(503, True), (404, False)])
    def test_errors(self, fake_http: FakeHttp, status: int, retryable: bool) -> None:
        fake_http.answers = [(status, {}, b"no")]
        collector = collectors.RequestCollector(
            f"{fake_http.url}/m?temp_url_sig=SECRET", session=requests.Session()
        )
        with pytest.raises(exceptions.CloudError) as exc:
            collector.collect()
        assert exc.value.retryable is retryable
        assert "SECRET" not in str(exc.value)
        assert "SECRET" not in repr(collector)


def zaqar_page(
    ids: list[str], following: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    body: dict[str, Any] = {
        "messages": [{"id": i, "body": {"deployments": [], "n": i}} for i in ids]
    }
    body["links"] = [{"rel": "next", "href": following}] if following else []
    return 200, {}, json.dumps(body).encode()


def signed(url: str) -> dict[str, Any]:
    return {
        "signature": "sig",
        "expires": "2030-01-01T00:00:00",
        "methods": ["GET"],
        "paths": ["/v2/queues/swm-s1/messages"],
        "project": "p1",
        "url": url,
    }


class TestZaqarCollector:
    def test_newest_message_and_paging(self, fake_http: FakeHttp) -> None:
        page1 = [f"m{i:02d}" for i in range(collectors.ZAQAR_PAGE)]
        fake_http.answers = [
            zaqar_page(page1, "/v2/queues/swm-s1/messages?marker=x&limit=20"),
            zaqar_page(["m99"]),
            zaqar_page(["m99"]),
            (200, {}, b'{"messages": [], "links": []}'),
        ]
        collector = collectors.ZaqarCollector(
            session=requests.Session(), signed_url=signed(fake_http.url)
        )
        assert collector.collect() == {"deployments": [], "n": "m99"}
        assert collector.collect() is None  # same newest message
        assert collector.collect() is None  # empty queue: keep what we have
        first, second = fake_http.seen[:2]
        assert first.path.startswith("/v2/queues/swm-s1/messages?")
        assert "echo=true" in first.path
        assert first.headers["url-signature"] == "sig"
        assert first.headers["url-methods"] == "GET"
        assert first.headers["x-project-id"] == "p1"
        assert first.headers["client-id"]
        assert second.path == "/v2/queues/swm-s1/messages?marker=x&limit=20"

    def test_credentials(self, fake_http: FakeHttp) -> None:
        catalog = [
            {
                "type": "messaging",
                "endpoints": [{"interface": "public", "url": fake_http.url}],
            }
        ]
        token = {"token": {"expires_at": "2099-01-01T00:00:00Z", "catalog": catalog}}
        fake_http.answers = [
            (201, {"X-Subject-Token": "t"}, json.dumps(token).encode()),
            zaqar_page(["m1"]),
        ]
        keystone = http.Keystone(
            requests.Session(),
            fake_http.url,
            user_id="u",
            password="p",
            project_id="pr",
        )
        collector = collectors.ZaqarCollector(
            session=requests.Session(), keystone=keystone, queue_id="q1"
        )
        assert collector.collect() == {"deployments": [], "n": "m1"}
        assert fake_http.seen[0].path == "/v3/auth/tokens"
        assert fake_http.seen[1].path.startswith("/v2/queues/q1/messages?")
        assert fake_http.seen[1].headers["x-auth-token"] == "t"

    @pytest.mark.parametrize("refusals", [1, 2])
    def test_a_refused_token_is_renewed_once(
        self, fake_http: FakeHttp, refusals: int
    ) -> None:
        catalog = [
            {
                "type": "messaging",
                "endpoints": [{"interface": "public", "url": fake_http.url}],
            }
        ]
        token = {"token": {"expires_at": "2099-01-01T00:00:00Z", "catalog": catalog}}
        issued = (201, {"X-Subject-Token": "t"}, json.dumps(token).encode())
        refused: tuple[int, dict[str, str], bytes] = (401, {}, b"Unauthorized")
        fake_http.answers = [issued, refused, issued]
        fake_http.answers.append(refused if refusals == 2 else zaqar_page(["m1"]))
        keystone = http.Keystone(
            requests.Session(),
            fake_http.url,
            user_id="u",
            password="p",
            project_id="pr",
        )
        collector = collectors.ZaqarCollector(
            session=requests.Session(), keystone=keystone, queue_id="q1"
        )
        if refusals == 1:
            assert collector.collect() == {"deployments": [], "n": "m1"}
        else:
            with pytest.raises(exceptions.CloudError) as exc:
                collector.collect()
            assert exc.value.status == 401
        paths = [seen.path.split("?")[0] for seen in fake_http.seen]
        assert paths == ["/v3/auth/tokens", "/v2/queues/q1/messages"] * 2

    def test_not_json(self, fake_http: FakeHttp) -> None:
        fake_http.answers = [(200, {}, b"<html>")]
        collector = collectors.ZaqarCollector(
            session=requests.Session(), signed_url=signed(fake_http.url)
        )
        with pytest.raises(exceptions.CloudError, match="not JSON"):
            collector.collect()

    def test_signed_url_without_a_queue(self) -> None:
        bad = {**signed("http://x"), "paths": ["/v2/queues"]}
        with pytest.raises(exceptions.ValidationError):
            collectors.ZaqarCollector(session=requests.Session(), signed_url=bad)


@pytest.mark.parametrize(
    ("endpoint", "root"),
    [
        ("http://z:8888", "http://z:8888"),
        ("http://z:8888/", "http://z:8888"),
        ("http://z:8888/v2", "http://z:8888"),
        ("http://z/messaging/v1.1/", "http://z/messaging"),
    ],
)
def test_api_root(endpoint: str, root: str) -> None:
    assert collectors.api_root(endpoint) == root


def test_safe_url() -> None:
    url = "http://user:pw@h:80/v1/AUTH_x/c/o?temp_url_sig=S&temp_url_expires=1"
    assert http.safe_url(url) == "http://h:80/v1/AUTH_x/c/o?..."


# found by tests/unit/test_fuzz_metadata.py
def test_a_signed_url_nested_too_deeply_is_refused() -> None:
    with pytest.raises(exceptions.ValidationError, match="signed_url"):
        collectors.signed_url_value("[" * 5000 + "]" * 5000)


@pytest.mark.parametrize(
    "page",
    [{"links": 1}, {"links": "next"}, {"links": {"rel": "next"}}, {"links": True}],
)
def test_a_page_whose_links_are_no_list_has_no_next(page: Any) -> None:
    assert collectors._next_link(page) is None
