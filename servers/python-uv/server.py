"""A libuv-based HTTP/1.1 server: asyncio protocols on uvloop (libuv underneath).

Seed 004 wrote its event-driven Python server on pyuv, libuv's direct binding, in callback
style. pyuv does not build on current Python; uvloop runs asyncio on libuv, and an
asyncio.Protocol keeps the seed's shape: callbacks on data, no coroutine per connection.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from email.utils import formatdate
from pathlib import Path
from typing import cast

import uvloop

WWW = Path("/srv/www")
BACKLOG = 65535  # seed 004 ran ab -c 10000; the kernel caps this at somaxconn
MAX_HEAD = 16 * 1024
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
REASONS = {200: "OK", 201: "Created", 400: "Bad Request", 404: "Not Found",
           500: "Internal Server Error"}

Response = tuple[int, str, bytes]


class Telemetry:
    """Messages accepted since start (in memory for now)."""

    stored = 0


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


def json_response(status: int, value: object) -> Response:
    return status, "application/json", json.dumps(value, separators=(",", ":")).encode()


def telemetry(body: bytes) -> Response:
    """Seed 002's message: {"clientId", "temp", "humidity", "light"}, all numbers."""
    try:
        message = json.loads(body)
    except ValueError:
        return json_response(400, {"error": "body is not JSON"})
    if not isinstance(message, dict):
        return json_response(400, {"error": "body is not a JSON object"})
    for field in FIELDS:
        value = message.get(field)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return json_response(400, {"error": f"missing or non-numeric field: {field}"})
    Telemetry.stored += 1
    return json_response(201, {"stored": Telemetry.stored})


def route(method: str, path: str, body: bytes) -> Response:
    if method == "GET":
        if path == "/hello":
            return 200, "text/html", b"<h1>Hello World</h1>"  # = assets/hello.html (tested)
        if path == "/quicksort":
            return json_response(200, quick_sort(list(ARRAY)))
        if path in FILES:
            name, content_type = FILES[path]
            # A page-cache hit takes microseconds: cheaper inline than a thread hop.
            return 200, content_type, (WWW / name).read_bytes()
    if method == "POST" and path == "/telemetry":
        return telemetry(body)
    if path == "/health":
        return 200, "text/plain", b"ok\n"
    return 404, "text/plain", b"not found\n"


class HttpDate:
    """The Date header, formatted at most once a second."""

    text, at = "", 0.0

    @classmethod
    def now(cls) -> str:
        now = time.time()
        if now - cls.at >= 1.0:
            cls.text, cls.at = formatdate(now, usegmt=True), now
        return cls.text


def render(response: Response, keep_alive: bool) -> bytes:
    status, content_type, body = response
    connection = "keep-alive" if keep_alive else "close"
    head = (f"HTTP/1.1 {status} {REASONS[status]}\r\nDate: {HttpDate.now()}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            f"Connection: {connection}\r\n\r\n")
    return head.encode("latin-1") + body


def parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]] | None:
    """(method, path, version, lower-cased headers), or None when malformed."""
    request_line, *lines = head.decode("latin-1").split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None
    headers = {}
    for line in lines:
        if line:
            name, sep, value = line.partition(":")
            if not sep:
                return None
            headers[name.strip().lower()] = value.strip()
    method, target, version = parts
    return method, target.split("?", 1)[0], version, headers


def wants_keep_alive(version: str, headers: dict[str, str]) -> bool:
    connection = headers.get("connection", "").lower()
    if version == "HTTP/1.0":
        return connection == "keep-alive"
    return connection != "close"


class HttpProtocol(asyncio.Protocol):
    """One connection: parse requests out of a buffer as data arrives, answer each."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while self.transport is not None and not self.transport.is_closing():
            if not self.answer_one():
                return

    def answer_one(self) -> bool:
        """Answer the first complete request in the buffer; False when there is none."""
        assert self.transport is not None
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buffer) > MAX_HEAD:
                self.reply(json_response(400, {"error": "request head too large"}), False)
            return False
        parsed = parse_head(bytes(self.buffer[: end + 4]))
        if parsed is None:
            self.reply(json_response(400, {"error": "malformed request"}), False)
            return False
        method, path, version, headers = parsed
        length = headers.get("content-length", "0")
        if not length.isdigit() or int(length) > MAX_BODY or "transfer-encoding" in headers:
            self.reply(json_response(400, {"error": "body must have a Content-Length <= 64 KiB"}),
                       False)
            return False
        total = end + 4 + int(length)
        if len(self.buffer) < total:
            return False
        body = bytes(self.buffer[end + 4 : total])
        del self.buffer[:total]
        self.reply(route(method, path, body), wants_keep_alive(version, headers))
        return True

    def reply(self, response: Response, keep_alive: bool) -> None:
        assert self.transport is not None
        self.transport.write(render(response, keep_alive))
        if not keep_alive:
            self.transport.close()


async def main() -> None:
    port = int(os.environ["PORT"])
    loop = asyncio.get_running_loop()
    server = await loop.create_server(HttpProtocol, "127.0.0.1", port, backlog=BACKLOG)
    print(f"listening on 127.0.0.1:{port} ({type(loop).__module__})", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    uvloop.install()
    asyncio.run(main())
