"""The native loop's Python face: its buckets are the histogram's, its figures become the
recorder's intervals with the lean user's names, and ``auto`` picks the user a run gets."""

from __future__ import annotations

import errno
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.errors import OptionError
from pytest_webperf.stats.histogram import bucket_index
from pytest_webperf.swarm import engine, hotloop, wire
from pytest_webperf.swarm.engine import (
    K_CLOSED,
    K_CONNECT_ERRNO,
    K_CONNECT_TIMEOUT,
    K_HTTP,
    K_IO_ERRNO,
    K_PROTOCOL,
    K_TIMEOUT,
    K_TLS,
)
from pytest_webperf.swarm.hotloop import fallback_note, interval_from, resolve_user

built = pytest.mark.skipif(hotloop.unavailable() is not None, reason="native loop not built")


@built
@given(st.integers(min_value=0, max_value=(1 << 49) - 1))
def test_the_c_buckets_are_the_histograms(value: int) -> None:
    assert hotloop.bucket_index(value) == bucket_index(value)


def histogram(*values: int) -> tuple[int, int, int, int, list[tuple[int, int]]]:
    pairs: dict[int, int] = {}
    for v in values:
        pairs[bucket_index(v)] = pairs.get(bucket_index(v), 0) + 1
    return (
        len(values),
        sum(values),
        min(values, default=0),
        max(values, default=0),
        [*pairs.items()],
    )


def take(**changes: Any) -> dict[str, Any]:
    """One entry's part of ``Engine.take()``: ``fails`` rows (kind, key, n, a, b, raw)."""
    data: dict[str, Any] = {"ok": 0, "bytes": 0, "fails": [], "latency": histogram()}
    return {**data, **changes}


@built
def test_the_c_side_has_the_kinds_the_face_names() -> None:
    assert engine.ENGINE.module is not None and engine.ENGINE.module.KINDS == engine.KINDS


def test_successes_and_http_errors_share_the_latency_histogram() -> None:
    interval = interval_from(
        take(
            ok=3,
            bytes=40,
            latency=histogram(100, 200, 300, 900),
            fails=[(K_HTTP, 503, 1, 0, 0, b"HTTP/1.1 503 Busy")],
        ),
        timeout_s=10,
    )
    assert (interval.requests, interval.errors, interval.bytes) == (4, 1, 40)
    assert interval.error_kinds == {"http_503": 1}
    assert interval.error_examples == {"http_503": "HTTP/1.1 503 Busy"}
    assert interval.histogram.count == 4
    assert interval.histogram.maximum == 900
    assert interval.histogram.percentile(50) == pytest.approx(200, abs=1)
    assert interval.service is None


def test_failures_are_named_and_worded_as_the_lean_user_does() -> None:
    interval = interval_from(
        take(
            fails=[
                (K_TIMEOUT, 0, 2, 0, 0, b""),
                (K_CONNECT_TIMEOUT, 0, 1, 0, 0, b""),
                (K_CLOSED, 2, 1, 10, 100, b""),
                (K_PROTOCOL, 5, 1, 0, 0, b"zz"),
                (K_CONNECT_ERRNO, errno.ECONNREFUSED, 4, 0, 0, b""),
                (K_CONNECT_ERRNO, errno.EMFILE, 1, 0, 0, b""),
                (K_IO_ERRNO, errno.ECONNRESET, 3, 0, 0, b""),
                (K_IO_ERRNO, errno.EPIPE, 1, 0, 0, b""),
            ],
        ),
        timeout_s=1.5,
    )
    assert interval.error_kinds == {
        "timeout": 2,
        "connect": 5,
        "closed": 1,
        "protocol": 1,
        "emfile": 1,
        "reset": 4,
    }
    assert interval.requests == interval.errors == 14
    assert interval.error_examples["timeout"] == "no answer within 1.5 s"
    assert interval.error_examples["closed"] == wire.closed_in_body(10, 100)
    assert interval.error_examples["protocol"] == wire.bad_chunk_size(b"zz")
    assert interval.error_examples["reset"].startswith(f"[Errno {errno.ECONNRESET}]")


def test_paced_figures_carry_service_and_lag() -> None:
    interval = interval_from(
        take(ok=1, latency=histogram(900), service=histogram(100), lag=histogram(800)),
        timeout_s=10,
    )
    assert interval.service is not None and interval.lag is not None
    assert (interval.service.maximum, interval.lag.maximum) == (100, 800)


