"""Swift's proxy access lines, as the bench against Heat counts them."""

from __future__ import annotations

from bench.against_heat import parse_swift_line

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
