"""WebSocket and server-sent events on the native engine (no gevent, no Locust: safe
anywhere): whether they are built, the roles of their connections, their options
(``WebSocket``, ``Sse``) and their figures as the recorder's ``Interval`` with every
failure named (``ws_close_1011``, ``ws_handshake_404``, ``sse_type``, ...).

Both are sessions of the native engine (``swarm/engine.py``; ``native/ws.c`` and
``native/sse.c``: each Locust user one long-lived connection), built with the package
where a C compiler and Python's headers are found (Linux). There is no pure-Python
fallback: where it is not built, ``webperf.websocket``/``webperf.sse`` say so
(``unavailable``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pytest_webperf.swarm.engine import (
    ENGINE,
    K_CLOSED,
    K_CONNECT_TIMEOUT,
    K_HTTP,
    K_PROTOCOL,
    K_SSE_TYPE,
    K_TIMEOUT,
    K_UNEXPECTED_BODY,
    K_UNMATCHED,
    K_WS_ABNORMAL,
    K_WS_CLOSE,
    K_WS_CLOSE_TIMEOUT,
    K_WS_HANDSHAKE,
    Failure,
    histogram_from,
    named_interval,
    transport_failure,
)
from pytest_webperf.swarm.recorder import (
    CLOSED,
    CONNECT,
    EXAMPLE_CHARS,
    TIMEOUT,
    UNEXPECTED_BODY,
    Interval,
)

WEBSOCKET, SSE = "websocket", "sse"  # the kinds of load, and the swarm's user classes
# what a connection does (native/engine.h: R_*)
ECHO, SUBSCRIBER, PUBLISHER, IDLE, STREAM = range(5)
ROLES = ("echo", "subscriber", "publisher", "idle", "stream")
HEADER_BYTES = 40  # a message's correlation header: id, sequence, send time (hex)
WAITED_FOR = {  # a timeout's words, by what was waited for (native/ws.c: WAIT_*)
    1: "no answer to the opening request within {} s",
    2: "a message unanswered for {} s",
    3: "a ping unanswered for {} s",
}
HANDSHAKE = {  # native/engine.h: HS_*
    1: "not an HTTP/1.x status line",
    2: "a 101 without Upgrade: websocket and Connection: Upgrade",
    3: "a 101 with the wrong Sec-WebSocket-Accept",
    4: "an upgrade answer whose head is longer than 16 KiB",
}
PROTOCOL = {  # native/ws.c and sse.c: E_*
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
    return ENGINE.unavailable("the native stream loop (WebSocket, SSE)")


def tls_built() -> bool:
    """Whether the native stream loop speaks TLS here (built with OpenSSL's headers)."""
    return ENGINE.tls


def close_kind(code: int) -> str:
    """The error kind of a close with ``code`` (``ws_close_1011``; 1006: no close frame)."""
    return f"ws_close_{code}"


def websocket_failure(kind: int, key: int, raw: bytes, close_s: float) -> tuple[str, str] | None:
    """(error kind, example) of a WebSocket failure (its handshake, its closes), whatever
    speaks over it (MQTT too); None: not one."""
    text = raw.decode("utf-8", "replace")
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
    return None


def failure(row: Failure, *, websocket: bool, timeout_s: float, close_s: float) -> tuple[str, str]:
    """(error kind, example) of one of the C side's failures."""
    kind, key, _, _, _, raw = row
    named = transport_failure(kind, key, raw) or websocket_failure(kind, key, raw, close_s)
    if named is not None:
        return named
    text = raw.decode("utf-8", "replace")
    if kind == K_CONNECT_TIMEOUT:
        return CONNECT, f"no connection within {timeout_s:g} s"
    if kind == K_TIMEOUT:
        return TIMEOUT, WAITED_FOR.get(key, "no answer within {} s").format(f"{timeout_s:g}")
    if kind == K_HTTP:
        return f"http_{key}", raw.decode("latin-1")
    if kind == K_CLOSED:
        return CLOSED, "the server closed the connection before its answer's head was complete"
    if kind == K_PROTOCOL:
        words = PROTOCOL.get(key, f"protocol error {key}")
        return ("ws_protocol" if websocket else "protocol"), f"{words}: {raw[:24]!r}"
    if kind == K_SSE_TYPE:
        return "sse_type", f"Content-Type: {text}" if text else "no Content-Type"
    if kind == K_UNEXPECTED_BODY:
        return UNEXPECTED_BODY, f"an answer without the expected bytes, starting {raw!r}"
    if kind == K_UNMATCHED and key == 1:
        return "ws_unmatched", f"an answer with no message in flight: {raw!r}"
    if kind == K_UNMATCHED:
        return "ws_unmatched", f"a message without this run's correlation header: {raw!r}"
    return "failure", f"failure {kind}/{key}"


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


@dataclass(frozen=True)
class Stream:
    """What both kinds of stream take: the opening request's path by role and its headers
    after ours (Host, the user's: ``request_tail``), the connect gate (at most
    ``max_connecting`` connects in flight), the close handshake's timeout."""

    paths: Mapping[int, str]
    tail: str
    max_connecting: int = 256
    close_timeout_s: float = 10.0
    websocket: ClassVar[bool] = True

    @property
    def paced(self) -> bool:
        return False

    def name(self, row: Failure, timeout_s: float) -> tuple[str, str]:
        return failure(
            row, websocket=self.websocket, timeout_s=timeout_s, close_s=self.close_timeout_s
        )

    def interval(self, data: dict[str, Any], timeout_s: float) -> Interval:
        """Messages answered (events received) and failures, each named; paced: the lag
        of every send, the latency as its service."""
        interval = named_interval(self.name, data, timeout_s, EXAMPLE_CHARS)
        if self.paced:
            interval.service = histogram_from(data["latency"])
            interval.lag = histogram_from(data["lag"])
        return interval


@dataclass(frozen=True)
class WebSocket(Stream):
    """WebSocket's options: each connection echoes ``message`` (closed loop, or paced
    every ``interval_s``), publishes or subscribes through a relay, or idles (a ping
    every ``ping_s``); every answer must hold ``expect``; ``order``: an answer is the
    oldest message in flight (servers that answer with their own bytes)."""

    protocol: ClassVar[str] = "ws"
    message: bytes | None = None
    binary: bool = False
    interval_s: float = 0.0
    ping_s: float = 0.0
    expect: bytes | None = None
    subscribe: bytes | None = None
    order: bool = False

    @property
    def paced(self) -> bool:
        return self.interval_s > 0

    def options(self) -> dict[str, Any]:
        return {
            "paths": tuple(
                self.paths.get(role, "/") for role in (ECHO, SUBSCRIBER, PUBLISHER, IDLE)
            ),
            "tail": self.tail,
            "message": self.message,
            "binary": self.binary,
            "interval_s": self.interval_s,
            "ping_s": self.ping_s,
            "close_timeout_s": self.close_timeout_s,
            "expect": self.expect,
            "subscribe": self.subscribe,
            "order": self.order,
            "max_connecting": self.max_connecting,
        }


@dataclass(frozen=True)
class Sse(Stream):
    """Server-sent events' options: a stream the server ended comes back after
    ``retry_s`` (unless it said otherwise); ``reconnect_every``: the client leaves every
    N events and comes back with Last-Event-ID."""

    protocol: ClassVar[str] = "sse"
    websocket: ClassVar[bool] = False
    retry_s: float = 3.0
    reconnect_every: int = 0

    def options(self) -> dict[str, Any]:
        return {
            "path": self.paths.get(STREAM, "/"),
            "tail": self.tail,
            "retry_s": self.retry_s,
            "reconnect_every": self.reconnect_every,
            "max_connecting": self.max_connecting,
        }


def bucket_index(value_us: int) -> int:
    """The C side's bucket of a value (the same as ``histogram.bucket_index``: tested)."""
    return ENGINE.bucket_index(value_us)
