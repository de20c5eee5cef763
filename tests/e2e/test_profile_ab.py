"""Differential CPU profiles end to end, as users run them: a short run (3 pairs of 3 s)
of a lightly loaded Python server (paced users: about a fifth of a core), one function
made three times costlier. The A/B run names it first; an A/A run names nothing and says
why in one sentence; a run judged against a stored baseline names it too (the baseline
saved with its profile's digest). py-spy samples the Python server.

Skipped where py-spy cannot attach (it needs root here); a run with no profiler is a
unit test (``tests/unit/test_profiler.py``). Node and Tomcat: ``test_profile_jit.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.gitrepo import commit_base, git
from tests.e2e.options import PROFILED
from tests.e2e.profiled_server import SERVER, TEST

from pytest_webperf.profiling.capture import py_spy_path

pytest_plugins = ["pytester"]


RUN = [*PROFILED, "--webperf-warmup=0.5s", "--webperf-repeat=3", "--webperf-json=p.json"]

needs_py_spy = pytest.mark.skipif(
    py_spy_path() is None or os.geteuid() != 0, reason="py-spy (as root) profiles Python here"
)


@pytest.fixture
def repo(pytester: pytest.Pytester) -> Path:
    pytester.makepyfile(server=SERVER.format(rounds=1), test_profile=TEST)
    commit_base(pytester.path)
    return pytester.path


def profile_of(repo: Path) -> Any:
    (entry,) = json.loads((repo / "p.json").read_text())["tests"]
    return entry["profile"]


def three_times_the_checksum(repo: Path) -> None:
    (repo / "server.py").write_text(SERVER.format(rounds=3))


@needs_py_spy
def test_the_function_made_costlier_is_named_first(pytester: pytest.Pytester, repo: Path) -> None:
    three_times_the_checksum(repo)
    git(repo, "commit", "-q", "-am", "checksum walks the page three times")
    result = pytester.runpytest_subprocess(*RUN, "--webperf-against=HEAD~1", timeout=300)
    assert "Traceback" not in result.stdout.str()
    profile = profile_of(repo)
    assert "why" not in profile, profile
    assert profile["tools"] == ["py-spy"] and profile["pairs"] == 3
    changes = profile["changes"]
    assert changes and changes[0]["function"] == "checksum (server.py)", changes
    assert changes[0]["low_us"] > 0 and changes[0]["ratio"] > 1.5
    # sized to the run: py-spy's cap for a fifth of a core (99 Hz would have given ~100)
    assert {r["rate_hz"]["py-spy"] for r in profile["repetitions"]} == {997}
    assert profile["samples"]["A"] >= 500, profile["samples"]
    assert "checksum (server.py)" in profile["change_folded"]
    result.stdout.fnmatch_lines(
        [
            "*profile (B - A, CPU per request; * samples of A, * of B):",
            "*+* µs/req (+*..+*) x*  checksum (server.py)",
        ]
    )


@needs_py_spy
def test_an_a_a_run_names_nothing_and_says_why(pytester: pytest.Pytester, repo: Path) -> None:
    result = pytester.runpytest_subprocess(
        *RUN, "--webperf-against=HEAD", "--webperf-against-always", timeout=300
    )
    assert "Traceback" not in result.stdout.str()
    profile = profile_of(repo)
    assert "why" not in profile, profile
    assert profile["tested"] >= 3  # work, checksum, and the server's own functions
    assert profile["changes"] == [], profile["changes"]
    assert "no function's change is resolved" in profile["unresolved"]
    assert profile["detectable_us"] > 0


@needs_py_spy
def test_a_stored_baseline_failure_names_the_function(
    pytester: pytest.Pytester, repo: Path
) -> None:
    stored = ["--webperf-baseline-dir=baselines", "--webperf-machine-id=here"]
    saved = pytester.runpytest_subprocess(*RUN, *stored, "--webperf-save", timeout=300)
    assert "Traceback" not in saved.stdout.str()
    (baseline,) = (repo / "baselines" / "here").glob("*.json")
    kept = json.loads(baseline.read_text())["measurements"]["GET /work?page=1 every 10ms"]
    digest = kept["latest"]["measurement"]["profile"]
    assert len(digest["repetitions"]) == 3 and digest["tools"] == ["py-spy"]
    assert "profile" not in json.dumps(kept["history"])  # one profile per measurement
    three_times_the_checksum(repo)
    result = pytester.runpytest_subprocess(*RUN, *stored, timeout=300)
    assert "Traceback" not in result.stdout.str()
    profile = profile_of(repo)
    changes = profile["changes"]
    assert changes and changes[0]["function"] == "checksum (server.py)", profile
    # the baseline's rates, replayed: the profiler cost both alike
    assert [r["rate_hz"] for r in profile["repetitions"]] == [
        r["rate_hz"] for r in digest["repetitions"]
    ]
    result.stdout.fnmatch_lines(
        [
            "*cpu_per_req:5%*",  # failed, or undecided on a busy machine
            "*profile (this run - baseline, CPU per request; * samples of the baseline, *",
            "*+* µs/req (+*..+*) x*  checksum (server.py)",
        ]
    )
