"""A process-pool HTTP server: the parent accepts, a pool worker serves the connection.

Seed 003's server-pool design (the course's reference server: ProcessPoolExecutor(20),
each accepted socket submitted to the pool, one request answered, connection closed).
The worker runs the stdlib's http.server request handler on the socket it was handed.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
from concurrent.futures import Future, ProcessPoolExecutor
from http.server import BaseHTTPRequestHandler
from multiprocessing.sharedctypes import Synchronized
from typing import Any

from webperf_http import (  # the catalogue's routes: servers/_shared/python
    ARRAY,
    FIELDS,
    FILES,
    MAX_BODY,
    WWW,
    quick_sort,
)

BACKLOG = 65535  # seed 003 ran wrk -c 1000; the kernel caps this at somaxconn
WORKERS = int(os.environ.get("WORKERS", "20"))


class Worker:
    """Per-process state, set by the pool initializer: the shared telemetry counter."""

    stored: Synchronized[int] | None = None

    @classmethod
    def init(cls, stored: Synchronized[int]) -> None:
        cls.stored = stored

    @classmethod
    def count(cls) -> int:
        assert cls.stored is not None
        with cls.stored.get_lock():
            cls.stored.value += 1
            return cls.stored.value


class Handler(BaseHTTPRequestHandler):
    """HTTP/1.0 (the stdlib's default): one request per connection, as the seed's server."""

    server_version = "webperf-pool"
    timeout = 30  # a silent client must not hold a pool worker forever

    def send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, status: int, value: object) -> None:
        self.send(status, "application/json", json.dumps(value, separators=(",", ":")).encode())

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/hello":
            self.send(200, "text/html", b"<h1>Hello World</h1>")  # = assets/hello.html
        elif path == "/quicksort":
            self.send_json(200, quick_sort(list(ARRAY)))
        elif path in FILES:
            name, content_type = FILES[path]
            self.send(200, content_type, (WWW / name).read_bytes())  # from disk per request
        elif path == "/health":
            self.send(200, "text/plain", b"ok\n")
        else:
            self.send(404, "text/plain", b"not found\n")

    def do_POST(self) -> None:
        if self.path.split("?", 1)[0] != "/telemetry":
            self.send(404, "text/plain", b"not found\n")
            return
        length = self.headers.get("Content-Length", "0")
        if not length.isdigit() or int(length) > MAX_BODY:
            self.send_json(400, {"error": "body must have a Content-Length <= 64 KiB"})
            return
        self.telemetry(self.rfile.read(int(length)))

    def telemetry(self, body: bytes) -> None:
        """Seed 002's message: {"clientId", "temp", "humidity", "light"}, all numbers."""
        try:
            message = json.loads(body)
        except ValueError:
            self.send_json(400, {"error": "body is not JSON"})
            return
        if not isinstance(message, dict):
            self.send_json(400, {"error": "body is not a JSON object"})
            return
        for field in FIELDS:
            value = message.get(field)
            if isinstance(value, bool) or not isinstance(value, int | float):
                self.send_json(400, {"error": f"missing or non-numeric field: {field}"})
                return
        self.send_json(201, {"stored": Worker.count()})

    def log_message(self, format: str, *args: Any) -> None:
        pass  # no access log: a load test would flood it


def serve(connection: socket.socket) -> None:
    """In a pool worker: answer the connection's request, then close it."""
    try:
        Handler(connection, connection.getpeername(), None)  # type: ignore[arg-type]
        # The parent still holds the socket: only a shutdown sends the FIN now.
        connection.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the client went away
    finally:
        connection.close()


def main() -> None:
    port = int(os.environ["PORT"])
    bind = os.environ.get("BIND", "127.0.0.1")  # --webperf-target-bind (else loopback only)
    listener = socket.create_server((bind, port), backlog=BACKLOG)
    stored: Synchronized[int] = multiprocessing.Value("q", 0)
    print(f"listening on {bind}:{port} with {WORKERS} worker processes", flush=True)
    with ProcessPoolExecutor(WORKERS, initializer=Worker.init, initargs=(stored,)) as pool:
        while True:
            connection, _ = listener.accept()
            # Pickling the socket hands its descriptor to the worker (multiprocessing's
            # resource sharer); the parent closes its copy once the worker is done.
            future: Future[None] = pool.submit(serve, connection)
            future.add_done_callback(lambda _, c=connection: c.close())  # type: ignore[misc]


if __name__ == "__main__":
    main()
