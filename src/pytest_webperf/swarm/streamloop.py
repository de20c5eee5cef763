"""The native stream loop's Python face (WebSocket and server-sent events): whether it is
built, the roles of its connections, its figures as the recorder's ``Interval`` with
every failure named (``ws_close_1011``, ``ws_handshake_404``, ``sse_type``, ...), and the
ledger of a whole run (no gevent, no Locust: safe anywhere).

``_streamloop`` is a C extension (``_streamloop.c`` with ``_stream_ws.c`` and
``_stream_sse.c``: one epoll thread per generator process, each Locust user one
long-lived connection) built with the package where a C compiler and Python's headers
are found (Linux). There is no pure-Python fallback: where it is not built,
``webperf.websocket``/``webperf.sse`` say so (``unavailable``).
"""

from __future__ import annotations

import errno
import os
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_webperf.stats.histogram import Histogram
from pytest_webperf.swarm.recorder import (
    CLOSED,
    CONNECT,
    EXAMPLE_CHARS,
    TIMEOUT,
    TLS,
    UNEXPECTED_BODY,
    Interval,
    classify,
)

try:
    from pytest_webperf.swarm import _streamloop  # type: ignore[attr-defined]
except ImportError as exc:  # not built here (no compiler, not Linux)
    _streamloop = None
    _WHY = str(exc)
else:
    _WHY = ""

WEBSOCKET, SSE = "websocket", "sse"  # the kinds of load, and the swarm's user classes
KINDS = {WEBSOCKET: 0, SSE: 1}
# what a connection does (_streamloop.h: R_*)
ECHO, SUBSCRIBER, PUBLISHER, IDLE, STREAM = range(5)
ROLES = ("echo", "subscriber", "publisher", "idle", "stream")
HEADER_BYTES = 40  # a message's correlation header: id, sequence, send time (hex)

# the C side's failures (_streamloop.h: K_*, T_*, HS_*, E_*)
K_CONNECT_ERRNO, K_IO_ERRNO, K_CONNECT_TIMEOUT, K_TIMEOUT, K_TLS, K_HTTP, K_CLOSED = range(1, 8)
K_PROTOCOL, K_WS_HANDSHAKE, K_WS_CLOSE, K_WS_ABNORMAL, K_WS_CLOSE_TIMEOUT = range(8, 13)
K_SSE_TYPE, K_UNEXPECTED_BODY, K_UNMATCHED = range(13, 16)
WAITED_FOR = {  # a timeout's words, by what was waited for (T_*)
    1: "no answer to the opening request within {} s",
    2: "a message unanswered for {} s",
    3: "a ping unanswered for {} s",
}
HANDSHAKE = {
    1: "not an HTTP/1.x status line",
    2: "a 101 without Upgrade: websocket and Connection: Upgrade",
    3: "a 101 with the wrong Sec-WebSocket-Accept",
    4: "an upgrade answer whose head is longer than 16 KiB",
}
PROTOCOL = {
    1: "a masked frame from the server",
    2: "a frame with RSV bits set (no extension was offered)",
    3: "a frame with an unknown opcode",
    4: "a control frame longer than 125 bytes",
    5: "a fragmented control frame",
    6: "a continuation frame with no message begun",
    7: "a new data frame inside a fragmented message",
    8: "a frame length with its top bit set",
    9: "a close frame of one byte",
    10: "an answer whose head is longer than 16 KiB",
    11: "not an HTTP/1.x status line",
    12: "a malformed chunked body",
}
CLOSE_CODES = {  # RFC 6455 7.4.1, and IANA's registry
    1001: "going away",
    1002: "protocol error",
    1003: "unsupported data",
    1006: "abnormal closure: no close frame",
    1007: "invalid frame payload data",
    1008: "policy violation",
    1009: "message too big",
    1010: "mandatory extension",
    1011: "internal error",
    1012: "service restart",
    1013: "try again later",
    1014: "bad gateway",
    1015: "TLS handshake failure",
}


def unavailable() -> str | None:
    """Why the native stream loop cannot run here, or None."""
    if _streamloop is None:
        return f"the native stream loop (WebSocket, SSE) is not built here ({_WHY})"
    return None


def tls_built() -> bool:
    """Whether the native stream loop speaks TLS here (built with OpenSSL's headers)."""
    return _streamloop is not None and bool(getattr(_streamloop, "TLS", 0))


