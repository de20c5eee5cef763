"""An asyncio HTTP/1.1 server (stdlib streams, one coroutine per connection).

Seed 003's asynchronous server, serving the catalogue's routes: one process, one event
loop, keep-alive connections, quicksort per request, files read from disk per request.
"""

from __future__ import annotations

import asyncio
import os

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

BACKLOG = 65535  # seed 003 ran wrk -c 1000; the kernel caps this at somaxconn
IDLE_TIMEOUT = 60.0


async def read_request(reader: asyncio.StreamReader) -> tuple[Response | None, bool]:
    """The response to the next request (None at end of stream) and whether to keep alive."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT)
    parsed = parse_head(head)
    if parsed is None:
        return json_response(400, {"error": "malformed request"}), False
    method, path, version, headers = parsed
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        return json_response(400, {"error": "bad Content-Length"}), False
    if length < 0 or length > MAX_BODY or "transfer-encoding" in headers:
        return json_response(400, {"error": "body must have a Content-Length <= 64 KiB"}), False
    body = await reader.readexactly(length) if length else b""
    return route(method, path, body), wants_keep_alive(version, headers)


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        keep_alive = True
        while keep_alive:
            response, keep_alive = await read_request(reader)
            if response is None:
                break
            writer.write(render(response, keep_alive))
            await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError,
            ConnectionError):
        pass  # the client went away, sent too large a head, or idled out
    finally:
        writer.close()


async def main() -> None:
    port = int(os.environ["PORT"])
    bind = os.environ.get("BIND", "127.0.0.1")  # --webperf-target-bind (else loopback only)
    server = await asyncio.start_server(handle, bind, port, backlog=BACKLOG,
                                        limit=MAX_HEAD)
    print(f"listening on {bind}:{port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
