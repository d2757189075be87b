"""Swift's proxy access lines, as the bench against Heat counts them."""

from __future__ import annotations

from typing import Any

from bench.against_heat import metadata_puts, parse_swift_line, signal_puts

#: as the dev cloud's proxy sends it (token shortened as Swift logs it)
LINE = (
    "<134>proxy-server: 127.0.0.1 127.0.0.1 29/Nov/2026/06/39/01 GET "
    "/v1/AUTH_718b/bench-signals%3Fformat%3Djson HTTP/1.0 200 - "
    "python-swiftclient-4.11.0 gAAAAABrC8iF3ZHE... - 512 - "
    "txb6a782270c46449486630-006b0bc885 - 0.0591 - - "
    "1795934341.031851292 1795934341.091000795 0 5ee2ee2e"
)


def test_a_listing_line_is_read_with_its_times() -> None:
    line = parse_swift_line(LINE)
    assert line == {
        "method": "GET",
        "kind": "container",
        "path": "/v1/AUTH_718b/bench-signals",
        "status": "200",
        "agent": "python-swiftclient-4.11.0",
        "start": 1795934341.031851292,
        "end": 1795934341.091000795,
    }


def test_an_object_put_through_a_tempurl_is_an_object() -> None:
    put = LINE.replace(" GET ", " PUT ").replace(
        "bench-signals%3Fformat%3Djson", "c/d1/1%3Ftemp_url_sig%3Dx"
    )
    line = parse_swift_line(put)
    assert line is not None
    assert (line["method"], line["kind"], line["path"]) == (
        "PUT",
        "object",
        "/v1/AUTH_718b/c/d1/1",
    )


def test_a_subrequest_and_other_messages_are_not_counted() -> None:
    # a request a middleware made for another carries its source
    assert parse_swift_line(LINE.replace(" 0.0591 - - ", " 0.0591 SW - ")) is None
    assert parse_swift_line("<134>proxy-server: STDERR: something") is None
    assert (
        parse_swift_line("<134>proxy-server: 127.0.0.1 127.0.0.1 x GET /healthcheck")
        is None
    )


def test_metadata_writes_and_signals_are_told_apart() -> None:
    """The servers' metadata is the object the agents read; whoever PUTs
    it writes metadata, while an agent's PUT of another object is a
    signal."""

    def line(method: str, path: str, agent: str, end: float) -> dict[str, Any]:
        return {
            "method": method,
            "kind": "object",
            "path": path,
            "status": "201" if method == "PUT" else "200",
            "agent": agent,
            "start": end - 0.01,
            "end": end,
        }

    agent = "python-requests/2.32.3"
    lines = [
        line("PUT", "/v1/a/meta/s1", "python-swiftclient-4.11.0", 1.0),
        line("GET", "/v1/a/meta/s1", agent, 2.0),
        line("PUT", "/v1/a/meta/s1", agent, 3.0),  # the plugin's own client
        line("PUT", "/v1/a/signals/d1", agent, 4.0),
        line("PUT", "/v1/a/other/x", "python-swiftclient-4.11.0", 5.0),
    ]
    assert metadata_puts(lines) == [1.0, 3.0]
    assert signal_puts(lines) == [4.0]