def close_kind(code: int) -> str:
    """The error kind of a close with ``code`` (``ws_close_1011``; 1006: no close frame)."""
    return f"ws_close_{code}"


def failure(
    kind: int, key: int, raw: bytes, *, websocket: bool, timeout_s: float, close_s: float
) -> tuple[str, str]:
    """(error kind, example) of one of the C side's failures."""
    if kind <= K_CLOSED:
        return _transport_failure(kind, key, raw, timeout_s)
    text = raw.decode("utf-8", "replace")
    if kind == K_PROTOCOL:
        words = PROTOCOL.get(key, f"protocol error {key}")
        return ("ws_protocol" if websocket else "protocol"), f"{words}: {raw[:24]!r}"
    if kind == K_WS_HANDSHAKE:
        if key >= 100:  # the status the upgrade was answered with
            return f"ws_handshake_{key}", text
        return "ws_handshake", f"{HANDSHAKE.get(key, 'a refused upgrade')}: {text[:60]!r}"
    if kind == K_WS_CLOSE:
        reason = f": {text!r}" if text else ""
        code = f"code {key} ({CLOSE_CODES.get(key, 'unregistered')})"
        return close_kind(key), f"closed by the server, {code}{reason}"
    if kind == K_WS_ABNORMAL:
        return close_kind(1006), "the connection ended without a close frame (1006, abnormal)"
    if kind == K_WS_CLOSE_TIMEOUT:
        return "ws_close_timeout", f"our close (1000) had no answer within {close_s:g} s"
    if kind == K_SSE_TYPE:
        return "sse_type", f"Content-Type: {text}" if text else "no Content-Type"
    if kind == K_UNEXPECTED_BODY:
        return UNEXPECTED_BODY, f"an answer without the expected bytes, starting {raw!r}"
    if kind == K_UNMATCHED and key == 1:
        return "ws_unmatched", f"an answer with no message in flight: {raw!r}"
    if kind == K_UNMATCHED:
        return "ws_unmatched", f"a message without this run's correlation header: {raw!r}"
    return "failure", f"failure {kind}/{key}"


def _transport_failure(kind: int, key: int, raw: bytes, timeout_s: float) -> tuple[str, str]:
    """A connection's failure, protocol aside: named as the HTTP users name them."""
    if kind in (K_CONNECT_ERRNO, K_IO_ERRNO):
        error = OSError(key, os.strerror(key))
        if kind == K_CONNECT_ERRNO:
            return ("emfile" if key == errno.EMFILE else CONNECT), str(error)
        return classify(error), str(error)
    if kind == K_CONNECT_TIMEOUT:
        return CONNECT, f"no connection within {timeout_s:g} s"
    if kind == K_TIMEOUT:
        return TIMEOUT, WAITED_FOR.get(key, "no answer within {} s").format(f"{timeout_s:g}")
    if kind == K_TLS:
        return TLS, raw.decode("utf-8", "replace") or "TLS failed"
    if kind == K_HTTP:
        return f"http_{key}", raw.decode("latin-1")
    return CLOSED, "the server closed the connection before its answer's head was complete"


def histogram_from(data: tuple[int, int, int, int, list[tuple[int, int]]]) -> Histogram:
    count, total, minimum, maximum, pairs = data
    histogram = Histogram()
    histogram.counts = dict(pairs)
    histogram.count, histogram.total = count, total
    histogram.minimum, histogram.maximum = minimum, maximum
    return histogram


def interval_from(
    data: Mapping[str, Any],
    *,
    websocket: bool = True,
    paced: bool = False,
    timeout_s: float = 10.0,
    close_s: float = 10.0,
) -> Interval:
    """One ``Engine.take()`` as an Interval: messages answered (events received) and
    failures, each named; paced: the lag of every send, the latency as its service."""
    kinds: dict[str, int] = {}
    examples: dict[str, str] = {}
    for kind, key, n, raw in data["fails"]:
        name, example = failure(
            kind, key, raw, websocket=websocket, timeout_s=timeout_s, close_s=close_s
        )
        kinds[name] = kinds.get(name, 0) + n
        examples.setdefault(name, example[:EXAMPLE_CHARS])
    errors = sum(kinds.values())
    interval = Interval(
        requests=data["ok"] + errors,
        errors=errors,
        bytes=data["bytes"],
        histogram=histogram_from(data["latency"]),
        error_kinds=kinds,
        error_examples=examples,
    )
    if paced:
        interval.service = histogram_from(data["latency"])
        interval.lag = histogram_from(data["lag"])
    return interval


