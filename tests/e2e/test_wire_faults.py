"""Malformed and unusual responses, framed alike by the lean and the native users.

A scripted server on 127.0.0.1 answers every request with the same bytes (in pieces,
with pauses, where the case says so); each generator runs a short swarm against it.
Whatever the bytes, the swarm ends on time, counts each failure under the lean
user's name with its example, and counts the body bytes of what succeeded.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from pytest_webperf.models.workload import Workload
from pytest_webperf.swarm import wire
from pytest_webperf.swarm.hotloop import unavailable
from pytest_webperf.swarm.runner import SwarmOutcome, run_swarm
from pytest_webperf.swarm.spec import SwarmSpec

pytestmark = pytest.mark.e2e
GENERATORS = ["lean", "native"]


@dataclass(frozen=True)
class Case:
    pieces: tuple[bytes, ...]  # sent one after the other, PAUSE_S apart
    close: bool = False  # close the connection after the response
    kinds: frozenset[str] = frozenset()  # the failures expected (and no others)
    example: str | None = None  # the example kept for the one failure kind
    body: int | None = None  # body bytes of each success (None: no success expected)


PAUSE_S = 0.01
OK5 = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
CASES = {
    "content-length": Case((OK5,), body=5),
    "pieces": Case((b"HTTP/1.1 200 OK\r\nConte", b"nt-Length: 5\r\n\r", b"\nhel", b"lo"), body=5),
    "chunked-trailer": Case(
        (CHUNKED + b"3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nX-Trailer: 1\r\n\r\n",), body=5
    ),
    "chunked-pieces": Case((CHUNKED, b"a\r", b"\n01234", b"56789\r", b"\n0\r\n", b"\r\n"), body=10),
    "interim-100": Case((b"HTTP/1.1 100 Continue\r\n\r\n", OK5), body=5),
    "http10-no-length": Case((b"HTTP/1.0 200 OK\r\n\r\nhello",), close=True, body=5),
    "http10-keep-alive": Case(
        (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\nhello",), body=5
    ),
    "other-coding": Case(
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nhello",), close=True, body=5
    ),
    "no-content": Case((b"HTTP/1.1 204 No Content\r\n\r\n",), body=0),
    "503": Case(
        (b"HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy",),
        kinds=frozenset({"http_503"}),
        example="HTTP/1.1 503 Busy",
    ),
    "garbage": Case(
        (b"\x00\x01 not http\r\n\r\n",),
        close=True,
        kinds=frozenset({"protocol"}),
        example=wire.bad_status_line(b"\x00\x01 not http"),
    ),
    "switching": Case(
        (b"HTTP/1.1 101 Switching Protocols\r\n\r\n",),
        kinds=frozenset({"protocol"}),
        example=wire.SWITCHING_PROTOCOLS,
    ),
    "bad-length": Case(
        (b"HTTP/1.1 200 OK\r\nContent-Length: Five\r\n\r\nhello",),
        close=True,
        kinds=frozenset({"protocol"}),
        example=wire.bad_content_length(b"five"),
    ),
    "length-too-long": Case(
        (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789",),
        close=True,
        kinds=frozenset({"closed"}),
        example=wire.closed_in_body(10, 100),
    ),
    # 5 more bytes than announced: the first response is fine, its surplus starts the next
    # one on that connection, which is then not HTTP
    "length-too-short": Case(
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloWORLD",),
        kinds=frozenset({"protocol"}),
        example=wire.bad_status_line(b"WORLDHTTP/1.1 200 OK\r\nContent-Length: 5"),
        body=5,
    ),
    "bad-chunk": Case(
        (CHUNKED + b"zz\r\nhello\r\n0\r\n\r\n",),
        close=True,
        kinds=frozenset({"protocol"}),
        example=wire.bad_chunk_size(b"zz"),
    ),
    "chunk-without-crlf": Case(
        (CHUNKED + b"5\r\nhelloXX0\r\n\r\n",),
        close=True,
        kinds=frozenset({"protocol"}),
        example=wire.CHUNK_WITHOUT_CRLF,
    ),
    "closed-mid-chunks": Case(
        (CHUNKED + b"a\r\n01234",),
        close=True,
        kinds=frozenset({"closed"}),
        example=wire.closed_in_chunks(5),
    ),
    "closed-mid-head": Case(
        (b"HTTP/1.1 200 OK\r\nContent-",),
        close=True,
        kinds=frozenset({"closed"}),
        example=wire.closed_in_head(len(b"HTTP/1.1 200 OK\r\nContent-")),
    ),
    "head-too-long": Case(
        (b"HTTP/1.1 200 OK\r\nX-Big: " + b"x" * (wire.MAX_HEAD + 10),),
        close=True,
        kinds=frozenset({"protocol"}),
        example=wire.too_long("response head", wire.MAX_HEAD),
    ),
}


class ScriptedServer:
    """Answers every request (a head ending in CRLF CRLF) with ``case``'s pieces."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def __enter__(self) -> ScriptedServer:
        self._spawn(self._accept)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=5)
        self.listener.close()

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self.threads.append(thread)

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.2)
        buffer = b""
        with conn:
            while not self.stop.is_set():
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                buffer += data
                while b"\r\n\r\n" in buffer:
                    buffer = buffer.split(b"\r\n\r\n", 1)[1]
                    try:
                        for i, piece in enumerate(self.case.pieces):
                            if i:
                                time.sleep(PAUSE_S)
                            conn.sendall(piece)
                    except OSError:
                        return
                    if self.case.close:
                        return


@pytest.fixture(params=GENERATORS)
def user(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "native" and unavailable():
        pytest.skip(str(unavailable()))
    yield str(request.param)


def swarm(port: int, user: str) -> SwarmOutcome:
    return run_swarm(
        SwarmSpec(
            host=f"http://127.0.0.1:{port}",
            users=2,
            duration_s=0.8,
            warmup_s=0.2,
            timeout_s=2.0,
            user_class=user,
            workload=Workload(path="/x"),
        )
    )


@pytest.mark.parametrize("name", list(CASES))
def test_each_response_is_framed_and_named_as_the_lean_user_does(name: str, user: str) -> None:
    case = CASES[name]
    with ScriptedServer(case) as server:
        started = time.monotonic()
        outcome = swarm(server.port, user)
        assert time.monotonic() - started < 30  # ended on its own, on time
    total = outcome.total
    assert total.requests > 0
    assert set(total.error_kinds) == set(case.kinds), total.error_kinds
    if case.example is not None:
        (kind,) = case.kinds
        assert total.error_examples[kind] == case.example
    successes = total.requests - total.errors
    if case.body is None:
        assert successes == 0
    else:
        assert successes > 0
        http_error_bytes = 4 * total.error_kinds.get("http_503", 0)
        assert total.bytes - http_error_bytes == successes * case.body
