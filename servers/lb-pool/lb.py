"""A process-pool TCP load balancer: each client connection is relayed by a pool worker.

Seed 003's server-pool load balancer, as in the course's reference: the parent accepts and
picks the next backend (round robin), a ProcessPoolExecutor(20) worker connects to it and
relays bytes both ways until the backend closes. Backends come from the environment:
BACKEND1_PORT, BACKEND2_PORT, ... on 127.0.0.1.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import selectors
import socket
from concurrent.futures import Future, ProcessPoolExecutor

BACKLOG = 65535  # seed 003 ran wrk -c 1000; the kernel caps this at somaxconn
WORKERS = int(os.environ.get("WORKERS", "20"))
CHUNK = 64 * 1024
IDLE_TIMEOUT = 30.0  # a silent connection must not hold a pool worker forever


def backend_ports(environ: dict[str, str]) -> list[int]:
    numbered = [(int(m[1]), int(v)) for k, v in environ.items()
                if (m := re.fullmatch(r"BACKEND(\d+)_PORT", k))]
    if not numbered:
        raise SystemExit("no backends: set BACKEND1_PORT, BACKEND2_PORT, ...")
    return [port for _, port in sorted(numbered)]


def pump(client: socket.socket, backend: socket.socket) -> None:
    """Copy both ways; return when the backend ends its side (the exchange is over)."""
    with selectors.DefaultSelector() as selector:
        selector.register(client, selectors.EVENT_READ, backend)
        selector.register(backend, selectors.EVENT_READ, client)
        while events := selector.select(IDLE_TIMEOUT):
            for key, _ in events:
                source: socket.socket = key.fileobj  # type: ignore[assignment]
                data = source.recv(CHUNK)
                if data:
                    key.data.sendall(data)
                elif source is backend:
                    return
                else:  # the client is done sending: pass the half-close on
                    selector.unregister(client)
                    backend.shutdown(socket.SHUT_WR)


def relay(client: socket.socket, port: int) -> None:
    """In a pool worker: connect to the backend and relay until it is done."""
    try:
        with socket.create_connection(("127.0.0.1", port)) as backend:
            pump(client, backend)
        # The parent still holds the socket: only a shutdown sends the FIN now.
        client.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # either side went away
    finally:
        client.close()


def close_after(sock: socket.socket, _: Future[None]) -> None:
    sock.close()


def main() -> None:
    port = int(os.environ["PORT"])
    bind = os.environ.get("BIND", "127.0.0.1")  # --webperf-target-bind (else loopback only)
    ports = backend_ports(dict(os.environ))
    listener = socket.create_server((bind, port), backlog=BACKLOG)
    print(f"balancing {bind}:{port} over {ports} with {WORKERS} workers", flush=True)
    with ProcessPoolExecutor(WORKERS) as pool:
        for backend in itertools.cycle(ports):
            client, _ = listener.accept()
            # Pickling the socket hands its descriptor to the worker (multiprocessing's
            # resource sharer); the parent closes its copy once the worker is done.
            future: Future[None] = pool.submit(relay, client, backend)
            future.add_done_callback(functools.partial(close_after, client))


if __name__ == "__main__":
    main()
