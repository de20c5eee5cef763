"""HTTP on the native engine (no gevent, no Locust: safe anywhere): whether it is built,
which user a run gets, HTTP/1.1's and HTTP/2's options (``Http1``, ``Http2``: the load
shape, the request mix and its checks) and their figures as the recorder's ``Interval``,
every failure named as the lean user names it.

The engine (``swarm/engine.py``) is a C extension built with the package where a C
compiler and Python's headers are found (Linux: epoll); where it is not, the plugin
falls back to the pure-Python lean user and says so once (``fallback_note``). Built with
libnghttp2's headers it speaks HTTP/2 too (``native/h2.c``, ``h2_unavailable``); HTTP/2
has no silent fallback: the lean user's ``h2`` package costs 20 to 90 times the CPU per
request, which would change what is measured.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pytest_webperf.errors import OptionError
from pytest_webperf.models.http2 import NO_WINDOW, Http2Figures
from pytest_webperf.models.workload import Request, Workload
from pytest_webperf.swarm import grpcwire, http2, wire
from pytest_webperf.swarm.engine import (
    ENGINE,
    K_CLOSED,
    K_CONNECT_TIMEOUT,
    K_GOAWAY,
    K_GRPC,
    K_HTTP,
    K_PROTOCOL,
    K_RST,
    K_TIMEOUT,
    K_UNEXPECTED_BODY,
    K_UNEXPECTED_STATUS,
    Failure,
    NativeEngine,
    histogram_from,
    named_interval,
    transport_failure,
)
from pytest_webperf.swarm.pacing import ArrivalSchedule
from pytest_webperf.swarm.recorder import (
    CLOSED,
    CONNECT,
    EXAMPLE_CHARS,
    PROTOCOL,
    TIMEOUT,
    UNEXPECTED_BODY,
    UNEXPECTED_STATUS,
    Interval,
)

CLOSED_MODE, PACED, COUNTED, ARRIVAL = range(4)  # the load shapes (native/engine.h: MODE_*)
E_H2 = 20  # K_PROTOCOL's key from HTTP/2: the example is the words
C_H2 = 10  # K_CLOSED's key from HTTP/2: likewise
PROTOCOL_MESSAGES: dict[int, Callable[[bytes], str]] = {  # native/http1.c: E_*
    1: wire.bad_status_line,
    2: lambda raw: wire.SWITCHING_PROTOCOLS,
    3: lambda raw: wire.too_long("response head", wire.MAX_HEAD),
    4: lambda raw: wire.bad_content_length(raw.lower()),
    5: wire.bad_chunk_size,
    6: lambda raw: wire.CHUNK_WITHOUT_CRLF,
    7: lambda raw: wire.too_long("chunk-size line", wire.MAX_LINE),
    8: lambda raw: wire.too_long("trailer line", wire.MAX_LINE),
}
USERS = ("auto", "native", "lean", "fast")
MixEntry = tuple[bytes, bool, float, bytes | None, bytes | None]  # payload, HEAD, weight, checks
MAX_STATUS = 1000  # an entry's statuses: a flag for each of 0..999


def unavailable() -> str | None:
    """Why the native loop cannot run here, or None."""
    return ENGINE.unavailable("the native request loop")


def h2_unavailable() -> str | None:
    """Why the native loop cannot speak HTTP/2 here, or None."""
    why = unavailable()
    if why is not None:
        return why
    if not ENGINE.h2:
        return (
            "the native loop is built without HTTP/2 (libnghttp2's headers were not found): "
            "apt-get install libnghttp2-dev, then reinstall pytest-webperf"
        )
    return None


def tls_built() -> bool:
    """Whether the native loop speaks TLS here (built with OpenSSL's headers)."""
    return ENGINE.tls


def user_for_url(user_class: str, url: str) -> str:
    """The user a resolved ``user_class`` becomes for ``url``: https:// with a native loop
    built without TLS is the lean user's (``fallback_note`` said so)."""
    if user_class == "native" and wire.uses_tls(url) and not tls_built():
        return "lean"
    return user_class


def fallback_note(requested: str) -> str | None:
    """The one line a run prints when ``auto`` falls back to the lean user (or, for
    https targets, when the native loop is built without TLS)."""
    why = unavailable()
    if why is None and requested in ("auto", "native") and not tls_built():
        return (
            "webperf: the native request loop is built without TLS (OpenSSL's headers were "
            "not found): https targets get the lean user (pure Python); reinstall with "
            "libssl-dev for native HTTPS"
        )
    if requested != "auto" or why is None:
        return None
    return (
        f"webperf: {why}: the lean user (pure Python) generates the load; "
        "reinstall with a C compiler and Python's headers for the native one"
    )


def resolve_user(requested: str) -> str:
    """The HTTP user a run gets: ``auto`` is the native loop where it is built, else
    lean; ``native`` where it is not built is an error."""
    if requested == "native":
        why = unavailable()
        if why is not None:
            raise OptionError(f"--webperf-user=native: {why}; use lean")
        return "native"
    if requested == "auto":
        return "lean" if unavailable() else "native"
    return requested


def resolve_http2_user(requested: str, url: str) -> str:
    """The user of an HTTP/2 run: the native loop built with HTTP/2 for ``auto`` and
    ``native`` (an ``OptionError`` saying what to install where it is not: no silent
    fallback to a generator 20 to 90 times costlier), else what was asked (``lean``: the
    ``h2`` package; ``fast`` or a user's own class are refused by the workload's check)."""
    if requested not in ("auto", "native"):
        return requested
    why = h2_unavailable()
    if why is not None:
        raise OptionError(
            f"http2=True: {why}; or user='lean' (HTTP/2 in pure Python with the h2 package, "
            "20 to 90 times the generator's CPU per request)"
        )
    if wire.uses_tls(url) and not tls_built():
        raise OptionError(
            f"http2=True: {url} is https:// and the native loop is built without TLS "
            "(OpenSSL's headers were not found): apt-get install libssl-dev, then reinstall "
            "pytest-webperf; or user='lean'"
        )
    return "native"


def failure_name(failure: Failure, timeout_s: float) -> tuple[str, str]:
    """(error kind, example) of one of the C side's failures, as the lean user words it."""
    kind, key, _, a, b, raw = failure
    named = transport_failure(kind, key, raw)
    if named is not None:
        return named
    text = raw.decode("latin-1")
    if kind == K_HTTP:
        return f"http_{key}", text
    if kind in (K_TIMEOUT, K_CONNECT_TIMEOUT):
        return (TIMEOUT if kind == K_TIMEOUT else CONNECT), f"no answer within {timeout_s:g} s"
    if kind == K_CLOSED:
        return CLOSED, text if key == C_H2 else closed_message(key, a, b)
    if kind == K_PROTOCOL:
        return PROTOCOL, text if key == E_H2 else PROTOCOL_MESSAGES[key](raw)
    if kind == K_RST:
        return http2.rst_kind(key), text
    if kind == K_GOAWAY:
        return http2.goaway_kind(key), text
    if kind == K_GRPC:
        said = raw.decode("utf-8", "replace")
        return grpcwire.error_kind(key), said or f"grpc-status {key} without a grpc-message"
    if kind == K_UNEXPECTED_STATUS:
        return UNEXPECTED_STATUS, text
    if kind == K_UNEXPECTED_BODY:  # the status line (``a`` bytes of it), the body's start
        line = raw[:a].decode("latin-1")
        return UNEXPECTED_BODY, wire.unexpected_body(line, raw[a:])[:EXAMPLE_CHARS]
    return "failure", f"failure {kind}/{key}"


def closed_message(code: int, got: int, total: int) -> str:
    if code == 1:
        return wire.closed_in_head(got)
    if code == 2:
        return wire.closed_in_body(got, total)
    return wire.closed_in_chunks(got)


def interval_from(data: dict[str, Any], timeout_s: float) -> Interval:
    """One entry's part of ``Engine.take()`` as an Interval, each failure named as the
    lean user names it."""
    interval = named_interval(failure_name, data, timeout_s, EXAMPLE_CHARS)
    if "service" in data:
        interval.service = histogram_from(data["service"])
        interval.lag = histogram_from(data["lag"])
    if data.get("connect", (0,))[0]:  # a new connection per request: setup times
        interval.connect = histogram_from(data["connect"])
    if data.get("handshake", (0,))[0]:
        interval.handshake = histogram_from(data["handshake"])
    if "headers" in data:  # HTTP/2: per stream
        interval.ttfb = histogram_from(data["headers"])
        if data["stall"][0]:
            interval.stall = histogram_from(data["stall"])
    if "h2" in data:
        interval.http2 = figures_from(data["h2"])
    if "refused" in data:  # the server does not speak HTTP/2: one line, no count
        raise RuntimeError(
            f"webperf.http(http2=True): {data['refused']}; serve HTTP/2 there "
            "(nginx: listen ... http2), or drop http2=True"
        )
    if "users_busy" in data:  # arrival rate: users busy at most, ever opened
        process = f"{socket.gethostname()}:{os.getpid()}"  # as arrival.Arrivals names it
        interval.note_users(process, data["users_busy"], data["users_opened"])
    return interval


def figures_from(data: dict[str, int]) -> Http2Figures:
    """The C side's connection figures (``native/engine.h``: ``struct h2_figures``)."""
    known = {k: int(v) for k, v in data.items() if k != "min_window"}
    window = int(data.get("min_window", NO_WINDOW))
    return Http2Figures(**known, min_window=window if window >= 0 else NO_WINDOW)


def mix_entry(entry: Request, payload: bytes) -> MixEntry:
    """One entry of the mix: its HTTP/1.1 payload, weight and checks (the statuses it
    allows as a flag per status 0..999; a substring body check only: a regex is the lean
    user's)."""
    needle = entry.expect_body if isinstance(entry.expect_body, bytes) else None
    allowed = entry.expect_status
    statuses = None if allowed is None else bytes(s in allowed for s in range(MAX_STATUS))
    return (payload, entry.method == "HEAD", entry.weight, statuses, needle)


@dataclass(frozen=True)
class Http1:
    """HTTP/1.1's options: the mix (at least one entry; picked by weight, or in the order
    of ``sequence``'s entry indices, cycled), the load shape (closed; paced every
    ``interval_s``; ``counted``, ``open``'s tickets; arriving at ``arrivals``' share), a
    new connection per request (``close_each``: the requests say ``Connection: close``)."""

    protocol: ClassVar[str] = "http1"
    mix: Sequence[MixEntry]
    interval_s: float = 0.0
    counted: bool = False
    arrivals: ArrivalSchedule | None = None
    close_each: bool = False
    sequence: Sequence[int] = ()

    def options(self) -> dict[str, Any]:
        mode = COUNTED if self.counted else PACED if self.interval_s else CLOSED_MODE
        shape: dict[str, Any] = {"mode": mode, "period_s": self.interval_s}
        if self.arrivals is not None:  # due times as pacing.ArrivalSchedule's, computed in C
            (numerator, ns), share = self.arrivals.per_ns, self.arrivals
            shape.update(mode=ARRIVAL, arrival_num=numerator, arrival_ns=ns)
            shape.update(processes=share.processes, index=share.index)
        order = bytes(self.sequence) or None
        return {**shape, "mix": list(self.mix), "close_each": self.close_each, "sequence": order}

    @staticmethod
    def name(failure: Failure, timeout_s: float) -> tuple[str, str]:
        return failure_name(failure, timeout_s)

    @staticmethod
    def interval(data: dict[str, Any], timeout_s: float) -> Interval:
        return interval_from(data, timeout_s)


@dataclass(frozen=True)
class Http2(Http1):
    """HTTP/2's options (h2c; h2 by ALPN over TLS): HTTP/1.1's, ``streams`` requests in
    flight per connection, and each entry of the mix as HTTP/2 (``requests``: its header
    list, body or None, whether gRPC's status decides: ``http2.header_list``)."""

    protocol: ClassVar[str] = "h2"
    streams: int = 1
    requests: Sequence[tuple[list[tuple[bytes, bytes]], bytes | None, bool]] = ()
    stream_window_bits: int = 30
    conn_window_bits: int = 30

    @classmethod
    def of(
        cls,
        http1: Http1,
        streams: int,
        requests: Sequence[tuple[list[tuple[bytes, bytes]], bytes | None, bool]],
    ) -> Http2:
        """HTTP/1.1's load shape and mix (its checks and weights), spoken over HTTP/2."""
        shape = {k: getattr(http1, k) for k in ("interval_s", "counted", "arrivals", "sequence")}
        return cls(http1.mix, **shape, streams=streams, requests=requests)

    def options(self) -> dict[str, Any]:
        requests = [  # each entry's header fields as b"name\0value\0..."
            (b"".join(name + b"\0" + value + b"\0" for name, value in fields), body, grpc)
            for fields, body, grpc in self.requests
        ]
        return {
            "streams": self.streams,
            "requests": requests,
            "http": super().options(),
            "stream_window_bits": self.stream_window_bits,
            "conn_window_bits": self.conn_window_bits,
        }


def engine_for(
    workload: Workload,
    url: str,
    *,
    timeout_s: float,
    tls_ca: str | None = None,
    tls_resume: bool = False,
    arrivals: ArrivalSchedule | None = None,
) -> NativeEngine:
    """The engine that sends ``workload`` to ``url``: its entries (a mix, or the one shape
    with its checks), HTTP/2 header lists, a new connection per request when every entry
    says ``Connection: close``, TLS for https://, a counted one's tickets, an ordered
    mix's sequence (``Workload.sequence``: a counted mix)."""
    host, port, host_header = wire.split_host(url)
    entries = workload.entries()
    ordered = workload.ordered and workload.mix  # a counted mix: its fixed sequence
    payloads = [
        wire.encode_request(e.method, e.path, host_header, body=e.body, headers=e.headers)
        for e in entries
    ]
    session = Http1(
        [mix_entry(e, p) for e, p in zip(entries, payloads, strict=True)],
        interval_s=workload.interval_s,
        counted=workload.requests > 0,
        arrivals=arrivals,
        close_each=all(wire.says_close(e.headers) for e in entries),  # keepalive=False
        sequence=workload.sequence(max(1, workload.requests)) if ordered else (),
    )
    if workload.http2:  # each entry as HTTP/2 header fields (the payloads are HTTP/1.1's)
        scheme = "https" if wire.uses_tls(url) else "http"
        requests = [
            (http2.header_list(e, host_header, scheme), http2.request_body(e), e.grpc)
            for e in entries
        ]
        session = Http2.of(session, workload.streams, requests)
    return NativeEngine(  # https: the C side's own OpenSSL client (user_for_url)
        host,
        port,
        session,
        timeout_s=timeout_s,
        tls=wire.uses_tls(url),
        tls_ca=tls_ca,
        tls_resume=tls_resume,
    )


class EntryParts:
    """One ``take`` of the engine shared by its entries' channels: the first channel
    asked at a roll takes every entry's part, the others get theirs."""

    def __init__(self, take: Callable[[], list[Interval]]) -> None:
        self._take = take
        self._pending: list[Interval | None] = []

    def source(self, index: int) -> Callable[[], Interval]:
        def part() -> Interval:
            if index >= len(self._pending) or self._pending[index] is None:
                self._pending = list(self._take())
            interval = self._pending[index]
            self._pending[index] = None
            assert interval is not None
            return interval

        return part


def bucket_index(value_us: int) -> int:
    """The C side's bucket of a value (the same as ``histogram.bucket_index``: tested)."""
    return ENGINE.bucket_index(value_us)
