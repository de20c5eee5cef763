"""A fixed request count (ab's -n) against a real server: exactly N requests per
repetition, ab's figures beside them; a count the time limit cuts says so."""

from __future__ import annotations

import json

import pytest
from tests.e2e.asyncio_server import asyncio_server

pytest_plugins = ["pytester"]

SERVER = asyncio_server(
    """
    def respond():
        return b"0123456789"
    """
)
TEST = """
import sys

import pytest

@pytest.mark.webperf(concurrency=5, repeat=2, duration="{limit}")
def test_count(webperf):
    target = webperf.process([sys.executable, "server.py"], name="counted")
    result = webperf.http(target, path="/ten", requests={count})
    assert result.name == "GET /ten x{count:,}"
"""


def run(pytester: pytest.Pytester, count: int, limit: str) -> tuple[pytest.RunResult, dict]:
    pytester.makepyfile(server=SERVER, test_count=TEST.format(count=count, limit=limit))
    result = pytester.runpytest_subprocess(
        "-p", "no:locust", "-W", "error", "--webperf-json=out.json", timeout=180
    )
    (entry,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    return result, entry


def test_exactly_n_requests_and_abs_figures(pytester: pytest.Pytester) -> None:
    result, entry = run(pytester, 2000, "30s")
    result.assert_outcomes(passed=1)
    assert len(entry["repetitions"]) == 2
    for rep in entry["repetitions"]:
        assert rep["requests"] == 2000 and rep["errors"] == 0, rep["requests"]
        assert rep["requests_asked"] == 2000
        assert sum(s["requests"] for s in rep["series"]) == 2000  # every second counted
        assert rep["time_taken_s"] == rep["duration_s"] < 30  # ended by the count
        assert rep["time_per_request_ms"] == pytest.approx(5 * rep["time_taken_s"] * 1000 / 2000)
        assert rep["transfer_kb_s"] == pytest.approx(20_000 / 1024 / rep["time_taken_s"])
        assert not any("cut at the time limit" in n for n in rep["notes"])
        # a count that ended under 5 s measured its start-up: the repetition says so
        short = [n for n in rep["notes"] if n.startswith("short count: 2,000 requests took")]
        assert len(short) == (rep["time_taken_s"] < 5), rep["notes"]
    result.stdout.fnmatch_lines(
        ["*[[]GET /ten x2,000[]] rep 1: 2,000 of 2,000 requests in * s; time per request *"]
    )
    if entry["repetitions"][0]["time_taken_s"] < 5:
        result.stdout.fnmatch_lines(["*[[]GET /ten x2,000[]] rep 1: * KB/s; short count: *"])


def test_a_count_the_time_limit_cuts_says_so(pytester: pytest.Pytester) -> None:
    result, entry = run(pytester, 10_000_000, "1s")
    result.assert_outcomes(passed=1)
    for rep in entry["repetitions"]:
        assert 0 < rep["requests"] < 10_000_000
        assert rep["duration_s"] == pytest.approx(1.0, abs=0.3)
        assert any("cut at the time limit" in n for n in rep["notes"]), rep["notes"]


SIZED = """
import sys

import pytest

@pytest.mark.webperf(concurrency=5, repeat=1, duration="30s")
def test_sized(webperf):
    target = webperf.process([sys.executable, "server.py"], name="counted")
    count = webperf.requests_lasting(target, 2.0, "/ten")
    webperf.http(target, path="/ten", requests=count)

def test_no_time(webperf):
    target = webperf.process([sys.executable, "server.py"], name="counted")
    webperf.requests_lasting(target, 0, "/ten")
"""


def test_a_count_sized_to_last_lasts(pytester: pytest.Pytester) -> None:
    """``requests_lasting`` times the server with a short probe (not recorded) and sizes
    N to last the seconds asked: the counted repetition then lasts about that long."""
    pytester.makepyfile(server=SERVER, test_sized=SIZED)
    result = pytester.runpytest_subprocess(
        "-p", "no:locust", "-W", "error", "--webperf-json=out.json", timeout=180
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*OptionError: seconds=0, probe=2.0: both are > 0 seconds*"])
    (entry,) = json.loads((pytester.path / "out.json").read_text())["tests"]  # no probe
    (rep,) = entry["repetitions"]
    assert rep["requests"] == rep["requests_asked"] > 5
    assert 1.0 < rep["time_taken_s"] < 20, rep["time_taken_s"]  # 2 s asked, 50 % to spare
