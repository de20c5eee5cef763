"""The lean user's connection: one HTTP/1.1 keep-alive connection on a raw non-blocking
socket (TLS over memory BIOs on the same socket), driven by the gevent hub; its requests
encoded once and what a request returns (swarm processes only)."""

from __future__ import annotations

import _socket
import contextlib
import errno
import os
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from gevent import get_hub, getcurrent

from pytest_webperf.models.workload import Request
from pytest_webperf.swarm.recorder import (
    CLOSED,
    CONNECT,
    PROTOCOL,
    TIMEOUT,
    TLS,
    Channel,
    classify,
)
from pytest_webperf.swarm.wire import (
    ProtocolError,
    ResponseParser,
    client_context,
)

RECV_SIZE = 64 * 1024


_CLOSE = b"\r\nconnection: close"  # in a request's head: keepalive=False


_TIMED_OUT = object()  # what the timer switches into a waiting greenlet


class RequestFailed(Exception):
    """A request that got no usable response; ``kind`` is the Recorder's error kind,
    ``example`` what came instead (for the report: one example per kind and interval)."""

    def __init__(self, kind: str, example: str | None = None) -> None:
        super().__init__(kind)
        self.kind = kind
        self.example = example


class _Timeout(Exception):
    pass


@lru_cache(maxsize=8)
def tls_context(ca_file: str | None, alpn: tuple[str, ...] = ("http/1.1",)) -> ssl.SSLContext:
    """The process's TLS client context (``wire.client_context``; ``alpn``: h2 for the
    HTTP/2 user), one per CA file and protocol, shared by every user."""
    return client_context(ca_file, alpn)


@lru_cache(maxsize=64)
def resolve(host: str, port: int) -> tuple[int, tuple[Any, ...]]:
    """(address family, socket address), once per process and target."""
    family, _, _, _, address = _socket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM)[0]
    return family, address