@pytest.mark.parametrize("code", sorted(hotloop.PROTOCOL_MESSAGES))
def test_every_protocol_code_has_words(code: int) -> None:
    assert hotloop.PROTOCOL_MESSAGES[code](b"x")


def test_auto_is_native_where_built_else_lean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hotloop, "unavailable", lambda: None)
    monkeypatch.setattr(hotloop, "tls_built", lambda: True)
    assert resolve_user("auto") == "native"
    assert resolve_user("lean") == "lean"
    assert fallback_note("auto") is None
    monkeypatch.setattr(hotloop, "unavailable", lambda: "not built (no compiler)")
    assert resolve_user("auto") == "lean"
    note = fallback_note("auto")
    assert note is not None and "not built (no compiler)" in note and "lean" in note
    assert fallback_note("lean") is None  # asked for by name: nothing to say
    with pytest.raises(OptionError, match=r"native.*not built"):
        resolve_user("native")


def test_tls_failures_are_kind_tls_with_the_ssl_words() -> None:
    words = b"certificate verify failed: unable to get local issuer certificate"
    interval = interval_from(take(ok=1, fails=[(K_TLS, 0, 3, 0, 0, words)]), timeout_s=10)
    assert interval.error_kinds == {"tls": 3}
    assert interval.error_examples == {"tls": words.decode()}
    assert interval.requests == 4


def test_https_without_tls_in_the_native_loop_is_the_lean_users(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hotloop, "unavailable", lambda: None)
    monkeypatch.setattr(hotloop, "tls_built", lambda: False)
    assert hotloop.user_for_url("native", "https://127.0.0.1:8443") == "lean"
    assert hotloop.user_for_url("native", "http://127.0.0.1:8080") == "native"
    assert hotloop.user_for_url("fast", "https://127.0.0.1:8443") == "fast"
    note = fallback_note("auto")
    assert note is not None and "without TLS" in note and "lean" in note
    assert fallback_note("lean") is None
    monkeypatch.setattr(hotloop, "tls_built", lambda: True)
    assert hotloop.user_for_url("native", "https://127.0.0.1:8443") == "native"
    assert fallback_note("auto") is None


@built
def test_use_tls_comes_before_the_first_connection() -> None:
    session = hotloop.Http1([(b"GET / HTTP/1.1\r\n\r\n", False, 1.0, None, None)])
    loop = engine.NativeEngine("127.0.0.1", 9, session, timeout_s=1.0)
    try:
        if not hotloop.tls_built():
            with pytest.raises(RuntimeError, match="without TLS"):
                loop.use_tls("127.0.0.1")
            return
        with pytest.raises(ValueError, match="cannot load the CA file"):
            loop.use_tls("127.0.0.1", "/nonexistent/ca.pem")
        loop.use_tls("localhost")
        with pytest.raises(RuntimeError, match="once, before the first add"):
            loop.use_tls("localhost")
    finally:
        loop.close()


def test_setup_times_of_a_new_connection_per_request_join_the_interval() -> None:
    interval = interval_from(
        take(
            ok=2,
            latency=histogram(900, 1000),
            connect=histogram(100, 120),
            handshake=histogram(500, 600),
        ),
        timeout_s=10,
    )
    assert interval.connect is not None and interval.connect.count == 2
    assert interval.handshake is not None and interval.handshake.maximum == 600
    plain = interval_from(take(ok=1, latency=histogram(5), connect=histogram(3)), timeout_s=10)
    assert plain.connect is not None and plain.handshake is None
    none = interval_from(take(ok=1, latency=histogram(5), connect=histogram()), timeout_s=10)
    assert none.connect is None  # nothing connected in this interval


@built
def test_a_sequence_names_entries_of_the_mix() -> None:
    """A mix sent in a given order (a counted mix): each index one of the mix's entries."""
    entry = (b"GET / HTTP/1.1\r\n\r\n", False, 1.0, None, None)
    with pytest.raises(ValueError, match="a sequence names entries of the mix"):
        engine.NativeEngine("127.0.0.1", 9, hotloop.Http1([entry, entry], sequence=[0, 2]))
    ordered = engine.NativeEngine("127.0.0.1", 9, hotloop.Http1([entry, entry], sequence=[1, 0]))
    ordered.close()
