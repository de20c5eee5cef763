"""The lean HTTP/2 user's connection (``Link``): one HTTP/2 connection (h2c with prior
knowledge, or h2 by ALPN over TLS) with the sans-I/O ``h2`` package, shared by a user's
stream greenlets; a reader greenlet feeds what arrives to ``h2`` and wakes the stream it
completes; and a whole response's outcome, named as the native loop names it
(``outcome``). A GOAWAY with NO_ERROR retires the connection and the streams it refused
are sent again on a new one, keeping their start."""

from __future__ import annotations

import contextlib
import socket
import time
from typing import Any

import gevent
import gevent.event
import gevent.lock
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from pytest_webperf.models.http2 import Http2Figures
from pytest_webperf.models.workload import Request
from pytest_webperf.swarm import grpcwire
from pytest_webperf.swarm.child.connection import RequestFailed, resolve, tls_context
from pytest_webperf.swarm.http2 import WINDOW, error_name, goaway_kind, rst_kind
from pytest_webperf.swarm.http2 import request_body as body_of
from pytest_webperf.swarm.recorder import (
    CLOSED,
    CONNECT,
    PROTOCOL,
    TIMEOUT,
    TLS,
    UNEXPECTED_BODY,
    UNEXPECTED_STATUS,
    Channel,
    classify,
)
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.swarm.wire import split_host, unexpected_body, uses_tls


class _Retry(Exception):
    """A stream a GOAWAY refused unprocessed: send it again on a new connection."""


class Stream:
    """One request in flight: what came back, and the event that says it is over."""

    __slots__ = ("body", "done", "failure", "fields", "headers_at")

    def __init__(self) -> None:
        self.done = gevent.event.Event()
        self.fields: dict[bytes, bytes] = {}  # headers, then trailers
        self.body = bytearray()
        self.headers_at = 0
        self.failure: RequestFailed | _Retry | None = None