class Connection:
    """One HTTP/1.1 connection, used by one greenlet at a time, reconnected on demand
    (with ``tls``, a TLS client over memory BIOs on the same raw socket).

    Every wait parks the greenlet on the hub with an io watcher started for just
    that wait; the connection's timer, re-armed at each request, switches a
    ``_TIMED_OUT`` into the parked greenlet when the request outlives its timeout.
    """

    def __init__(
        self,
        host: str,
        port: int,
        timeout_s: float,
        tls: ssl.SSLContext | None = None,
        resume: bool = False,
    ) -> None:
        self.family, self.address = resolve(host, port)
        self.close_each = False  # the request says Connection: close: never reused
        self._payload = b""
        # keepalive=False: told each connection's connect and TLS handshake times (us)
        self.on_setup: Callable[[int, int | None], None] | None = None
        self.host = host  # SNI, and the name a verified certificate must carry
        self.context = tls  # https: each connection's TLS runs over memory BIOs
        self.tls: ssl.SSLObject | None = None
        self.resume = resume  # a new connection resumes the last one's session
        self.session: ssl.SSLSession | None = None
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.hub = get_hub()
        self.timeout_s = timeout_s
        self.timer = self.hub.loop.timer(timeout_s, timeout_s)
        self._on_timer_callback = self._on_timer
        self.sock: _socket.socket | None = None
        self.reader: Any = None
        self.writer: Any = None
        self.parser = ResponseParser()
        self.rest = b""  # bytes that followed the last response (none from a sane server)
        self.connecting = False
        self._waiting: Any = None  # the greenlet parked in _wait

    def exchange(
        self,
        payload: bytes,
        *,
        head_only: bool = False,
        keep_body: bool = False,
        keep_head: bool = False,
    ) -> ResponseParser:
        """Send one request, read its response; raises RequestFailed (connection closed).

        A keep-alive connection the server closed or reset before answering is an
        error, not retried: a load generator counts what the server did."""
        self.timer.again(self._on_timer_callback)  # the request's deadline
        try:
            return self._attempt(payload, head_only, keep_body, keep_head)
        except RequestFailed:
            self.close()
            raise
        except _Timeout:
            kind = CONNECT if self.connecting else TIMEOUT
            self.close()
            raise RequestFailed(kind, f"no answer within {self.timeout_s:g} s") from None
        except ProtocolError as exc:
            self.close()
            raise RequestFailed(PROTOCOL, str(exc)) from None
        except ssl.SSLError as exc:  # the handshake failed, the certificate was refused
            self.close()
            raise RequestFailed(TLS, str(exc)) from None
        except OSError as exc:
            kind = CONNECT if self.connecting and exc.errno != errno.EMFILE else classify(exc)
            self.close()
            raise RequestFailed(kind, str(exc)) from None

    def close(self) -> None:
        for watcher in (self.reader, self.writer):
            if watcher is not None:
                watcher.stop()
                watcher.close()
        self.reader = self.writer = None
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.tls is not None and self.resume and not self.connecting:
            self.session = self.tls.session  # its latest ticket, for the next connection
        self.tls = None
        self.rest = b""
        self.connecting = False

    def shutdown(self) -> None:
        self.close()
        self.timer.stop()
        self.timer.close()

    def _attempt(
        self, payload: bytes, head_only: bool, keep_body: bool, keep_head: bool = False
    ) -> ResponseParser:
        if payload is not self._payload:  # a request says Connection: close: not reused
            self._payload, self.close_each = (
                payload,
                _CLOSE in payload.split(b"\r\n\r\n")[0].lower(),
            )
        sock = self.sock if self.sock is not None else self._connect()
        parser = self.parser
        parser.begin(head_only=head_only, keep_body=keep_body, keep_head=keep_head)
        tls = self.tls
        if tls is None:
            self._send(sock, payload)
            read = self._read
        else:  # records in and out through the memory BIOs
            tls.write(payload)
            self._send(sock, self.outgoing.read())
            read = self._tls_read
        done = False
        if self.rest:
            done = parser.feed(self.rest)
            self.rest = b""
        while not done:
            data = read(sock, tls)
            if not data:
                if parser.eof():
                    break
                raise RequestFailed(CLOSED, parser.closed_early())
            done = parser.feed(data)
        if parser.keep_alive and not self.close_each:
            self.rest = parser.rest
        else:
            self.close()
        return parser

    def _read(self, sock: _socket.socket, tls: ssl.SSLObject | None) -> bytes:
        """Bytes that arrived (b"" at the end of the stream), waiting as needed (the
        plain read of ``_attempt``; ``_tls_read`` is the other)."""
        while True:
            self._wait(self.reader)
            try:
                return sock.recv(RECV_SIZE)
            except BlockingIOError:
                continue

    def _tls_read(self, sock: _socket.socket, tls: ssl.SSLObject | None) -> bytes:
        """Plaintext that arrived (b"" at the end of the stream), waiting for records as
        needed: one recv per readiness, every record it brought decrypted."""
        assert tls is not None
        incoming = self.incoming
        while True:
            if incoming.pending or tls.pending():
                try:
                    return tls.read(RECV_SIZE)
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLZeroReturnError:  # close_notify
                    return b""
                finally:
                    if self.outgoing.pending:  # a key update answered, a ticket acknowledged
                        self._send(sock, self.outgoing.read())
            self._wait(self.reader)
            try:
                raw = sock.recv(RECV_SIZE)
            except BlockingIOError:
                continue
            if not raw:
                return b""
            incoming.write(raw)

    def _handshake(self, sock: _socket.socket, context: ssl.SSLContext) -> ssl.SSLObject:
        """The TLS handshake (SNI: the target's host), driven by the io watchers."""
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = context.wrap_bio(
            self.incoming, self.outgoing, server_hostname=self.host, session=self.session
        )
        while True:
            try:
                tls.do_handshake()
            except ssl.SSLWantReadError:
                pass
            else:
                break
            if self.outgoing.pending:
                self._send(sock, self.outgoing.read())
            self._wait(self.reader)
            try:
                raw = sock.recv(RECV_SIZE)
            except BlockingIOError:
                continue
            if not raw:
                raise ssl.SSLEOFError(ssl.SSL_ERROR_EOF, "the server closed during the handshake")
            self.incoming.write(raw)
        if self.outgoing.pending:
            self._send(sock, self.outgoing.read())
        return tls

    def _connect(self) -> _socket.socket:
        started = time.perf_counter_ns()
        self.connecting = True
        sock = self.sock = _socket.socket(self.family, _socket.SOCK_STREAM)
        sock.setblocking(False)
        loop = self.hub.loop
        self.reader = loop.io(sock.fileno(), 1)
        self.writer = loop.io(sock.fileno(), 2)
        error = sock.connect_ex(self.address)
        if error == errno.EINPROGRESS:
            self._wait(self.writer)
            error = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_ERROR)
        if error:
            raise OSError(error, os.strerror(error))
        sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        connected = time.perf_counter_ns()
        if self.context is not None:
            self.tls = self._handshake(sock, self.context)
        self.connecting = False
        if self.close_each and self.on_setup is not None:  # a new connection per request
            handshake = (time.perf_counter_ns() - connected) // 1000 if self.tls else None
            self.on_setup((connected - started) // 1000, handshake)
        return sock

    def _send(self, sock: _socket.socket, payload: bytes) -> None:
        try:
            sent = sock.send(payload)
        except BlockingIOError:
            sent = 0
        if sent == len(payload):
            return
        view = memoryview(payload)
        while sent < len(payload):
            self._wait(self.writer)
            with contextlib.suppress(BlockingIOError):
                sent += sock.send(view[sent:])

    def _wait(self, watcher: Any) -> None:
        current = getcurrent()
        watcher.start(current.switch)
        self._waiting = current
        try:
            result = self.hub.switch()
        finally:
            self._waiting = None
            watcher.stop()
        if result is _TIMED_OUT:
            raise _Timeout

    def _on_timer(self) -> None:
        """In the hub: the request's deadline passed (a no-op between requests)."""
        waiting = self._waiting
        if waiting is not None:
            self._waiting = None
            waiting.switch(_TIMED_OUT)


@dataclass(frozen=True)
class PreparedRequest:
    """A request encoded once, with the channel its results are recorded in and, if
    its response is checked, the entry whose checks apply (``check``)."""

    method: str
    name: str
    payload: bytes
    channel: Channel
    check: Request | None = None

    @property
    def head_only(self) -> bool:
        return self.method == "HEAD"

    @property
    def keep_body(self) -> bool:
        """Whether the body is kept: only for a body check."""
        return self.check is not None and self.check.expect_body is not None

    @property
    def keep_head(self) -> bool:
        return self.check is not None


@dataclass(frozen=True)
class Response:
    """What ``LeanHttpUser.request`` returns; ``status`` is 0 when no response came."""

    status: int
    nbytes: int
    latency_us: int
    error: str | None = None
    body: bytes = b""

    @property
    def ok(self) -> bool:
        return self.error is None
