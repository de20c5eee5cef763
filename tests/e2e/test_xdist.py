"""pytest-xdist: webperf tests measure one at a time, and the controller reports them all."""

from __future__ import annotations

import json

import pytest
from tests.e2e.hello_server import HELLO_SERVER

pytest_plugins = ["pytester"]
QUICK = [
    "-p",
    "no:locust",
    "-W",
    "error",
    "--webperf-concurrency=2",
    "--webperf-duration=1s",
    "--webperf-warmup=0.5s",
    "--webperf-repeat=1",
]
# Each test logs the wall-clock window of its measurement (the report's series
# times are relative to each run's own start).
TEST = """
import json, os, sys, time
from pathlib import Path

def test_{name}(webperf):
    target = webperf.process([sys.executable, "server.py"], name="{name}-py")
    started = time.time()
    result = webperf.http(target, path="/hello")
    window = {{"start": started, "end": time.time(), "worker": os.environ["PYTEST_XDIST_WORKER"]}}
    Path("window-{name}.json").write_text(json.dumps(window))
    assert result.requests > 0
"""


def test_two_workers_measure_in_turn_and_the_controller_reports_both(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        server=HELLO_SERVER,
        test_one=TEST.format(name="one"),
        test_two=TEST.format(name="two"),
    )
    # as in issue 18: plain -n 2 (--dist load), which hands each worker one of the two
    # tests at the start, so both workers hold a webperf test at once
    result = pytester.runpytest_subprocess(
        *QUICK, "-n", "2", "--webperf-json=out.json", "--webperf-save"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*= webperf =*",
            "test_one[[]c2[]] * GET /hello * one-py * 2 *",
            "test_two[[]c2[]] * GET /hello * two-py * 2 *",
            "webperf: 2 tests measured on workers gw0, gw1; webperf tests run one at a time*",
            "webperf: saved 2 baseline(s) in 2 file(s) under *",
            "webperf: JSON report written to out.json",
        ]
    )
    tests = {t["nodeid"]: t for t in json.loads((pytester.path / "out.json").read_text())["tests"]}
    assert set(tests) == {"test_one.py::test_one[c2]", "test_two.py::test_two[c2]"}
    for name in ("one", "two"):
        test = tests[f"test_{name}.py::test_{name}[c2]"]
        (run,) = test["repetitions"]
        assert test["server"] == f"{name}-py"  # each its own measurement
        assert run["requests"] > 0 and run["errors"] == 0 and run["series"]
    logged = [pytester.path / f"window-{name}.json" for name in ("one", "two")]
    windows = sorted((json.loads(p.read_text()) for p in logged), key=lambda w: w["start"])
    assert {w["worker"] for w in windows} == {"gw0", "gw1"}
    assert windows[0]["end"] <= windows[1]["start"]  # measured in turn, never together
