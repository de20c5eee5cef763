"""Health checks of targets that speak HTTP/2: gRPC's standard health service
(``health="grpc"``, or ``"grpc:SERVICE"``: ``grpc.health.v1.Health/Check`` answered
SERVING), and a health path on a listener that speaks HTTP/2 with prior knowledge only
(h2c: nginx 1.22's ``listen ... http2`` without ssl answers an HTTP/1.1 GET with its
SETTINGS frame; the path is then asked again over h2c). ``probe_health`` is every
target's one health check, whichever the setting.

One request on a fresh connection per poll (h2c for a plain target, h2 by ALPN for a
TLS one, unverified: this asks whether it is up, not whether to trust it), with the
sans-I/O ``h2`` package on a blocking socket: the check runs in the pytest process while
the target starts, so its cost does not matter. What it answered is the probe's detail:
``SERVING``, ``NOT_SERVING``, ``grpc_UNIMPLEMENTED: unknown service ...`` (no health
service: a definitive no), ``HTTP/2 404 (not a gRPC server?)``, or why it could not ask.
"""

from __future__ import annotations

import socket
import ssl
import time
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events
import h2.exceptions

from pytest_webperf.swarm import grpcwire, http2
from pytest_webperf.targets.base import (
    H2C_ONLY,
    Probe,
    classify_status,
    probe_http,
    probe_tcp,
)

GRPC = "grpc"  # the health setting's word (and "grpc:SERVICE")


def is_grpc(health: str) -> bool:
    """Whether a target's health setting asks for gRPC's health service."""
    return health == GRPC or health.startswith(GRPC + ":")


def probe_health(
    host: str,
    port: int,
    health: str,
    *,
    tls: bool = False,
    tls_option: str = "tls=True",
    timeout: float = 2.0,
) -> Probe:
    """One health check as ``health`` asks: ``tcp`` (a connection), ``grpc[:SERVICE]``
    (gRPC's health service), or a path (GET, over h2c when the listener speaks nothing
    else)."""
    if health == "tcp":
        return probe_tcp(host, port, timeout)
    if is_grpc(health):
        return probe_grpc(host, port, health.partition(":")[2], tls=tls, timeout=timeout)
    answer = probe_http(host, port, health, timeout, tls=tls, tls_option=tls_option)
    if answer.detail == H2C_ONLY:
        return probe_h2c(host, port, health, timeout)
    return answer


def probe_grpc(
    host: str, port: int, service: str = "", *, tls: bool = False, timeout: float = 2.0
) -> Probe:
    """One gRPC health check: ready when ``service`` ("" the whole server) is SERVING."""
    headers = [
        (":method", "POST"),
        (":path", grpcwire.HEALTH_CHECK),
        *grpcwire.request_headers(grpcwire.HEALTH_CHECK, timeout_s=1.0),
    ]
    body = grpcwire.encode(grpcwire.health_request(service))
    answer = _exchange(host, port, headers, body, tls=tls, timeout=timeout)
    if isinstance(answer, Probe):
        return answer
    return _grpc_outcome(answer)


def probe_h2c(host: str, port: int, path: str, timeout: float = 2.0) -> Probe:
    """``GET path`` over h2c (prior knowledge), classified as an HTTP/1.1 answer is."""
    answer = _exchange(host, port, [(":method", "GET"), (":path", path)], None, timeout=timeout)
    if isinstance(answer, Probe):
        return answer
    status = answer.fields.get(":status", "")
    if not status.isdigit():
        return Probe(False, False, "HTTP/2: no :status in the answer")
    probe = classify_status(int(status))
    return Probe(probe.ready, probe.final, f"HTTP/2 {status} (h2c)")


@dataclass
class _Answer:
    fields: dict[str, str] = field(default_factory=dict)  # headers and trailers
    body: bytes = b""


def _exchange(
    host: str,
    port: int,
    headers: list[tuple[str, str]],
    body: bytes | None,
    *,
    tls: bool = False,
    timeout: float = 2.0,
) -> _Answer | Probe:
    """One request on a new connection: its answer, or a Probe saying why there is none."""
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw:
            if not tls:
                return _stream(raw, f"{host}:{port}", "http", headers, body, deadline=deadline)
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            context.set_alpn_protocols(["h2"])
            with context.wrap_socket(raw, server_hostname=host) as conn:
                if conn.selected_alpn_protocol() != "h2":
                    return Probe(False, True, "its TLS does not offer HTTP/2 (ALPN h2)", True)
                return _stream(conn, f"{host}:{port}", "https", headers, body, deadline=deadline)
    except ConnectionRefusedError:
        return Probe(False, False, "connection refused")
    except OSError as exc:
        return Probe(False, False, f"{type(exc).__name__}: {exc}".rstrip(": "))


def _stream(
    sock: socket.socket,
    authority: str,
    scheme: str,
    headers: list[tuple[str, str]],
    body: bytes | None,
    *,
    deadline: float,
) -> _Answer | Probe:
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
    )
    conn.initiate_connection()
    stream = conn.get_next_available_stream_id()
    method, path = headers[0], headers[1]
    pseudo = [method, (":scheme", scheme), (":authority", authority), path]
    conn.send_headers(stream, [*pseudo, *headers[2:]], end_stream=body is None)
    if body is not None:
        conn.send_data(stream, body, end_stream=True)
    sock.sendall(conn.data_to_send())
    answer = _Answer()
    first = True
    while time.monotonic() < deadline:
        data = sock.recv(65536)
        if not data:
            return Probe(False, False, "the server closed the connection")
        if first and data.startswith(b"HTTP/"):
            line = data.split(b"\r\n", 1)[0].decode("latin-1")
            return Probe(False, True, f'it answered HTTP/1.x ("{line}"), not HTTP/2', True)
        first = False
        try:
            events = conn.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            return Probe(False, True, f"not HTTP/2: {exc}", True)
        for event in events:
            if isinstance(event, h2.events.ResponseReceived | h2.events.TrailersReceived):
                answer.fields.update((str(k), str(v)) for k, v in event.headers)
            elif isinstance(event, h2.events.DataReceived):
                conn.acknowledge_received_data(event.flow_controlled_length, stream)
                answer.body += event.data
            elif isinstance(event, h2.events.StreamReset):
                code = http2.error_name(int(event.error_code))
                return Probe(False, False, f"the health check's stream was reset ({code})")
            elif isinstance(event, h2.events.StreamEnded):
                return answer
        sock.sendall(conn.data_to_send())
    return Probe(False, False, "no answer in time")


def _grpc_outcome(answer: _Answer) -> Probe:
    fields = answer.fields
    if fields.get(":status") != "200":
        return Probe(False, True, f"HTTP/2 {fields.get(':status')} (not a gRPC server?)")
    code = grpcwire.parse_status(fields.get("grpc-status"))
    if code != 0:
        said = grpcwire.decode_message(fields.get("grpc-message", ""))
        # no health service (UNIMPLEMENTED), or not this service (NOT_FOUND): it will not
        # appear by waiting; UNAVAILABLE and the rest may
        final = code in (5, 12)
        return Probe(False, final, f"{grpcwire.error_kind(code)}: {said}".rstrip(": "))
    try:
        messages = grpcwire.decode_all(answer.body)
    except grpcwire.FramingError as exc:
        return Probe(False, True, f"not gRPC framing: {exc}")
    if len(messages) != 1:
        return Probe(False, True, f"{len(messages)} response messages (1 expected)")
    status = grpcwire.health_status(messages[0].data)
    name = grpcwire.SERVING_NAMES.get(status, str(status))
    return Probe(status == grpcwire.SERVING, False, name)
