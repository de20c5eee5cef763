"""The command line every short e2e run starts from: Locust's own plugin off, warnings as
errors, 4 users, 1 s measured after a 0.5 s warm-up (each test adds what it is about)."""

from __future__ import annotations

from typing import Any

SHORT = [
    "-p",
    "no:locust",
    "-W",
    "error",
    "--webperf-concurrency=4",
    "--webperf-duration=1s",
    "--webperf-warmup=0.5s",
]

# The differential profiles' A/B runs: 2 users (each test paces them), 3 s measured, the
# minimum pairs only.
PROFILED = [
    "-p",
    "no:locust",
    "-W",
    "error",
    "--webperf-concurrency=2",
    "--webperf-duration=3s",
    "--webperf-against-budget=1s",
]


def assert_not_failed(result: Any, tests: int) -> None:
    """``tests`` tests ran and none failed: each passed, or was undecided (a comparison a
    shared machine left too noisy to check, pytest's own outcome for it)."""
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("undecided", 0) == tests, outcomes
    assert not outcomes.get("failed") and not outcomes.get("errors"), outcomes
