"""``webperf.staged``: one server instance at several levels in turn, a measurement per
stage. The server's latency rises with the requests it has in flight, so a closed loop
of more users shows the step in each stage's own figures, and an arrival-rate stage
shows its rate."""

from __future__ import annotations

import json

import pytest
from tests.e2e.asyncio_server import asyncio_server

pytest_plugins = ["pytester"]

# each request waits 2 ms for every request in flight (itself included)
CROWDED_SERVER = asyncio_server(
    r"""
    inflight = 0
    with open("starts.txt", "a") as starts:  # one line each time the server starts
        starts.write(f"{os.getpid()}\n")

    async def respond():
        global inflight
        inflight += 1
        try:
            await asyncio.sleep(0.002 * inflight)
        finally:
            inflight -= 1
        return b"ok"
    """
)

TEST = """
import sys

def test_stages(webperf):
    target = webperf.process([sys.executable, "server.py"], name="crowded")
    users = webperf.staged(target, "/work", stages=[("2s", 2), ("2s", 16)], warmup="0.5s")
    assert [m.name for m in users] == [
        "GET /work stage 1/2: 2 users, 2s", "GET /work stage 2/2: 16 users, 2s"
    ]
    rates = webperf.staged(
        target, "/work", stages=[(1.5, 50), ("1.5s", 150)], arrival_rate=True, concurrency=40,
        warmup=0,
    )
    assert [m.workload.arrival_rate for m in rates] == [50, 150]
"""


def test_stages_show_the_step_on_one_instance(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(server=CROWDED_SERVER, test_stages=TEST)
    result = pytester.runpytest_subprocess(
        "-p", "no:locust", "--webperf-json=out.json", "--webperf-repeat=1", timeout=180
    )
    result.assert_outcomes(passed=1)
    tests = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert [t["name"] for t in tests] == [
        "GET /work stage 1/2: 2 users, 2s",
        "GET /work stage 2/2: 16 users, 2s",
        "GET /work stage 1/2: 50/s, 1.5s",
        "GET /work stage 2/2: 150/s, 1.5s",
    ]
    reps = [t["repetitions"][0] for t in tests]
    few, many, slow, fast = reps
    assert (few["concurrency"], many["concurrency"]) == (2, 16)
    # 2 users: ~4 ms a request; 16: ~32 ms (the server's own arithmetic), so the
    # closed loop's throughput barely moves while latency steps up many times over
    assert many["latency"]["p50_ms"] > 3 * few["latency"]["p50_ms"], (few, many)
    assert few["latency"]["p50_ms"] < 20, few["latency"]
    assert slow["rps"] == pytest.approx(50, rel=0.15), slow["rps"]
    assert fast["rps"] == pytest.approx(150, rel=0.15), fast["rps"]
    # every stage ran against the one process: started once, never restarted
    assert len((pytester.path / "starts.txt").read_text().split()) == 1
    for rep in reps:
        assert rep["requests"] > 0 and rep["errors"] == 0 and rep["series"], rep