class Link:
    """One HTTP/2 connection, shared by a user's stream greenlets; opened on demand,
    and again after the server closed or retired it."""

    def __init__(self, spec: SwarmSpec, streams: int, channel: Channel) -> None:
        host, port, self.authority = split_host(spec.host)
        self.address = resolve(host, port)
        self.server_name = host
        self.tls = tls_context(spec.tls_ca, ("h2",)) if uses_tls(spec.host) else None
        self.scheme = "https" if self.tls is not None else "http"
        self.timeout_s = spec.timeout_s
        self.streams = streams
        self.channel = channel  # where the connection's figures go
        self.sock: socket.socket | None = None
        self.conn: h2.connection.H2Connection | None = None
        self.open_streams: dict[int, Stream] = {}
        self.send_lock = gevent.lock.RLock()
        self.reader: gevent.Greenlet | None = None
        self.window = gevent.event.Event()  # set when the server opens a window

    def _open(self) -> h2.connection.H2Connection:
        try:
            sock = socket.socket(self.address[0], socket.SOCK_STREAM)
            sock.settimeout(self.timeout_s)
            sock.connect(self.address[1])
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as exc:
            raise RequestFailed(CONNECT, str(exc)) from None
        if self.tls is not None:
            try:
                sock = self.tls.wrap_socket(sock, server_hostname=self.server_name)
            except (OSError, ValueError) as exc:
                raise RequestFailed(TLS, str(exc)) from None
            sock.settimeout(None)
        else:
            sock.settimeout(None)
        conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding=None)
        )
        conn.initiate_connection()
        conn.update_settings(
            {
                h2.settings.SettingCodes.ENABLE_PUSH: 0,
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: WINDOW,
            }
        )
        conn.increment_flow_control_window(WINDOW - 65535)
        sock.sendall(conn.data_to_send())
        self.sock, self.conn = sock, conn
        self.reader = gevent.spawn(self._read, sock, conn)
        self.channel.current.http2 = _add(self.channel.current.http2, self.streams, opened=1)
        return conn

    def exchange(self, entry: Request, headers: list[tuple[bytes, bytes]]) -> Stream:
        """One request and its whole response (a ``RequestFailed`` otherwise)."""
        for _ in range(3):  # a GOAWAY may refuse it unprocessed: again on a new connection
            try:
                return self._exchange(entry, headers)
            except _Retry:
                self.channel.current.http2 = _add(self.channel.current.http2, self.streams, 0, 1)
        raise RequestFailed(CLOSED, "refused by three GOAWAYs in a row")

    def _exchange(self, entry: Request, headers: list[tuple[bytes, bytes]]) -> Stream:
        stream = Stream()
        body = body_of(entry)
        with self.send_lock:
            conn = self.conn or self._open()
            sock = self.sock
            assert sock is not None
            try:
                stream_id = conn.get_next_available_stream_id()
                conn.send_headers(stream_id, headers, end_stream=body is None)
            except (h2.exceptions.ProtocolError, h2.exceptions.NoAvailableStreamIDError) as e:
                self._drop(conn)
                raise _Retry from e
            self.open_streams[stream_id] = stream
            self._flush(sock, conn)
        if body is not None:
            self._send_body(conn, sock, stream_id, stream, body)
        if not stream.done.wait(self.timeout_s):
            with self.send_lock:
                self.open_streams.pop(stream_id, None)
                if self.conn is conn:
                    conn.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
                    self._flush(sock, conn)
            raise RequestFailed(TIMEOUT, f"no answer within {self.timeout_s:g} s")
        if stream.failure is not None:
            raise stream.failure
        return stream

    def _send_body(
        self,
        conn: h2.connection.H2Connection,
        sock: socket.socket,
        sid: int,
        st: Stream,
        body: bytes,
    ) -> None:
        """The body, as the server's windows allow (a wait for one is a stall)."""
        sent = 0
        while True:
            with self.send_lock:
                if self.conn is not conn or st.done.is_set():
                    return
                room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
                if room > 0 or sent == len(body):
                    chunk = body[sent : sent + room]
                    sent += len(chunk)
                    conn.send_data(sid, chunk, end_stream=sent == len(body))
                    self._flush(sock, conn)
                    if sent == len(body):
                        return
                    continue
                self.window.clear()
            self.window.wait(self.timeout_s)

    def _flush(self, sock: socket.socket, conn: h2.connection.H2Connection) -> None:
        data = conn.data_to_send()
        if data:
            try:
                sock.sendall(data)
            except OSError as exc:
                self._fail_all(conn, RequestFailed(classify(exc), str(exc)))

    def _read(self, sock: socket.socket, conn: h2.connection.H2Connection) -> None:
        while self.conn is conn:
            try:
                data = sock.recv(65536)
            except OSError as exc:
                self._fail_all(conn, RequestFailed(classify(exc), str(exc)))
                return
            if not data:
                open_ = len(self.open_streams)
                said = f"the server closed the connection with {open_} streams open"
                self._fail_all(conn, RequestFailed(CLOSED, said))
                return
            try:
                events = conn.receive_data(data)
            except h2.exceptions.ProtocolError as exc:
                self._fail_all(conn, RequestFailed(PROTOCOL, f"HTTP/2: {exc}"))
                return
            with self.send_lock:
                for event in events:
                    self._on(conn, event)
                if self.conn is conn:
                    self._flush(sock, conn)

    def _on(self, conn: h2.connection.H2Connection, event: Any) -> None:
        if isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged):
            self.window.set()
            return
        if isinstance(event, h2.events.ConnectionTerminated):
            self._goaway(conn, event)
            return
        stream = self.open_streams.get(getattr(event, "stream_id", 0) or 0)
        if stream is None:
            return
        if isinstance(event, h2.events.ResponseReceived):
            stream.headers_at = time.perf_counter_ns()
            stream.fields.update(event.headers)
        elif isinstance(event, h2.events.TrailersReceived):
            stream.fields.update(event.headers)
        elif isinstance(event, h2.events.DataReceived):
            stream.body += event.data
            conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            self.open_streams.pop(event.stream_id, None)
            stream.done.set()
        elif isinstance(event, h2.events.StreamReset):
            self.open_streams.pop(event.stream_id, None)
            code = int(event.error_code)
            said = f"RST_STREAM {error_name(code)}"
            stream.failure = RequestFailed(rst_kind(min(code, 15)), said)
            stream.done.set()

    def _goaway(self, conn: h2.connection.H2Connection, event: Any) -> None:
        """A GOAWAY: NO_ERROR retires the connection (streams above its last id go again
        on a new one); an error fails what is open."""
        code = int(event.error_code)
        last = int(event.last_stream_id or 0)
        if code:
            said = f"GOAWAY {error_name(code)} (last stream {last})"
            if event.additional_data:
                said += ": " + bytes(event.additional_data[:80]).decode("latin-1")
            self._fail_all(conn, RequestFailed(goaway_kind(min(code, 15)), said))
            return
        self.channel.current.http2 = _add(self.channel.current.http2, self.streams, rotations=1)
        self.conn = None  # new streams go on a new connection
        for sid, stream in list(self.open_streams.items()):
            if sid > last:
                self.open_streams.pop(sid)
                stream.failure = _Retry()
                stream.done.set()

    def _fail_all(self, conn: h2.connection.H2Connection, failure: RequestFailed) -> None:
        if self.conn is not conn and self.conn is not None:
            return
        streams, self.open_streams = self.open_streams, {}
        self._drop(conn)
        for stream in streams.values():
            stream.failure = failure
            stream.done.set()

    def _drop(self, conn: h2.connection.H2Connection) -> None:
        if self.conn is conn:
            self.conn = None
        if self.sock is not None:
            sock, self.sock = self.sock, None
            with contextlib.suppress(OSError):
                sock.close()
        self.window.set()

    def close(self) -> None:
        if self.conn is not None:
            self._fail_all(self.conn, RequestFailed(CLOSED, "the user stopped"))
        if self.reader is not None:
            self.reader.kill(block=False)


