"""HTTP/2 servers for the end-to-end tests, with the sans-I/O ``h2`` package (server side):
a thread per connection on ``$PORT`` (h2c, prior knowledge).

    python h2_server.py rst    every third stream reset with INTERNAL_ERROR, the others 200
    python h2_server.py grpc   gRPC: /test.Svc/Echo (the request message back),
                               /test.Svc/Slow (the same after SLOW_MS milliseconds),
                               /test.Svc/Down (UNAVAILABLE, "back soon"), and
                               grpc.health.v1.Health/Check (SERVING); any /plain path
                               a plain 200 "ok" (an HTTP/2 request that is not gRPC)

Copied into a pytester directory (``source()``) and started as ``webperf.process``
targets (``health="grpc"`` for the gRPC one), so an A/B run can make Slow slower in its
working tree (``SLOW_MS`` is a line of its own).
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import sys
import threading
import time
from pathlib import Path

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions

SLOW_MS = 2


def frame(message: bytes) -> bytes:
    return struct.pack(">BI", 0, len(message)) + message


def grpc_answer(conn: h2.connection.H2Connection, stream: int, path: str, body: bytes) -> None:
    """A unary call's answer: its message and OK, or a trailers-only failure."""
    message = body[5:]
    if path == "/test.Svc/Down":
        failed = [(":status", "200"), ("content-type", "application/grpc"), ("grpc-status", "14")]
        conn.send_headers(stream, [*failed, ("grpc-message", "back%20soon")], end_stream=True)
        return
    if path == "/grpc.health.v1.Health/Check":
        message = b"\x08\x01"  # HealthCheckResponse{status: SERVING}
    elif path == "/test.Svc/Slow":
        time.sleep(SLOW_MS / 1000)
    elif path != "/test.Svc/Echo":
        unknown = [(":status", "200"), ("content-type", "application/grpc"), ("grpc-status", "12")]
        conn.send_headers(stream, unknown, end_stream=True)
        return
    conn.send_headers(stream, [(":status", "200"), ("content-type", "application/grpc")])
    conn.send_data(stream, frame(message))
    conn.send_headers(stream, [("grpc-status", "0")], end_stream=True)


def serve(sock: socket.socket, mode: str) -> None:
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
    )
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    paths: dict[int, str] = {}
    bodies: dict[int, bytes] = {}
    streams = 0
    with sock, contextlib.suppress(OSError, h2.exceptions.ProtocolError):
        while data := sock.recv(65536):
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    paths[event.stream_id] = dict(event.headers)[":path"]
                    bodies[event.stream_id] = b""
                elif isinstance(event, h2.events.DataReceived):
                    bodies[event.stream_id] += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    stream = event.stream_id
                    path, body = paths.pop(stream), bodies.pop(stream)
                    streams += 1
                    if mode == "grpc" and not path.startswith("/plain"):
                        grpc_answer(conn, stream, path, body)
                    elif mode == "grpc":  # a plain HTTP/2 request beside the gRPC methods
                        conn.send_headers(stream, [(":status", "200"), ("content-length", "3")])
                        conn.send_data(stream, b"ok\n", end_stream=True)
                    elif streams % 3 == 0:
                        conn.reset_stream(stream, h2.errors.ErrorCodes.INTERNAL_ERROR)
                    else:
                        conn.send_headers(stream, [(":status", "200"), ("content-length", "3")])
                        conn.send_data(stream, b"ok\n", end_stream=True)
            sock.sendall(conn.data_to_send())


def main() -> None:
    mode = sys.argv[1]
    listener = socket.create_server(("127.0.0.1", int(os.environ["PORT"])))
    while True:
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=serve, args=(sock, mode), daemon=True).start()


def source(slow_ms: int = SLOW_MS) -> str:
    """This file's text, for a pytester directory, with Slow taking ``slow_ms``."""
    text = Path(__file__).read_text()
    return text.replace(f"SLOW_MS = {SLOW_MS}\n", f"SLOW_MS = {slow_ms}\n", 1)


if __name__ == "__main__":
    main()
