"""HTTP/2 for both users: a request's header fields, the failure kinds' names, the C side's
figures as the recorder's, connection figures merged alike in any order, and the probe
that refuses a server speaking something else in one line."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.test_hotloop import histogram, take

from pytest_webperf.errors import OptionError
from pytest_webperf.models.http2 import NO_WINDOW, Http2Figures
from pytest_webperf.models.workload import Request
from pytest_webperf.swarm import http2
from pytest_webperf.swarm.engine import K_GOAWAY, K_GRPC, K_RST
from pytest_webperf.swarm.hotloop import interval_from


def test_pseudo_headers_come_first_and_names_are_lower_case() -> None:
    entry = Request(
        "/telemetry",
        method="POST",
        body=b"{}",
        headers=(("X-Key", "v"), ("Connection", "close"), ("Host", "h"), ("TE", "gzip")),
    )
    fields = http2.header_list(entry, "127.0.0.1:8443", "https")
    assert fields == [
        (b":method", b"POST"),
        (b":scheme", b"https"),
        (b":authority", b"127.0.0.1:8443"),
        (b":path", b"/telemetry"),
        (b"x-key", b"v"),
        (b"content-length", b"2"),
    ]
    assert http2.request_body(entry) == b"{}"
    assert http2.request_body(Request("/hello")) is None  # END_STREAM on the HEADERS


def test_a_grpc_call_says_no_content_length() -> None:
    call = Request("/a.B/C", method="POST", body=b"\0\0\0\0\0", grpc=True)
    assert all(name != b"content-length" for name, _ in http2.header_list(call, "h:1"))


def test_kinds_are_the_codes_as_rfc_9113_spells_them() -> None:
    assert http2.rst_kind(2) == "h2_rst_INTERNAL_ERROR"
    assert http2.goaway_kind(11) == "h2_goaway_ENHANCE_YOUR_CALM"
    assert http2.rst_kind(15) == "h2_rst_CODE_OTHER"
    assert http2.error_name(0x42) == "CODE_0x42"


def test_the_c_sides_http2_failures_are_named_with_their_examples() -> None:
    interval = interval_from(
        take(
            ok=7,
            latency=histogram(100, 200),
            headers=histogram(50, 60),
            stall=histogram(),
            h2={"streams": 10, "opened": 2, "min_window": -1, "server_streams": 128},
            fails=[
                (K_RST, 2, 3, 0, 0, b"RST_STREAM INTERNAL_ERROR before the response headers"),
                (K_GOAWAY, 11, 2, 0, 0, b"GOAWAY ENHANCE_YOUR_CALM (last stream 9): slow down"),
                (K_GRPC, 14, 1, 0, 0, b"back soon"),
            ],
        ),
        timeout_s=10,
    )
    assert interval.error_kinds == {
        "h2_rst_INTERNAL_ERROR": 3,
        "h2_goaway_ENHANCE_YOUR_CALM": 2,
        "grpc_UNAVAILABLE": 1,
    }
    assert interval.error_examples["grpc_UNAVAILABLE"] == "back soon"
    assert interval.requests == 13 and interval.errors == 6
    assert interval.ttfb is not None and interval.ttfb.count == 2
    assert interval.stall is None  # no body waited
    assert interval.http2 == Http2Figures(streams=10, opened=2, server_streams=128)


figures = st.builds(
    Http2Figures,
    streams=st.integers(1, 100),
    opened=st.integers(0, 50),
    hd_sent_wire=st.integers(0, 10**6),
    hd_sent_decoded=st.integers(0, 10**6),
    min_window=st.one_of(st.just(NO_WINDOW), st.integers(-(2**31), 2**31)),
    server_streams=st.integers(0, 1000),
)


@given(figures, figures, figures)
def test_connection_figures_merge_alike_in_any_order(
    a: Http2Figures, b: Http2Figures, c: Http2Figures
) -> None:
    assert a.merge(b) == b.merge(a)
    assert a.merge(b).merge(c) == a.merge(b.merge(c))
    merged = a.merge(b)
    assert merged.opened == a.opened + b.opened
    windows = [w for w in (a.min_window, b.min_window) if w != NO_WINDOW]
    assert merged.min_window == (min(windows) if windows else NO_WINDOW)
    assert Http2Figures.from_dict(merged.to_dict()) == merged


def test_savings_and_the_streams_the_server_allowed() -> None:
    f = Http2Figures(streams=200, hd_sent_wire=10, hd_sent_decoded=80, server_streams=128)
    assert f.request_savings == pytest.approx(0.875)
    assert f.response_savings is None  # nothing received
    assert f.streams_allowed == 128


def serve_once(answer: bytes, *, first_read: int = 1024, linger: bool = False) -> Iterator[str]:
    """A listener that reads what comes (up to ``first_read`` bytes), answers ``answer``
    and closes, or with ``linger`` waits for the client to go first; its URL."""
    listener = socket.create_server(("127.0.0.1", 0))

    def run() -> None:
        conn, _ = listener.accept()
        with conn, contextlib.suppress(OSError):  # a reset: the client left bytes unread
            conn.recv(first_read)
            if answer:
                conn.sendall(answer)
            if linger:
                conn.recv(1024)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    thread.join(5)
    listener.close()


@pytest.fixture
def http1() -> Iterator[str]:
    yield from serve_once(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


@pytest.fixture
def h2c() -> Iterator[str]:
    yield from serve_once(b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64")


def test_the_probe_refuses_an_http1_server_in_one_line(http1: str) -> None:
    said = http2.probe(http1)
    assert said == (
        f"{http1} does not speak HTTP/2 with prior knowledge (h2c): it answered the preface "
        'with "HTTP/1.1 400 Bad Request"'
    )


def test_the_probe_accepts_a_server_whose_first_frame_is_settings(h2c: str) -> None:
    assert http2.probe(h2c) is None


def greet(first: bytes) -> Iterator[str]:
    """A listener that answers the first byte it reads with ``first`` (nginx's h2c
    listener sends its SETTINGS so), nothing when it is empty (an HTTP/1.1 server waiting
    for the rest of the request), then waits for the client to go; its URL."""
    yield from serve_once(first, first_read=1, linger=True)


@pytest.fixture
def h2c_preface() -> Iterator[str]:
    yield from greet(b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64")


def test_http1_to_a_server_that_speaks_h2c_only_is_refused_in_one_line(h2c_preface: str) -> None:
    assert http2.http1_refusal(h2c_preface) == (
        f"{h2c_preface} speaks HTTP/2 only (h2c, prior knowledge): it answered the first "
        "byte of an HTTP/1.1 request with a SETTINGS frame"
    )


@pytest.fixture
def waits() -> Iterator[str]:
    yield from greet(b"")


def test_http1_to_a_server_that_waits_for_the_request_goes_on(waits: str) -> None:
    assert http2.http1_refusal(waits, quiet_s=0.05) is None


def test_http1_to_a_server_that_answers_in_http1_goes_on(http1: str) -> None:
    assert http2.http1_refusal(http1) is None


def test_http1_to_nobody_is_left_to_the_load_to_say() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert http2.http1_refusal(f"http://127.0.0.1:{port}") is None


def test_the_probe_says_when_nobody_listens() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert "cannot connect" in str(http2.probe(f"http://127.0.0.1:{port}"))


@pytest.mark.parametrize(
    ("call", "said"),
    [
        ({"streams": 4}, "streams=4: streams are HTTP/2's"),
        ({"http2": True, "streams": 0}, "streams=0: requests in flight per HTTP/2 connection"),
        ({"http2": "yes"}, "http2='yes': True"),
        ({"http2": True, "user_class": "fast"}, "http2=True is the native and lean users'"),
    ],
)
def test_http2_arguments_are_checked_at_the_call(call: dict[str, Any], said: str) -> None:
    from pytest_webperf.fixture.http import check_streams

    args = {"http2": False, "streams": None, "user_class": "native", **call}
    with pytest.raises(OptionError, match=said.replace("(", r"\(").replace("[", r"\[")):
        check_streams(args["http2"], args["streams"], args["user_class"])
