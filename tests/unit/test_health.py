"""The health probe: which answers mean "not yet" and which mean "never"."""

from __future__ import annotations

import http.server
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_webperf.errors import TargetError
from pytest_webperf.targets.base import (
    LOWEST_PORT,
    Probe,
    classify_status,
    ephemeral_range,
    free_port,
    health_failure,
    probe_http,
    wait_healthy,
)
from pytest_webperf.targets.catalog import ServerSpec
from pytest_webperf.targets.container import Limits, ServerContainer
from pytest_webperf.targets.process import ProcessTarget


@pytest.mark.parametrize("status", [200, 204, 299])
def test_2xx_is_ready(status):
    assert classify_status(status) == Probe(ready=True, final=False, detail=f"HTTP {status}")


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 410, 499])
def test_4xx_is_a_definitive_no(status):
    answer = classify_status(status, "Nope")
    assert not answer.ready and answer.final and answer.detail == f"HTTP {status} Nope"


@pytest.mark.parametrize("status", [301, 408, 429, 500, 502, 503])
def test_3xx_5xx_and_try_later_keep_waiting(status):
    answer = classify_status(status)
    assert not answer.ready and not answer.final


def test_connection_refused_keeps_waiting():
    answer = probe_http("127.0.0.1", free_port(), "/health", timeout=1.0)
    assert answer == Probe(ready=False, final=False, detail="connection refused")


def test_a_free_port_is_below_the_ephemeral_range_and_bindable():
    """No outgoing connection can take it as its local end before the target binds it."""
    for _ in range(20):
        port = free_port(ephemeral=(32768, 60999))
        assert LOWEST_PORT <= port < 32768
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # free: nothing holds it


def test_no_room_below_the_range_falls_back_to_the_kernels_choice():
    port = free_port(ephemeral=(1024, 65535))
    assert 1024 <= port <= 65535


def test_the_ephemeral_range_is_read_and_a_bad_file_gives_linuxs_default(tmp_path: Path):
    given = tmp_path / "range"
    given.write_text("40000\t50000\n")
    assert ephemeral_range(given) == (40000, 50000)
    given.write_text("garbage")
    assert ephemeral_range(given) == (32768, 60999)
    assert ephemeral_range(tmp_path / "absent") == (32768, 60999)


class _Status(http.server.BaseHTTPRequestHandler):
    status = 404

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def not_found_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Status)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_probe_reads_the_status(not_found_server):
    answer = probe_http("127.0.0.1", not_found_server, "/health")
    assert answer == Probe(ready=False, final=True, detail="HTTP 404 Not Found")


def _answers(*probes: Probe) -> Iterator[Probe]:
    yield from probes
    while True:
        yield probes[-1]


def test_wait_stops_at_ready():
    starting = Probe(ready=False, final=False, detail="connection refused")
    ready = Probe(ready=True, final=False, detail="HTTP 200 OK")
    answers = _answers(starting, starting, ready)
    assert wait_healthy(lambda: next(answers), lambda: None, 30, interval=0) == ready


def test_a_brief_404_while_starting_is_forgiven():
    not_found = Probe(ready=False, final=True, detail="HTTP 404")
    ready = Probe(ready=True, final=False, detail="HTTP 200")
    answers = _answers(not_found, ready)
    assert wait_healthy(lambda: next(answers), lambda: None, 30, settle=5, interval=0) == ready


def test_a_lasting_404_ends_the_wait_before_the_timeout():
    not_found = Probe(ready=False, final=True, detail="HTTP 404")
    answers = _answers(not_found)
    answer = wait_healthy(lambda: next(answers), lambda: None, 3600, settle=0.05, interval=0.01)
    assert answer == not_found


def test_the_timeout_message_says_the_last_answer():
    answer = Probe(ready=False, final=False, detail="connection refused")
    message = health_failure("srv", "/health on 127.0.0.1:1", answer, 60, "fix it")
    assert message == (
        "srv did not become healthy within 60s "
        "(health check: /health on 127.0.0.1:1; last answer: connection refused)"
    )


NOT_FOUND_SERVER = """
import http.server, os

class NotFound(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_error(404)  # logged to stderr: the target's output

print("hello from the server", flush=True)
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), NotFound).serve_forever()
"""


def test_a_process_answering_404_fails_at_once_with_its_output(tmp_path: Path):
    script = tmp_path / "server.py"
    script.write_text(NOT_FOUND_SERVER)
    target = ProcessTarget([sys.executable, str(script)], name="srv", startup_timeout=30)
    with pytest.raises(TargetError) as caught:
        target.__enter__()
    message = str(caught.value)
    assert "srv: the health check /health on 127.0.0.1:" in message
    assert "answered HTTP 404 Not Found, not 2xx" in message
    assert "hello from the server" in message
    assert '"GET /health HTTP/1.1" 404' in message
    assert target.process is not None and target.process.poll() is not None  # stopped


def test_a_catalogue_container_answering_404_fails_naming_its_server_toml(
    not_found_server, monkeypatch, tmp_path: Path
):
    spec = ServerSpec(name="srv", directory=tmp_path / "srv", startup_timeout=3600)
    part = ServerContainer(spec, "srv", "webperf/srv:x", not_found_server, {}, Limits())
    monkeypatch.setattr(part, "check_alive", lambda: None)
    monkeypatch.setattr(part, "logs", lambda: "srv: started")
    with pytest.raises(TargetError) as caught:
        part._wait_healthy()
    message = str(caught.value)
    where = f"/health on 127.0.0.1:{not_found_server}"
    assert f"srv: the health check {where} answered HTTP 404" in message
    assert str(tmp_path / "srv" / "server.toml") in message and "srv: started" in message
