"""A small HTTP/1.1 server on 127.0.0.1 for the swarm's end-to-end tests (no container).

One behaviour per server (``mode``), and its own count of what it answered, so a
test can hold the load generator's figures against the server's.
"""

from __future__ import annotations

import socket
import ssl
import struct
import threading
from dataclasses import dataclass, field
from types import TracebackType

MODES = ("length", "chunked", "close", "stall", "reset")


@dataclass
class Counts:
    responses: int = 0  # responses sent in full
    body_bytes: int = 0  # payload bytes of those responses
    connections: int = 0
    resets: int = 0
    resumed: int = 0  # TLS connections that resumed a session
    lock: threading.Lock = field(default_factory=threading.Lock)


class LocalServer:
    """``with LocalServer("chunked") as server: ... server.url ... server.counts``

    - ``length``: Content-Length bodies, keep-alive;
    - ``chunked``: the body in several chunks, each sent separately, with a trailer;
    - ``close``: ``Connection: close`` and the connection closed after each response;
    - ``stall``: reads requests and never answers;
    - ``reset``: every ``reset_every``-th request is answered with a TCP reset.

    With ``tls`` (a server-side ``ssl.SSLContext``) every connection speaks TLS.
    """

    def __init__(
        self,
        mode: str = "length",
        body: bytes = b"<h1>Hello World</h1>",
        reset_every: int = 7,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.mode = mode
        self.body = body
        self.reset_every = reset_every
        self.tls = tls  # a server-side context: every connection speaks TLS
        self.counts = Counts()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._requests = 0
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def __enter__(self) -> LocalServer:
        self._listener.listen(1024)
        self._listener.settimeout(0.2)
        self._spawn(self._accept)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)
        self._listener.close()

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads.append(thread)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self.counts.lock:
                self.counts.connections += 1
            self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        buffer = b""
        try:
            if self.tls is not None:
                conn.settimeout(5.0)
                conn = self.tls.wrap_socket(conn, server_side=True)  # the handshake
                if conn.session_reused:  # type: ignore[attr-defined]
                    with self.counts.lock:
                        self.counts.resumed += 1
            conn.settimeout(0.2)
            while not self._stop.is_set():
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    try:
                        data = conn.recv(65536)
                    except TimeoutError:
                        continue
                    if not data:
                        return
                    buffer += data
                    continue
                head, buffer = buffer[:end], buffer[end + 4 :]
                buffer = self._skip_body(conn, head, buffer)
                if not self._answer(conn) or b"\r\nconnection: close" in head.lower():
                    return  # (a request's Connection: close, answered, ends it too)
        except OSError:
            return
        finally:
            conn.close()

    def _skip_body(self, conn: socket.socket, head: bytes, buffer: bytes) -> bytes:
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(buffer) < length:
            buffer += conn.recv(65536)
        return buffer[length:]

    def _answer(self, conn: socket.socket) -> bool:
        """Answer one request; False when the connection is done."""
        if self.mode == "stall":
            self._stop.wait()
            return False
        with self.counts.lock:
            self._requests += 1
            reset = self.mode == "reset" and self._requests % self.reset_every == 0
        if reset:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            with self.counts.lock:
                self.counts.resets += 1
            return False  # closing with linger 0 sends a reset
        if self.mode == "chunked":
            self._send_chunked(conn)
        else:
            close = self.mode == "close"
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                + (b"Connection: close\r\n" if close else b"")
                + b"Content-Length: %d\r\n\r\n" % len(self.body)
                + self.body
            )
        with self.counts.lock:
            self.counts.responses += 1
            self.counts.body_bytes += len(self.body)
        return self.mode != "close"

    def _send_chunked(self, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        body, step = self.body, max(len(self.body) // 3, 1)
        for start in range(0, len(body), step):
            piece = body[start : start + step]
            conn.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
        conn.sendall(b"0\r\nX-Trailer: yes\r\n\r\n")
