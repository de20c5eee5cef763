"""An arrival rate against a real server (k6's constant arrival rate): requests are due
at the rate whatever the server does, sent by idle users, connections opened only
when the server falls behind; a cap too small for the rate says so."""

from __future__ import annotations

import json
import statistics

import pytest
from tests.e2e.asyncio_server import STALLING_SERVER

pytest_plugins = ["pytester"]

TEST = """
import sys

import pytest

@pytest.mark.webperf(concurrency={users}, duration="{duration}", warmup="0.5s", repeat=1)
def test_arriving(webperf):
    target = webperf.process(
        [sys.executable, "server.py"],
        name="server",
        env={{"STALL_AFTER": "{stall}", "DELAY": "{delay}"}},
    )
    result = webperf.http(target, path="/work", arrival_rate={rate})
    assert result.name == "GET /work arriving {rate}/s"
"""


@pytest.fixture(params=["lean", "native"])
def user(request: pytest.FixtureRequest) -> str:
    """Both generators run arrival rates: each test runs on each."""
    return f"--webperf-user={request.param}"


def run(
    pytester: pytest.Pytester, *args: str, **settings: object
) -> tuple[pytest.RunResult, dict, dict]:
    settings = {"stall": 0, "delay": 0, **settings}
    pytester.makepyfile(server=STALLING_SERVER, test_arriving=TEST.format(**settings))
    result = pytester.runpytest_subprocess(
        "-p", "no:locust", "-W", "error", "--webperf-json=out.json", *args, timeout=180
    )
    (entry,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    (rep,) = entry["repetitions"]
    return result, entry, rep


def test_a_fast_server_needs_few_of_the_users(pytester: pytest.Pytester, user: str) -> None:
    result, entry, rep = run(pytester, user, users=50, duration="3s", rate=200)
    result.assert_outcomes(passed=1)
    assert rep["rps"] == pytest.approx(200, rel=0.15), rep["rps"]
    assert entry["workload"]["arrival_rate"] == 200
    # one connection answers in well under the 5 ms between requests: the users beyond
    # the first few were never needed, so never connected. A machine busy with other
    # work stalls server and generator for tens of ms now and then, and the requests
    # due meanwhile each need a user: never more than arrive during the slowest one
    peak, opened = rep["users_peak"], rep["users_opened"]
    assert 1 <= peak <= opened < 50, rep
    assert peak <= max(10, 2 + 200 * rep["latency"]["max_ms"] / 1000), (peak, rep["latency"])
    assert not any("not kept" in n for n in rep["notes"]), rep["notes"]
    result.stdout.fnmatch_lines(
        [
            "*[[]GET /work arriving 200/s[]] rep 1: paced: p99 * ms from the intended start, "
            "service p99 * ms, sends p99 * ms late; users: * busy at most, * opened of 50"
        ]
    )


def test_a_stall_adds_users_and_every_due_request_is_sent(
    pytester: pytest.Pytester, user: str
) -> None:
    # 100/s for 4 s: ~400 requests; the server stalls 1 s at about the middle, and
    # the ~100 requests due during it each find an idle user, which connects
    result, _, rep = run(pytester, user, users=200, duration="4s", rate=100, stall=2.5)
    result.assert_outcomes(passed=1)
    assert 340 <= rep["requests"] <= 460, rep["requests"]  # due requests, none dropped
    assert rep["errors"] == 0, rep["error_kinds"]
    assert rep["users_peak"] > 50, rep  # about rate x stall
    assert rep["users_opened"] >= rep["users_peak"]
    assert rep["latency"]["p99_ms"] > 500, rep["latency"]  # from the intended start
    assert rep["schedule_lag"]["p50_ms"] < 50, rep["schedule_lag"]  # sent on time


def test_a_cap_too_small_for_the_rate_says_so(pytester: pytest.Pytester, user: str) -> None:
    # 200/s asked of 2 users on a server taking 50 ms a request: ~40/s at most
    result, entry, rep = run(pytester, user, users=2, duration="2s", rate=200, delay=0.05)
    result.assert_outcomes(passed=1)
    assert rep["rps"] < 60, rep["rps"]
    assert rep["users_peak"] == rep["users_opened"] == 2, rep
    (missed,) = [n for n in rep["notes"] if "the arrival schedule was not kept" in n]
    generator = statistics.fmean(s["cpu_percent"] for s in rep["generator"] if s["t"] >= 0)
    if generator >= 80:  # another process starved it: flagged, never a pass
        assert missed.startswith("generator-bound:"), missed
        assert entry["verdict"]["status"] == "generator-bound", entry["verdict"]
    else:
        assert "all 2 users were busy at once: the cap (concurrency) limited the rate" in missed
    result.stdout.fnmatch_lines(["*arriving 200/s*the arrival schedule was not kept*"])


def test_generator_processes_share_the_rate(pytester: pytest.Pytester, user: str) -> None:
    """Two worker processes, each taking every other due time: still 200/s in total,
    and the users each needed add up."""
    result, _, rep = run(pytester, user, "--webperf-workers=2", users=20, duration="3s", rate=200)
    result.assert_outcomes(passed=1)
    assert rep["rps"] == pytest.approx(200, rel=0.15), rep["rps"]
    roles = sorted(p["role"] for p in rep["generator_processes"])
    assert roles == ["master", "worker0", "worker1"], roles
    assert 2 <= rep["users_peak"] <= rep["users_opened"] <= 20, rep  # one or more each
