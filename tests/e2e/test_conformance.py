"""Every HTTP server of the catalogue serves the same routes with the same bytes.

A server that speaks HTTP/2 with prior knowledge only (nginx-h2c) is asked over h2c
when its answer to an HTTP/1.1 request is a SETTINGS frame, as its health check does.

One container (plus its dependencies) per server for the whole module: the ``target``
fixture is module-scoped and parametrized by server, so pytest groups the tests by server.
A route a server does not declare in its ``server.toml`` is skipped, with the reason.

Every server is started as ``--webperf-target-bind`` starts it, on 127.0.0.2 (loopback,
but not 127.0.0.1), so each one's start script is seen to honour $BIND; the other e2e
tests start servers on the default address.
"""

from __future__ import annotations

import errno
import http.client
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass

import h2.config
import h2.connection
import h2.events
import pytest

from pytest_webperf.longlived import frame as wf
from pytest_webperf.swarm.wire import client_context
from pytest_webperf.targets import start_target
from pytest_webperf.targets.assets import QUICKSORT_BODY, QUICKSORT_INPUT, workload_files
from pytest_webperf.targets.catalog import Catalog, ServerSpec, default_directories
from pytest_webperf.targets.container import ContainerTarget

pytestmark = pytest.mark.e2e

CATALOG = Catalog(default_directories())
HTTP_SERVERS = [spec.name for spec in CATALOG if spec.kind == "http"]
GRPC_SERVERS = [spec.name for spec in CATALOG if spec.kind == "grpc"]
BIND = "127.0.0.2"  # --webperf-target-bind: loopback, but not where servers listen by default
FILES = workload_files()
# route -> (media type, exact body) of every GET workload
EXPECTED = {
    "/hello": ("text/html", FILES["hello.html"]),
    "/quicksort": ("application/json", QUICKSORT_BODY),
    "/file": ("image/png", FILES["file.png"]),
    "/500b": ("text/html", FILES["500b.html"]),
    "/20kb": ("text/html", FILES["20kb.html"]),
}
GOOD_MESSAGE = {"clientId": 7, "temp": 21.5, "humidity": 40, "light": 300.25}
BAD_MESSAGES = {
    "malformed-json": b'{"clientId": 1, "temp": ',
    "not-an-object": b"[1, 2, 3]",
    "missing-fields": b'{"clientId": 1, "temp": 20}',
    "non-numeric": b'{"clientId": "one", "temp": 20, "humidity": 30, "light": 40}',
    "empty": b"",
}


@dataclass(frozen=True)
class Reply:
    status: int
    media_type: str
    body: bytes
    content_length: str | None


