"""The lean user's wire format: request encoding and the incremental response parser."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.swarm.wire import (
    ProtocolError,
    ResponseParser,
    encode_request,
    says_close,
    split_host,
    uses_tls,
)


@dataclass(frozen=True)
class Framed:
    """A response on the wire and what the parser must make of it."""

    wire: bytes
    status: int
    body: bytes  # the payload (chunks decoded)
    keep_alive: bool
    until_close: bool  # the body ends when the connection does


def chunked(body: bytes, cuts: list[int], extension: bool, trailer: bool) -> bytes:
    pieces, start = [], 0
    for cut in [*sorted({c for c in cuts if 0 < c < len(body)}), len(body)]:
        if cut > start:
            size = f"{cut - start:x}" + (";name=value" if extension else "")
            pieces.append(size.encode() + b"\r\n" + body[start:cut] + b"\r\n")
        start = cut
    end = b"0\r\n" + (b"X-Checksum: 1\r\n" if trailer else b"") + b"\r\n"
    return b"".join(pieces) + end


@st.composite
def responses(draw: st.DrawFn) -> Framed:
    status = draw(st.sampled_from([200, 201, 206, 301, 404, 500, 503]))
    body = draw(st.binary(max_size=3000))
    framing = draw(st.sampled_from(["length", "chunked", "close"]))
    version = draw(st.sampled_from([b"HTTP/1.1", b"HTTP/1.0"]))
    connection = draw(st.sampled_from([None, b"close", b"keep-alive", b"Keep-Alive"]))
    upper = draw(st.booleans())  # header-name case must not matter
    interim = draw(st.booleans())  # a 100 Continue before the response
    headers = [b"Server: test", b"Date: Sat, 21 Nov 2026 09:00:00 GMT"]
    if connection is not None:
        headers.append((b"CONNECTION: " if upper else b"Connection: ") + connection)
    if framing == "length":
        headers.append((b"CONTENT-LENGTH: " if upper else b"content-length:") + b"%d" % len(body))
        payload = body
    elif framing == "chunked":
        headers.append(b"Transfer-Encoding: chunked")
        payload = chunked(
            body,
            draw(st.lists(st.integers(0, 3000), max_size=6)),
            draw(st.booleans()),
            draw(st.booleans()),
        )
    else:
        payload = body
    head = version + b" %d Reason Phrase\r\n" % status + b"".join(h + b"\r\n" for h in headers)
    wire = (b"HTTP/1.1 100 Continue\r\n\r\n" if interim else b"") + head + b"\r\n" + payload
    if version == b"HTTP/1.0":
        keep_alive = connection is not None and connection.lower() == b"keep-alive"
    else:
        keep_alive = connection != b"close"
    return Framed(wire, status, body, keep_alive and framing != "close", framing == "close")


def feed_in_pieces(parser: ResponseParser, data: bytes, cuts: list[int]) -> tuple[bool, bytes]:
    """Feed ``data`` split at ``cuts`` until complete: (complete, bytes left after it)."""
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(data)}), len(data)]
    for start, end in itertools.pairwise(bounds):
        if parser.feed(data[start:end]):
            return True, parser.rest + data[end:]
    return False, b""


@given(responses(), st.lists(st.integers(0, 4000), max_size=12), st.binary(max_size=40))
def test_any_split_of_a_response_parses_to_the_same_result(
    framed: Framed, cuts: list[int], following: bytes
) -> None:
    parser = ResponseParser()
    parser.begin(keep_body=True)
    extra = b"" if framed.until_close else following  # bytes after a delimited response
    done, rest = feed_in_pieces(parser, framed.wire + extra, cuts)
    if framed.until_close:
        assert not done
        assert parser.eof()
    else:
        assert done
        assert rest == extra
    assert parser.status == framed.status
    assert parser.body == framed.body
    assert parser.body_bytes == len(framed.body)
    assert parser.keep_alive is framed.keep_alive


@given(st.lists(responses(), min_size=1, max_size=4))
def test_parser_is_reusable_across_responses_on_one_connection(batch: list[Framed]) -> None:
    parser = ResponseParser()
    for framed in batch:
        parser.begin(keep_body=True)
        if framed.until_close:
            parser.feed(framed.wire)
            assert parser.eof()
        else:
            assert parser.feed(framed.wire)
        assert (parser.status, parser.body) == (framed.status, framed.body)


def test_body_is_counted_but_not_kept_unless_asked() -> None:
    parser = ResponseParser()
    parser.begin()
    assert parser.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
    assert (parser.body_bytes, parser.body) == (5, b"")


@pytest.mark.parametrize("status", [204, 304])
def test_responses_without_a_body_end_at_the_head(status: int) -> None:
    parser = ResponseParser()
    parser.begin()
    assert parser.feed(b"HTTP/1.1 %d X\r\nContent-Length: 10\r\n\r\n" % status)
    assert parser.body_bytes == 0


def test_head_request_ignores_the_announced_length() -> None:
    parser = ResponseParser()
    parser.begin(head_only=True)
    assert parser.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\nNEXT")
    assert (parser.body_bytes, parser.rest) == (0, b"NEXT")


def test_eof_before_the_end_of_a_delimited_body_is_incomplete() -> None:
    parser = ResponseParser()
    parser.begin()
    assert not parser.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\nshort")
    assert parser.started
    assert not parser.eof()


@pytest.mark.parametrize(
    "wire",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 2xx OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXX",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
    ],
)
def test_what_is_not_a_framable_response_is_a_protocol_error(wire: bytes) -> None:
    parser = ResponseParser()
    parser.begin()
    with pytest.raises(ProtocolError):
        parser.feed(wire)


def test_an_endless_head_is_refused() -> None:
    parser = ResponseParser()
    parser.begin()
    with pytest.raises(ProtocolError):
        parser.feed(b"HTTP/1.1 200 OK\r\n" + b"X-Filler: a\r\n" * 10_000)


def test_request_is_encoded_once_with_host_and_length() -> None:
    wire = encode_request(
        "POST",
        "/telemetry",
        "127.0.0.1:8080",
        body=b"{}",
        headers=[("Content-Type", "application/json")],
    )
    assert wire == (
        b"POST /telemetry HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
        b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    )
    assert encode_request("GET", "/hello", "h") == b"GET /hello HTTP/1.1\r\nHost: h\r\n\r\n"


def test_request_host_header_can_be_overridden() -> None:
    wire = encode_request("GET", "/", "127.0.0.1:1", headers=[("host", "example.test")])
    assert wire == b"GET / HTTP/1.1\r\nhost: example.test\r\n\r\n"


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("hello", ()),
        ("/", [("X-Bad", "a\r\nInjected: yes")]),
    ],
)
def test_bad_requests_are_refused(path: str, headers: list[tuple[str, str]]) -> None:
    with pytest.raises(ValueError):
        encode_request("GET", path, "h", headers=headers)


def test_split_host() -> None:
    assert split_host("http://127.0.0.1:8080") == ("127.0.0.1", 8080, "127.0.0.1:8080")
    assert split_host("http://localhost/") == ("localhost", 80, "localhost")
    assert split_host("https://127.0.0.1:8443") == ("127.0.0.1", 8443, "127.0.0.1:8443")
    assert split_host("https://localhost") == ("localhost", 443, "localhost")
    assert uses_tls("https://127.0.0.1:8443") and not uses_tls("http://127.0.0.1:8080")
    with pytest.raises(ValueError, match="https://"):
        split_host("ftp://127.0.0.1:21")


def test_an_error_response_keeps_its_status_line_and_a_success_none() -> None:
    parser = ResponseParser()
    assert parser.feed(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
    assert parser.status_line == b"HTTP/1.1 503 Service Unavailable"
    parser.begin()
    assert parser.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    assert parser.status_line == b""


@pytest.mark.parametrize(
    ("wire", "said"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789", "after 10 of 100 body bytes"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", "after 3 body bytes"),
        (b"HTTP/1.1 200 O", "after 14 bytes of the response head"),
    ],
)
def test_a_connection_closed_early_says_how_far_it_got(wire: bytes, said: str) -> None:
    parser = ResponseParser()
    assert not parser.feed(wire)
    assert not parser.eof()
    assert said in parser.closed_early()


def test_garbage_is_shown_by_its_first_bytes_in_at_most_80_characters() -> None:
    with pytest.raises(ProtocolError) as raised:
        ResponseParser().feed(b"\x00\x01" * 40 + b"\r\n\r\n")
    shown = str(raised.value).split(": ", 1)[1]
    assert shown.startswith("b'\\x00\\x01") and len(shown) <= 80


def test_a_request_saying_connection_close_is_not_reused() -> None:
    assert says_close([("Connection", "close")]) and says_close([("connection", "Close")])
    assert not says_close([("Connection", "keep-alive")]) and not says_close([])
