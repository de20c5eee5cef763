"""Differential CPU profiles end to end: a throwaway git repository with a Python server
whose two handlers' costs are constants in its source; the change makes one of them
costlier; ``--webperf-against`` profiles both sides of every pair (py-spy) and names it.
The same for a C server in a container (``tests/servers/costly``, its ``burn`` kept a
function of its own), the change doubling the work ``burn`` does per request (perf).

Skipped where py-spy cannot attach (it needs root here); a run with no profiler is a
unit test (``tests/unit/test_profiler.py``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.costly import copy_costly, set_cost
from tests.e2e.gitrepo import commit_base, git

from pytest_webperf.profiling.capture import perf_problem, py_spy_path

pytest_plugins = ["pytester"]

SERVER = """
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ALPHA = {alpha}  # loop iterations per request in alpha()
BETA = {beta}


def alpha():
    total = 0
    for i in range(ALPHA):
        total += i * i
    return total


def beta():
    total = 0
    for i in range(BETA):
        total ^= i * 3
    return total


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 65536  # one write per response (flushed after each), no delayed ACK
    disable_nagle_algorithm = True

    def do_GET(self):
        if self.path == "/work":
            alpha()
            beta()
        body = b"ok\\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
"""

TEST = """
import sys


def test_work(webperf):
    target = webperf.process([sys.executable, "server.py"], name="two-handlers")
    webperf.http(target, path="/work")
"""

RUN = [
    "-p",
    "no:locust",
    "-W",
    "error",
    "--webperf-concurrency=2",
    "--webperf-duration=2s",
    "--webperf-warmup=0.5s",
    "--webperf-repeat=5",
    "--webperf-against-budget=1s",  # the minimum pairs only
    "--webperf-json=p.json",
]

needs_a_profiler = pytest.mark.skipif(
    py_spy_path() is None or os.geteuid() != 0, reason="py-spy (as root) profiles Python here"
)


@pytest.fixture
def repo(pytester: pytest.Pytester) -> Path:
    pytester.makepyfile(server=SERVER.format(alpha=20_000, beta=20_000), test_profile=TEST)
    commit_base(pytester.path)
    return pytester.path


def entry_of(repo: Path) -> Any:
    (entry,) = json.loads((repo / "p.json").read_text())["tests"]
    return entry


@needs_a_profiler
def test_the_function_made_slower_is_named_first(pytester: pytest.Pytester, repo: Path) -> None:
    (repo / "server.py").write_text(SERVER.format(alpha=20_000, beta=60_000))
    git(repo, "commit", "-q", "-am", "beta three times the work")
    result = pytester.runpytest_subprocess(*RUN, "--webperf-against=HEAD~1", timeout=300)
    assert "Traceback" not in result.stdout.str()
    profile = entry_of(repo)["profile"]
    assert "why" not in profile, profile
    assert profile["tools"] == ["py-spy"] and profile["pairs"] == 5
    changes = profile["changes"]
    assert changes and changes[0]["function"] == "beta (server.py)", changes
    assert changes[0]["change_us"] > 0 and changes[0]["low_us"] > 0
    assert not any(c["function"].startswith("alpha ") for c in changes), changes
    assert "alpha (server.py)" in profile["base_folded"]
    assert "beta (server.py)" in profile["change_folded"]
    # under the failed or undecided check: the function and its change per request
    result.stdout.fnmatch_lines(
        ["*profile (B - A, CPU per request):*", "*+* µs/req  beta (server.py)"]
    )


@needs_a_profiler
def test_an_a_a_run_flags_no_function(pytester: pytest.Pytester, repo: Path) -> None:
    result = pytester.runpytest_subprocess(
        *RUN, "--webperf-against=HEAD", "--webperf-against-always", timeout=300
    )
    assert "Traceback" not in result.stdout.str()
    profile = entry_of(repo)["profile"]
    assert "why" not in profile, profile
    assert profile["tested"] >= 2  # alpha and beta at least were looked at
    assert profile["changes"] == [], profile["changes"]


C_TEST = """
def test_work(webperf):
    target = webperf.server("costly")
    webperf.http(target, path="/work")
"""


@pytest.mark.skipif(perf_problem() is not None, reason=f"perf cannot sample: {perf_problem()}")
def test_a_c_function_made_slower_is_named_first(pytester: pytest.Pytester, engine: None) -> None:
    copy_costly(pytester.path, 300)
    source = pytester.path / "servers" / "costly" / "server.c"
    text = source.read_text()
    assert "static void burn(" in text
    # a function of its own in the profile, not inlined into the request handler
    source.write_text(
        text.replace("static void burn(", "__attribute__((noinline)) static void burn(")
    )
    pytester.makepyfile(test_c=C_TEST)
    commit_base(pytester.path)
    set_cost(pytester.path, 600)
    git(pytester.path, "commit", "-q", "-am", "burn twice the work")
    result = pytester.runpytest_subprocess(*RUN, "--webperf-against=HEAD~1", timeout=600)
    assert "Traceback" not in result.stdout.str()
    profile = entry_of(pytester.path)["profile"]
    assert "why" not in profile, profile
    assert profile["tools"] == ["perf"]
    changes = profile["changes"]
    assert changes and changes[0]["function"] == "burn (costly)", changes
    assert changes[0]["low_us"] > 0
    # about 300 work units more per request: a few hundred µs, whatever the machine
    assert 50 < changes[0]["change_us"] < 5000, changes[0]
    result.stdout.fnmatch_lines(
        ["*profile (B - A, CPU per request):*", "*+* µs/req  burn (costly)"]
    )
