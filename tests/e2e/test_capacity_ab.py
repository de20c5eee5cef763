"""``capacity:10%`` in an A/B run: a search on each side, probes interleaved. The change
makes the server handle half as many requests at once (2 worker threads instead of 4,
each holding a request 10 ms): its capacity halves, and the gate says so."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tests.e2e.costly import copy_costly
from tests.e2e.gitrepo import commit_base
from tests.e2e.test_known_capacity import POOL_SERVER

pytest_plugins = ["pytester"]

TEST = """
import sys

def test_pool(webperf):
    target = webperf.process([sys.executable, "server.py"], name="pool", env={"HOLD": "0.01"})
    webperf.capacity(
        target, "/work", slo="p99<100ms", start=100, tolerance=0.25, duration="1s", warmup="0.5s"
    )
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        check=True,
    )


def server(threads: int) -> str:
    return POOL_SERVER.replace('int(os.environ["THREADS"])', str(threads))


def test_half_the_capacity_is_caught_by_the_capacity_gate(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(server=server(4), test_pool=TEST)
    git(pytester.path, "init", "-q")
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-q", "-m", "base")
    pytester.makepyfile(server=server(2))
    git(pytester.path, "commit", "-q", "-am", "half the threads")
    result = pytester.runpytest_subprocess(
        "-p",
        "no:locust",
        "--webperf-against=HEAD~1",
        "--webperf-compare-fail=capacity:10%",
        "--webperf-json=ab.json",
        timeout=240,
    )
    result.assert_outcomes(failed=1)
    (entry,) = json.loads((pytester.path / "ab.json").read_text())["tests"]
    change, base = entry["capacity"], entry["base_capacity"]
    assert change["status"] == base["status"] == "found", (change, base)
    assert change["rate"] == pytest.approx(200, rel=0.3), change["probes"]
    assert base["rate"] == pytest.approx(400, rel=0.3), base["probes"]
    assert entry["verdict"]["status"] == "regression", entry["verdict"]
    (check,) = entry["verdict"]["checks"]
    assert check["metric"] == "capacity" and check["outcome"] == "fail", check
    assert check["high"] < -0.1, check  # even the interval's best end is down > 10 %
    result.stdout.fnmatch_lines(["*capacity * req/s * against the base (A)'s * req/s*"])


UNCHANGED = """
def test_costly(webperf):
    webperf.capacity(webperf.server("costly"), "/work", slo="p99<100ms", duration="1s")
"""


def test_a_server_unchanged_since_the_base_is_not_searched(
    pytester: pytest.Pytester, engine: None
) -> None:
    copy_costly(pytester.path, 300)
    pytester.makepyfile(test_costly=UNCHANGED)
    commit_base(pytester.path)
    result = pytester.runpytest_subprocess(
        "-p", "no:locust", "--webperf-against=HEAD", "--webperf-json=u.json", "-rs", timeout=120
    )
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED * webperf: unchanged: costly is the same as at HEAD*"])
    (entry,) = json.loads((pytester.path / "u.json").read_text())["tests"]
    assert entry["verdict"]["status"] == "unchanged" and "capacity" not in entry
    assert entry["repetitions"] == []
