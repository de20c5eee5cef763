"""An asyncio TCP load balancer: each client connection goes to the next backend in turn.

Seed 003's asynchronous load balancer: one process, one event loop, round robin per
connection, bytes relayed both ways (HTTP passes through untouched, keep-alive included).
Backends come from the environment: BACKEND1_PORT, BACKEND2_PORT, ... on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
from collections.abc import Iterator

BACKLOG = 65535  # seed 003 ran wrk -c 1000; the kernel caps this at somaxconn
CHUNK = 64 * 1024


def backend_ports(environ: dict[str, str]) -> list[int]:
    numbered = [(int(m[1]), int(v)) for k, v in environ.items()
                if (m := re.fullmatch(r"BACKEND(\d+)_PORT", k))]
    if not numbered:
        raise SystemExit("no backends: set BACKEND1_PORT, BACKEND2_PORT, ...")
    return [port for _, port in sorted(numbered)]


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of stream, then pass the end of stream on (half-close)."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


class Balancer:
    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.next_port: Iterator[int] = itertools.cycle(ports)

    async def handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        port = next(self.next_port)
        try:
            backend_r, backend_w = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            client_w.close()  # backend down: the client sees the connection close
            return
        upstream = asyncio.create_task(pipe(client_r, backend_w))
        try:
            # When the backend ends its side, the exchange is over.
            await pipe(backend_r, client_w)
        finally:
            upstream.cancel()
            backend_w.close()
            client_w.close()


async def main() -> None:
    port = int(os.environ["PORT"])
    bind = os.environ.get("BIND", "127.0.0.1")  # --webperf-target-bind (else loopback only)
    balancer = Balancer(backend_ports(dict(os.environ)))
    server = await asyncio.start_server(balancer.handle, bind, port, backlog=BACKLOG)
    print(f"balancing {bind}:{port} over {balancer.ports}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
