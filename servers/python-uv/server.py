"""A libuv-based HTTP/1.1 server: asyncio protocols on uvloop (libuv underneath).

Seed 004 wrote its event-driven Python server on pyuv, libuv's direct binding, in callback
style. pyuv does not build on current Python; uvloop runs asyncio on libuv, and an
asyncio.Protocol keeps the seed's shape: callbacks on data, no coroutine per connection.
"""

from __future__ import annotations

import asyncio
import os
from typing import cast

import uvloop

from webperf_http import (  # the catalogue's routes: servers/_shared/python
    MAX_BODY,
    MAX_HEAD,
    Response,
    json_response,
    parse_head,
    render,
    route,
    wants_keep_alive,
)

BACKLOG = 65535  # seed 004 ran ab -c 10000; the kernel caps this at somaxconn


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
    bind = os.environ.get("BIND", "127.0.0.1")  # --webperf-target-bind (else loopback only)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(HttpProtocol, bind, port, backlog=BACKLOG)
    print(f"listening on {bind}:{port} ({type(loop).__module__})", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    uvloop.install()
    asyncio.run(main())
