"""A local command as the target: measured, sampled, its logs shown when it fails."""

from __future__ import annotations

import json
import time

import pytest
from tests.e2e.hello_server import HELLO_SERVER

pytest_plugins = ["pytester"]
TEST = """
import sys

def test_local(webperf):
    target = webperf.process([sys.executable, "server.py"], name="local-py")
    result = webperf.http(target, path="/hello")
    assert result.requests > 0

def test_broken(webperf):
    webperf.process([sys.executable, "-c", "import sys; print('no port for me'); sys.exit(7)"])
"""


def test_a_local_command_is_measured_and_a_broken_one_shows_its_output(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(server=HELLO_SERVER, test_local=TEST)
    result = pytester.runpytest_subprocess(
        "-p",
        "no:locust",
        "-W",
        "error",
        "--webperf-concurrency=5",
        "--webperf-duration=1s",
        "--webperf-warmup=0.5s",
        "--webperf-repeat=3",
        "--webperf-restart-every=2",
        "--webperf-json=out.json",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*TargetError: python* is not running (exit code 7)*",
            "*no port for me*",
            "test_local[[]c5[]] * GET /hello * local-py * 5 *",
        ]
    )
    (test,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    runs = test["repetitions"]
    # restarted after two repetitions: the third ran on a second process instance
    assert [run["instance"] for run in runs] == [0, 0, 1]
    for run in runs:
        assert test["target"]["kind"] == "process" and run["errors"] == 0
        assert {s["part"] for s in run["resources"]} == {"local-py"}  # sampled by its tree
        assert all(s["cgroup_cpu_percent"] is None for s in run["resources"])


NOT_FOUND_SERVER = """
import http.server, os

class NotFound(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_error(404)  # logged to stderr, so it is in the target's output

print("starting the 404 server", flush=True)
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), NotFound).serve_forever()
"""
NOT_FOUND_TEST = """
import sys

def test_not_found(webperf):
    webperf.process([sys.executable, "server.py"], name="nf")
"""


def test_a_health_path_answering_404_fails_at_once_naming_status_and_output(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(server=NOT_FOUND_SERVER, test_nf=NOT_FOUND_TEST)
    started = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "no:locust", "-W", "error")
    elapsed = time.monotonic() - started
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*TargetError: nf: the health check /health on 127.0.0.1:* answered HTTP 404*",
            "*starting the 404 server*",
            '*"GET /health HTTP/1.1" 404*',
        ]
    )
    assert elapsed < 30  # generous: the wait it replaces was the full 60 s startup timeout
