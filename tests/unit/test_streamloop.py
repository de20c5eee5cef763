"""The native stream loop's Python face: its buckets are the histogram's, its failures
are named as a user reads them (``ws_close_1011`` with its reason), its messages carry
their header; and ``webperf.websocket``/``sse``'s arguments are refused in one line."""

from __future__ import annotations

import errno
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.errors import OptionError
from pytest_webperf.fixture import arguments
from pytest_webperf.fixture.longlived import SSE_ARGUMENTS, WEBSOCKET_ARGUMENTS, _fan_out, _sources
from pytest_webperf.stats.histogram import bucket_index
from pytest_webperf.swarm import streamloop
from pytest_webperf.swarm.engine import (
    K_CONNECT_ERRNO,
    K_SSE_TYPE,
    K_TIMEOUT,
    K_WS_ABNORMAL,
    K_WS_CLOSE,
    K_WS_HANDSHAKE,
)
from pytest_webperf.swarm.streamloop import IDLE, Sse, WebSocket, message_template, request_tail

built = pytest.mark.skipif(streamloop.unavailable() is not None, reason="stream loop not built")
EMPTY = (0, 0, 0, 0, [])


@built
@given(st.integers(min_value=0, max_value=(1 << 49) - 1))
def test_the_c_buckets_are_the_histograms(value: int) -> None:
    assert streamloop.bucket_index(value) == bucket_index(value)


def take(fails: list[tuple[int, int, int, bytes]], ok: int = 0) -> dict[str, Any]:
    rows = [(kind, key, n, 0, 0, raw) for kind, key, n, raw in fails]
    return {"ok": ok, "bytes": 0, "sent": 0, "latency": EMPTY, "lag": EMPTY, "fails": rows}


WS = WebSocket(paths={IDLE: "/"}, tail="")


def test_failures_are_named_with_an_example() -> None:
    interval = WS.interval(
        take(
            [
                (K_WS_CLOSE, 1011, 3, b"internal error"),
                (K_WS_ABNORMAL, 1006, 1, b""),
                (K_WS_HANDSHAKE, 404, 2, b"HTTP/1.1 404 Not Found"),
                (K_CONNECT_ERRNO, errno.ECONNREFUSED, 1, b""),
                (K_CONNECT_ERRNO, errno.EMFILE, 4, b""),
                (K_TIMEOUT, 2, 1, b""),
            ],
            ok=10,
        ),
        timeout_s=5,
    )
    assert interval.error_kinds == {
        "ws_close_1011": 3,
        "ws_close_1006": 1,
        "ws_handshake_404": 2,
        "connect": 1,
        "emfile": 4,
        "timeout": 1,
    }
    assert (interval.requests, interval.errors) == (22, 12)
    examples = interval.error_examples
    assert examples["ws_close_1011"] == (
        "closed by the server, code 1011 (internal error): 'internal error'"
    )
    assert examples["ws_handshake_404"] == "HTTP/1.1 404 Not Found"
    assert examples["timeout"] == "a message unanswered for 5 s"
    assert "Connection refused" in examples["connect"]


def test_sse_failures_are_named_too() -> None:
    sse = Sse(paths={}, tail="")
    interval = sse.interval(take([(K_SSE_TYPE, 0, 1, b"text/html")]), timeout_s=10)
    assert interval.error_examples == {"sse_type": "Content-Type: text/html"}


def test_a_paced_run_keeps_the_lag() -> None:
    data = take([], ok=1)
    data["latency"] = (1, 500, 500, 500, [(500, 1)])
    data["lag"] = (1, 20, 20, 20, [(20, 1)])
    interval = WebSocket(paths={}, tail="", interval_s=0.1).interval(data, timeout_s=10)
    assert interval.lag is not None and interval.lag.count == 1
    assert interval.service is not None and interval.service.count == 1


def test_a_message_carries_its_header_then_the_users_bytes() -> None:
    assert message_template(b"hi", False) == b"0" * 40 + b"hi"
    assert message_template(64, False) == b"0" * 40 + b"." * 24
    assert len(message_template(64, True)) == 64
    assert request_tail("h:1", (("X-A", "b"),)) == "Host: h:1\r\nX-A: b\r\n"


ECHO: dict[str, Any] = {
    "path": "/ws",
    "message": 64,
    "binary": False,
    "interval": None,
    "ping": "5s",
    "concurrency": None,
    "subscribers": 0,
    "publishers": 0,
    "subscribe_path": None,
    "publish_path": None,
    "subscribe": None,
    "expect": None,
    "correlate": "header",
    "headers": None,
    "duration": None,
    "warmup": None,
    "repeat": None,
    "drain": "5s",
    "close_timeout": "10s",
    "name": None,
}


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"path": "ws"}, "webperf.websocket(path='ws'): path is a path on the target"),
        ({"message": 12}, "a whole size >= 40 in bytes, or None"),
        ({"correlate": "id"}, "'header' (the server returns each message's first 40 bytes"),
        ({"headers": {"A B": "c"}}, "'A B' is not a header name"),
        ({"expect": ""}, "the bytes (or text) every answer must contain"),
        ({"subscribers": -1}, "subscribers is a whole number >= 0"),
    ],
)
def test_a_wrong_argument_is_one_line(changes: dict[str, Any], words: str) -> None:
    with pytest.raises(OptionError, match=None) as caught:
        arguments.check("websocket", {**ECHO, **changes}, WEBSOCKET_ARGUMENTS)
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_sse_arguments_are_checked_too() -> None:
    with pytest.raises(OptionError, match=r"webperf.sse\(reconnect_every=-2\)"):
        arguments.check(
            "sse", {"path": "/events", "reconnect_every": -2, "retry": "3s"}, SSE_ARGUMENTS
        )


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"subscribers": 3}, "a fan-out has both, each >= 1"),
        ({"subscribers": 3, "publishers": 1}, "the publishers need a message and an interval"),
        (
            {"subscribers": 3, "publishers": 1, "interval": "1s", "concurrency": 9},
            "a fan-out's connections are its 3 subscribers and 1 publishers",
        ),
        (
            {"subscribers": 3, "publishers": 1, "interval": "1s", "correlate": "order"},
            "a relay must forward it",
        ),
    ],
)
def test_a_fan_out_needs_both_sides_and_a_pace(changes: dict[str, Any], words: str) -> None:
    with pytest.raises(OptionError) as caught:
        _fan_out({**ECHO, **changes})
    assert words in str(caught.value)


def test_a_fan_out_s_users_are_its_two_sides() -> None:
    assert _fan_out({**ECHO, "subscribers": 3, "publishers": 2, "interval": "1s"}) == 5
    assert _fan_out(ECHO) == 0


def test_many_connections_come_from_more_loopback_addresses() -> None:
    assert _sources(20_000) == ()
    assert _sources(60_000) == ("127.0.0.2", "127.0.0.3", "127.0.0.4")