def _add(
    figures: Http2Figures | None,
    streams: int,
    opened: int = 0,
    retried: int = 0,
    rotations: int = 0,
) -> Http2Figures:
    more = Http2Figures(streams=streams, opened=opened, retried=retried, rotations=rotations)
    return more if figures is None else figures.merge(more)


def outcome(entry: Request, stream: Stream) -> tuple[str | None, str | None]:
    """(failure kind, example) of a whole response; (None, None) for a success. gRPC:
    HTTP 200, grpc-status 0 and exactly one response message."""
    raw = stream.fields.get(b":status", b"0")
    status = int(raw) if raw.isdigit() else 0
    line = f"HTTP/2 {status}"
    if entry.expect_status is not None and status not in entry.expect_status:
        return UNEXPECTED_STATUS, line
    if entry.expect_status is None and (status >= 400 or (entry.grpc and status != 200)):
        return f"http_{status}", line
    body = bytes(stream.body)
    if entry.grpc:
        if b"grpc-status" not in stream.fields:
            return PROTOCOL, "gRPC: the response has no grpc-status"
        code = grpcwire.parse_status(stream.fields[b"grpc-status"])
        if code != 0:
            said = grpcwire.decode_message(stream.fields.get(b"grpc-message", b""))
            return grpcwire.error_kind(code), said or f"grpc-status {code} without a grpc-message"
        try:
            messages = grpcwire.decode_all(body)
        except grpcwire.FramingError as exc:
            return PROTOCOL, f"gRPC: {exc}"
        if len(messages) != 1:
            return PROTOCOL, (
                f"gRPC: {len(messages)} response messages to a unary call (server streaming "
                "is not measured)"
            )
    if entry.expect_body is not None and not entry.body_matches(body):
        return UNEXPECTED_BODY, unexpected_body(line, body)
    return None, None