def request_tail(host_header: str, headers: Sequence[tuple[str, str]] = ()) -> str:
    """The opening request's headers after the protocol's own: Host, then the user's."""
    lines = [f"Host: {host_header}", *(f"{name}: {value}" for name, value in headers)]
    return "".join(f"{line}\r\n" for line in lines)


def message_template(message: bytes | int, binary: bool) -> bytes:
    """What every message carries: its 40-byte header (rewritten per message) and the
    user's bytes, or that many bytes in all (``message`` an int)."""
    if isinstance(message, int):
        pad = b"\xa5" if binary else b"."
        return b"0" * HEADER_BYTES + pad * max(0, message - HEADER_BYTES)
    return b"0" * HEADER_BYTES + message


class StreamLoop:
    """One generator process's native stream loop: connections added by Locust's users,
    every frame, event, ping and close handled by the C thread."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        kind: str,
        paths: Mapping[int, str],
        host_header: str,
        headers: Sequence[tuple[str, str]] = (),
        message: bytes | None = None,
        binary: bool = False,
        interval_s: float = 0.0,
        ping_s: float = 0.0,
        timeout_s: float = 10.0,
        close_timeout_s: float = 10.0,
        retry_s: float = 3.0,
        reconnect_every: int = 0,
        expect: bytes | None = None,
        subscribe: bytes | None = None,
        order: bool = False,
        max_connecting: int = 256,
        tls: bool = False,
        tls_ca: str | None = None,
        sources: Sequence[str] = (),
    ) -> None:
        if _streamloop is None:
            raise RuntimeError(unavailable())
        family, _, _, _, address = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)[0]
        self.websocket = kind == WEBSOCKET
        self.paced = interval_s > 0
        self.timeout_s, self.close_timeout_s = timeout_s, close_timeout_s
        self.engine = _streamloop.Engine(
            int(family),
            address[0],
            port,
            KINDS[kind],
            timeout_s,
            request_tail(host_header, headers),
            tuple(paths.get(role, "/") for role in range(len(ROLES))),
            message=message,
            binary=binary,
            interval_s=interval_s,
            ping_s=ping_s,
            close_timeout_s=close_timeout_s,
            retry_s=retry_s,
            reconnect_every=reconnect_every,
            expect=expect,
            subscribe=subscribe,
            order=order,
            max_connecting=max_connecting,
        )
        if sources:
            self.engine.bind_sources(list(sources))
        if tls:  # wss:// or https://: the loop's own OpenSSL client (unverified without a CA)
            self.engine.use_tls(host, tls_ca)
        self.sent = self.received = 0
        # at each take: (monotonic time, messages sent, answered) so far, so that what was
        # sent within the measured phase can be told from the rest (``streams.accounting``)
        self.rolls: list[tuple[float, int, int]] = []

    def add(self, role: int, ident: int = 0) -> int:
        """A new connection in ``role``; its messages carry ``ident`` (a publisher's id)."""
        return int(self.engine.add(role, ident))

    def remove(self, handle: int) -> None:
        self.engine.remove(handle)

    def go(self) -> None:
        """The publishers start (every subscriber of the run is open)."""
        self.engine.go()

    def stop_sending(self) -> None:
        self.engine.stop_sending()

    def state(self) -> dict[str, int]:
        return dict(self.engine.state())

    def take(self) -> Interval:
        data = self.engine.take()
        self.sent += int(data["sent"])
        self.received += int(data["ok"])
        self.rolls.append((time.monotonic(), self.sent, self.received))
        return interval_from(
            data,
            websocket=self.websocket,
            paced=self.paced,
            timeout_s=self.timeout_s,
            close_s=self.close_timeout_s,
        )

    def finish(self) -> dict[str, Any]:
        """Close every connection (WebSocket: 1000, answered within the close timeout),
        stop the thread: the whole run's ledger (``_streamloop.c``'s ``finish``)."""
        return dict(self.engine.finish())


def bucket_index(value_us: int) -> int:
    """The C side's bucket of a value (the same as ``histogram.bucket_index``: tested)."""
    if _streamloop is None:
        raise RuntimeError(unavailable())
    return int(_streamloop.bucket_index(value_us))
