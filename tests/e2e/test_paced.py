"""Paced HTTP against a real server: latency from the intended start shows a stall
that the service time hides; a generator that cannot keep its schedule is flagged."""

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
def test_paced(webperf):
    target = webperf.process(
        [sys.executable, "server.py"], name="stalling", env={{"STALL_AFTER": "{stall}"}}
    )
    result = webperf.http(target, path="/work", {pacing})
    assert result.name == "{name}"
"""


def run(pytester: pytest.Pytester, **settings: object) -> tuple[pytest.RunResult, dict]:
    if "interval" in settings:
        interval = settings.pop("interval")
        settings.update(pacing=f'interval="{interval}"', name=f"GET /work every {interval}")
    pytester.makepyfile(server=STALLING_SERVER, test_paced=TEST.format(**settings))
    result = pytester.runpytest_subprocess(
        "-p", "no:locust", "-W", "error", "--webperf-json=out.json", timeout=180
    )
    (entry,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    return result, entry


def test_a_stall_shows_in_latency_from_the_intended_start_not_in_service_time(
    pytester: pytest.Pytester,
) -> None:
    # 4 users, one request each per 10 ms: 400 requests/s, ~1,200 measured; the stall
    # at 1.5 s delays the ~400 requests due during it but holds only 4 on the wire
    result, entry = run(pytester, users=4, duration="3s", interval="10ms", stall=1.5)
    result.assert_outcomes(passed=1)
    (rep,) = entry["repetitions"]
    assert 900 <= rep["requests"] <= 1300, rep["requests"]  # the pace, not flat out
    assert rep["latency"]["p99_ms"] > 500, rep["latency"]  # intended start: the stall
    assert rep["service"]["p99_ms"] < 100, rep["service"]  # send to response: hidden
    assert rep["service"]["max_ms"] > 900  # the few requests that were on the wire
    assert rep["schedule_lag"]["p50_ms"] < 5  # most requests were sent on time
    assert not any("not kept" in n for n in rep["notes"]), rep["notes"]
    result.stdout.fnmatch_lines(
        [
            "*[[]GET /work every 10ms[]] rep 1: paced: p99 * ms from the intended start, "
            "service p99 * ms, sends p99 * ms late"
        ]
    )


def test_a_generator_behind_its_schedule_is_flagged_not_passed(
    pytester: pytest.Pytester,
) -> None:
    # 200 users at one request per millisecond each: 200,000 requests/s asked of one
    # generator process, which sends a few tens of thousands
    result, entry = run(pytester, users=200, duration="2s", interval="1ms", stall=0)
    result.assert_outcomes(passed=1)
    (rep,) = entry["repetitions"]
    (missed,) = [n for n in rep["notes"] if "the paced schedule was not kept" in n]
    assert rep["schedule_lag"]["p99_ms"] > 5
    generator = statistics.fmean(s["cpu_percent"] for s in rep["generator"] if s["t"] >= 0)
    if generator >= 80:  # saturated, as it is on an otherwise idle machine
        assert missed.startswith("generator-bound:"), missed
        assert entry["verdict"]["status"] == "generator-bound", entry["verdict"]
        result.stdout.fnmatch_lines(["*generator-bound*"])
    else:  # other work took its CPU: the note says the generator was not the limit
        assert "the generator was not saturated" in missed, (generator, missed)


def test_a_total_rate_is_shared_by_the_users(pytester: pytest.Pytester) -> None:
    """wrk2's constant throughput: 300 requests/s over 6 users, whatever the server does."""
    result, entry = run(
        pytester, users=6, duration="3s", pacing="rate=300", name="GET /work at 300/s", stall=0
    )
    result.assert_outcomes(passed=1)
    (rep,) = entry["repetitions"]
    assert rep["rps"] == pytest.approx(300, rel=0.1), rep["rps"]
    assert entry["workload"]["interval_s"] == pytest.approx(6 / 300)
