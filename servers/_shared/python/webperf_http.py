"""The catalogue's routes for the Python servers (python-async, python-uv): one
implementation of what every server answers, so the servers differ only in how they
drive connections (asyncio streams, or asyncio protocols on libuv).

Copied into each image next to its server.py from servers/_shared/python/.
"""

from __future__ import annotations

import json
import time
from email.utils import formatdate
from pathlib import Path

WWW = Path("/srv/www")
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