@dataclass(frozen=True)
class Server:
    spec: ServerSpec
    target: ContainerTarget

    def request(self, method: str, path: str, body: bytes | None = None) -> Reply:
        """One request on a fresh connection (a proxy may answer a 400 by closing); over
        TLS for a server that speaks it (``tls = true``; its certificate not verified)."""
        headers = {"Content-Type": "application/json"} if body is not None else {}
        host, port = self.target.host, self.target.port
        conn = (
            http.client.HTTPSConnection(host, port, timeout=30, context=client_context())
            if self.spec.tls
            else http.client.HTTPConnection(host, port, timeout=30)
        )
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            media_type = (response.getheader("Content-Type") or "").split(";")[0].strip()
            length = response.getheader("Content-Length")
            return Reply(response.status, media_type.lower(), data, length)
        except http.client.BadStatusLine as exc:
            if not str(exc.args[0] if exc.args else "").startswith("\x00\x00"):
                raise
            return self.request_h2c(method, path, body, headers)  # a SETTINGS frame
        finally:
            conn.close()

    def request_h2c(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> Reply:
        """The same request over HTTP/2 with prior knowledge (its headers and body)."""
        host, port = self.target.host, self.target.port
        conn = h2.connection.H2Connection(h2.config.H2Configuration(header_encoding="utf-8"))
        fields: dict[str, str] = {}
        data = b""
        with socket.create_connection((host, port), timeout=30) as sock:
            conn.initiate_connection()
            pseudo = [(":method", method), (":scheme", "http"), (":authority", f"{host}:{port}")]
            sent = [*pseudo, (":path", path), *((k.lower(), v) for k, v in headers.items())]
            conn.send_headers(1, sent, end_stream=body is None)
            if body is not None:
                conn.send_data(1, body, end_stream=True)
            ended = False
            while not ended:
                sock.sendall(conn.data_to_send())
                chunk = sock.recv(65536)
                assert chunk, "the server closed the connection"
                for event in conn.receive_data(chunk):
                    if isinstance(event, h2.events.ResponseReceived):
                        fields.update((str(k), str(v)) for k, v in event.headers)
                    elif isinstance(event, h2.events.DataReceived):
                        data += event.data
                        conn.acknowledge_received_data(event.flow_controlled_length, 1)
                    ended = ended or isinstance(event, h2.events.StreamEnded)
        media_type = fields.get("content-type", "").split(";")[0].strip()
        return Reply(int(fields[":status"]), media_type.lower(), data, fields.get("content-length"))

    def require(self, route: str) -> None:
        if route not in self.spec.routes:
            pytest.skip(f"{self.spec.name} does not serve {route} (see its server.toml)")


@pytest.fixture(scope="module", params=HTTP_SERVERS)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    name: str = request.param
    with start_target(CATALOG, name, bind=BIND) as target:
        yield Server(CATALOG.get(name), target)


def refused(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=5).close()
    except ConnectionRefusedError as exc:
        return exc.errno == errno.ECONNREFUSED
    return False


def test_it_listens_on_the_bind_address_only(server: Server) -> None:
    assert server.target.host == BIND
    assert server.request("GET", "/health").status == 200
    assert refused("127.0.0.1", server.target.port)


@pytest.mark.parametrize("name", [*HTTP_SERVERS, *GRPC_SERVERS, "mosquitto"])
def test_without_a_bind_it_listens_on_127_0_0_1_only(name: str) -> None:
    with start_target(CATALOG, name) as target:
        assert target.host == "127.0.0.1"
        socket.create_connection(("127.0.0.1", target.port), timeout=5).close()
        assert refused(BIND, target.port)


@pytest.mark.parametrize("route", sorted(EXPECTED))
def test_get_route_serves_the_exact_workload(server: Server, route: str) -> None:
    server.require(route)
    media_type, body = EXPECTED[route]
    # Twice: a caching proxy answers the second from its cache, which must match too.
    for attempt in ("first", "repeated"):
        reply = server.request("GET", route)
        assert reply.status == 200, f"{attempt} GET {route}: status {reply.status}"
        assert reply.media_type == media_type, f"{attempt} GET {route}"
        assert len(reply.body) == len(body), f"{attempt} GET {route}: size"
        # Declared, not chunked: load generators count bytes and frame by Content-Length.
        assert reply.content_length == str(len(body)), f"{attempt} GET {route}: Content-Length"
        assert reply.body == body, f"{attempt} GET {route}: body differs"


def test_quicksort_is_the_sorted_seed_array(server: Server) -> None:
    server.require("/quicksort")
    reply = server.request("GET", "/quicksort")
    assert json.loads(reply.body) == sorted(QUICKSORT_INPUT)


def test_health_answers_200(server: Server) -> None:
    assert server.request("GET", server.spec.health).status == 200


def test_unknown_path_is_404(server: Server) -> None:
    assert server.request("GET", "/no-such-route").status == 404


def test_telemetry_accepts_a_message(server: Server) -> None:
    server.require("/telemetry")
    reply = server.request("POST", "/telemetry", json.dumps(GOOD_MESSAGE).encode())
    assert reply.status == 201, reply.body
    assert reply.media_type == "application/json"
    stored = json.loads(reply.body)["stored"]
    assert isinstance(stored, int) and stored >= 1


@pytest.mark.parametrize("body", BAD_MESSAGES.values(), ids=BAD_MESSAGES.keys())
def test_telemetry_rejects_bad_input_and_keeps_serving(server: Server, body: bytes) -> None:
    server.require("/telemetry")
    reply = server.request("POST", "/telemetry", body)
    assert reply.status == 400, reply.body
    assert reply.media_type == "application/json"
    assert "error" in json.loads(reply.body)
    after = server.request("GET", "/health")
    assert after.status == 200, "the server stopped answering after a bad request"
    server.target.check_alive()


# ---------------------------------------------------------------- the stream servers' routes


def upgraded(server: Server, path: str) -> socket.socket:
    """A WebSocket on ``path`` of the server, its 101 checked (the reference codec's key)."""
    sock = socket.create_connection((server.target.host, server.target.port), timeout=10)
    key = "dGhlIHNhbXBsZSBub25jZQ=="
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 101"), head
    assert f"Sec-WebSocket-Accept: {wf.accept_key(key)}".lower().encode() in head.lower()
    return sock


def messages(sock: socket.socket, count: int) -> list[bytes]:
    decoder, assembler, got = wf.FrameDecoder(masked=False), wf.Assembler(), []
    while len(got) < count:
        for frame in decoder.feed(sock.recv(65536)):
            out = assembler.add(frame)
            if isinstance(out, wf.Message):
                got.append(out.payload)
    return got


def send(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(wf.encode(wf.Frame(wf.Opcode.TEXT, payload), b"\x01\x02\x03\x04"))


@pytest.mark.parametrize("name", [s.name for s in CATALOG if "streams" in s.extra])
def test_stream_servers_echo_relay_and_stream_events(name: str) -> None:
    with start_target(CATALOG, name) as target:
        server = Server(CATALOG.get(name), target)
        echo = upgraded(server, "/ws")
        send(echo, b"hello")
        assert messages(echo, 1) == [b"hello"]
        sub, pub = upgraded(server, "/relay?role=sub"), upgraded(server, "/relay?role=pub")
        send(pub, b"one")
        send(pub, b"two")
        assert messages(sub, 2) == [b"one", b"two"]
        stream = socket.create_connection((target.host, target.port), timeout=10)
        stream.sendall(b"GET /events?rate=50 HTTP/1.1\r\nHost: x\r\nLast-Event-ID: 41\r\n\r\n")
        data = b""
        while b"id: 42" not in data:
            data += stream.recv(4096)
        assert b"text/event-stream" in data.split(b"\r\n\r\n")[0].lower()
        for sock in (echo, sub, pub, stream):
            sock.close()
