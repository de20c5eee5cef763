"""End-to-end tests: real containers, real swarms, through a pytest subprocess."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from pytest_webperf.errors import EngineUnavailable
from pytest_webperf.targets.engine import docker_client

# The modules whose assertions read timed figures (a verdict on rps, CPU per request or
# latency, a capacity, a pace kept, a sampler's accuracy): they run one at a time, alone
# on the machine. The others check what a user sees and what is written (errors counted,
# reports, refusals, wiring) and run on both cores beside each other (scripts/test.sh).
TIMED = {
    "test_against.py",
    "test_against_layouts.py",
    "test_arrival.py",
    "test_bisect.py",
    "test_capacity_ab.py",
    "test_endpoint_gate.py",
    "test_gate.py",
    "test_http2.py",
    "test_known_capacity.py",
    "test_locustfile.py",
    "test_noise.py",
    "test_paced.py",
    "test_profile_ab.py",
    "test_resources.py",
    "test_sampler_containers.py",
    "test_stages.py",
    "test_streams.py",
    "test_study_ordering.py",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in item.nodeid or item.nodeid.startswith("e2e/"):
            item.add_marker(pytest.mark.e2e)
            if item.path.name in TIMED:
                item.add_marker(pytest.mark.timed)


@pytest.fixture(scope="session")
def engine() -> None:
    """Fail (not skip) without an engine: the README's set-up provides one."""
    try:
        docker_client()
    except EngineUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


class _Hello(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = b"<h1>Hello World</h1>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def local_server() -> Iterator[str]:
    """A plain threaded HTTP server on loopback (no engine needed)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
