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
from pathlib import Path
from typing import Any

WWW = Path("/srv/www")
BACKLOG = 65535  # seed 003 ran wrk -c 1000; the kernel caps this at somaxconn
WORKERS = int(os.environ.get("WORKERS", "20"))
MAX_BODY = 64 * 1024
FIELDS = ("clientId", "temp", "humidity", "light")
ARRAY = (
    89, 47, 62, 36, 78, 22, 51, 11, 100, 94, 57, 63, 42, 76, 31, 85, 99, 55, 5, 17,
    68, 28, 45, 71, 8, 60, 83, 79, 48, 92, 43, 12, 61, 23, 87, 54, 3, 72, 37, 80,
    98, 26, 65, 53, 16, 25, 95, 39, 74, 20, 50, 91, 69, 40, 75, 30, 86, 4, 58, 19,
    77, 13, 70, 24, 46, 14, 96, 7, 49, 64, 38, 56, 82, 15, 84, 9, 21, 34, 97, 27,
    67, 52, 66, 90, 41, 6, 35, 10, 73, 18, 81, 44, 29, 59, 88, 2, 32, 1, 33, 93,
)  # fmt: skip
FILES = {"/file": ("file.png", "image/png"), "/500b": ("500b.html", "text/html"),
         "/20kb": ("20kb.html", "text/html")}


def quick_sort(array: list[int]) -> list[int]:
    """Seed 000's recursive quicksort (first element as pivot)."""
    if len(array) < 2:
        return array
    pivot = array[0]
    left: list[int] = []
    right: list[int] = []
    for value in array[1:]:
        (left if value < pivot else right).append(value)
    return [*quick_sort(left), pivot, *quick_sort(right)]


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
    listener = socket.create_server(("127.0.0.1", port), backlog=BACKLOG)
    stored: Synchronized[int] = multiprocessing.Value("q", 0)
    print(f"listening on 127.0.0.1:{port} with {WORKERS} worker processes", flush=True)
    with ProcessPoolExecutor(WORKERS, initializer=Worker.init, initargs=(stored,)) as pool:
        while True:
            connection, _ = listener.accept()
            # Pickling the socket hands its descriptor to the worker (multiprocessing's
            # resource sharer); the parent closes its copy once the worker is done.
            future: Future[None] = pool.submit(serve, connection)
            future.add_done_callback(lambda _, c=connection: c.close())  # type: ignore[misc]


if __name__ == "__main__":
    main()
