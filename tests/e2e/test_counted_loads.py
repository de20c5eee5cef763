"""Counted, whatever a real API sends: a weighted mix sent in its fixed order (the same on
both sides: an A/A passes, a change to one endpoint fails), a unary gRPC method and an h2c
request on the native loop, exactly N each; and what cannot be counted refused in one line
from the argument, the marker and the option, never measured timed in silence."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.e2e import h2_server
from tests.e2e.counted_servers import C_SERVER, C_TARGET, check, entries
from tests.e2e.gitrepo import commit_base, git
from tests.e2e.hello_server import HELLO_SERVER
from tests.e2e.options import SHORT

from pytest_webperf.profiling import valgrind
from pytest_webperf.swarm.hotloop import h2_unavailable

pytestmark = pytest.mark.skipif(valgrind.problem() is not None, reason=str(valgrind.problem()))

MIX_TESTS = (
    """
import pytest
"""
    + C_TARGET
    + """

def mix(webperf):
    return [webperf.request("/work", weight=9), webperf.request("/other", weight=1)]


@pytest.mark.webperf(compare_fail="instructions_per_req:1%,errors:0")
def test_same(webperf):
    webperf.http(c_server(webperf, "same"), mix=mix(webperf), count=True, requests=100)


@pytest.mark.webperf(compare_fail="instructions_per_req:1%,errors:0")
def test_work(webperf):
    webperf.http(c_server(webperf, "work"), mix=mix(webperf), count=True, requests=100)
"""
)


def test_a_mix_is_counted_in_the_same_order_on_both_sides(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc) on this machine: the server cannot be built")
    monkeypatch.setenv("WEBPERF_BUILD_CACHE", str(tmp_path / "builds"))
    repo = pytester.path
    (repo / ".gitignore").write_text("build/\nstdout\nstderr\nrunpytest-*\n*.json\n")
    (repo / "server.c").write_text(C_SERVER)
    for knobs in ("same", "work"):
        (repo / f"{knobs}.h").write_text("/* the defaults */\n")
    pytester.makepyfile(test_mix=MIX_TESTS)
    commit_base(repo)
    (repo / "work.h").write_text("#define WORK 2060\n")  # /work alone 3 % more work
    git(repo, "commit", "-q", "-am", "more work in one endpoint")
    run = ["--webperf-against=HEAD~1", "--webperf-against-always", "--webperf-json=mix.json"]
    result = pytester.runpytest_subprocess(*SHORT, *run, "-rA")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*a mix of 2 sent in its fixed order by weight*"])
    found = entries(repo / "mix.json")
    same = check(found["test_same"], "instructions_per_req")
    assert same["outcome"] == "pass" and same["detectable"] < 0.01, same
    work = check(found["test_work"], "instructions_per_req")
    assert work["outcome"] == "fail" and 0.015 < work["change"] < 0.035, work
    for entry in found.values():  # every window the same 90 and 10, on both sides
        reps = entry["repetitions"] + entry["base_repetitions"]
        sent = [{k: v["requests"] for k, v in r["counts"]["endpoints"].items()} for r in reps]
        assert sent == [{"/work": 90, "/other": 10}] * len(reps), sent
        assert all(r["errors"] == 0 for r in reps)


HTTP2_TESTS = """
import sys

import pytest


def server(webperf):
    return webperf.process([sys.executable, "h2_server.py", "grpc"], name="grpc", health="grpc")


@pytest.mark.webperf(compare_fail="instructions_per_req:1%", profile="off")
def test_grpc(webperf):
    webperf.grpc(server(webperf), "/test.Svc/Echo", message=b"hello", count=True, requests=40)


@pytest.mark.webperf(compare_fail="instructions_per_req:1%", profile="off")
def test_h2c(webperf):
    webperf.http(server(webperf), "/plain", http2=True, count=True, requests=40)
"""


def test_a_unary_grpc_method_and_an_h2c_request_are_counted(pytester: pytest.Pytester) -> None:
    if (why := h2_unavailable()) is not None:
        pytest.skip(why)
    pytester.makepyfile(h2_server=h2_server.source(), test_h2=HTTP2_TESTS)
    result = pytester.runpytest_subprocess(*SHORT, "--webperf-json=h2.json", "-rA")
    result.assert_outcomes(passed=2)
    found = entries(pytester.path / "h2.json")
    for name in ("test_grpc", "test_h2c"):
        reps = found[name]["repetitions"]
        assert len(reps) == 2, name
        for rep in reps:  # exactly 40 calls counted in each window, none failed
            counts = rep["counts"]
            assert counts["requests"] == 40 and rep["errors"] == 0, (name, rep)
            assert counts["instructions_per_req"] > 10_000 and counts["runtime"] == "python"
            assert rep["http2"] is not None, name  # sent over HTTP/2 (h2c)


REFUSED = """
import sys

import pytest


def hello(webperf):
    return webperf.process([sys.executable, "hello_server.py"], name="hello", health="/")


@pytest.mark.webperf(count=True)
def test_marker(webperf):
    webperf.websocket(hello(webperf), "/ws")


def test_argument(webperf):
    webperf.http(hello(webperf), "/", rate=10.0, count=True)


def test_option(webperf):
    webperf.sse(hello(webperf), "/events")
"""


def test_what_cannot_be_counted_is_refused_in_one_line_from_every_path(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(hello_server=HELLO_SERVER, test_refused=REFUSED)
    result = pytester.runpytest_subprocess(*SHORT, "--webperf-count")  # the marker's wins
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            "*webperf.websocket cannot be counted (count=True from @pytest.mark.webperf): the "
            "stream loop sends messages for a duration*",
            "*webperf.http(rate=..., count=True): a counted measurement sends its requests one "
            "after another*",
            "*webperf.sse cannot be counted (count=True from --webperf-count): a server-sent*",
        ]
    )
    assert "Traceback" not in result.stdout.str()
