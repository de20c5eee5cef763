"""End-to-end tests: real containers, real swarms, through a pytest subprocess."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from pytest_webperf.errors import EngineUnavailable
from pytest_webperf.targets.engine import docker_client


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in item.nodeid or item.nodeid.startswith("e2e/"):
            item.add_marker(pytest.mark.e2e)


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
