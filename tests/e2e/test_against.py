"""The A/B gate end to end: a throwaway git repository with a server directory, changed
to be slower, measured against its base with --webperf-against, through pytest.

The server is ``tests/servers/costly`` (a C server whose CPU cost per request is set by
COST_US in its server.toml: deterministic work, never a sleep). The change doubles it:
a regression no noise can hide, so the test can assert on it on a shared machine.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.costly import copy_costly, set_cost
from tests.e2e.gitrepo import commit_base, git
from tests.e2e.options import SHORT, assert_not_failed

COST_US = 300
RUN = [
    *SHORT,
    "--webperf-repeat=3",
    "--webperf-against-budget=1s",  # the minimum pairs only: the test is about wiring
]
TARGET = """
def test_work(webperf):
    target = webperf.server("costly")
    webperf.http(target, path="/work")
"""


@pytest.fixture
def repo(pytester: pytest.Pytester, engine: None) -> Path:
    """A git repository holding the costly server at COST_US and a webperf test."""
    copy_costly(pytester.path, COST_US)
    pytester.makepyfile(test_ab=TARGET)
    commit_base(pytester.path)
    return pytester.path


def report(path: Path) -> Any:
    tests = json.loads(path.read_text())["tests"]
    assert len(tests) == 1, tests
    return tests[0]


def test_a_slower_change_fails_against_its_base(pytester: pytest.Pytester, repo: Path) -> None:
    set_cost(repo, 2 * COST_US)
    git(repo, "commit", "-q", "-am", "slower")
    result = pytester.runpytest_subprocess(
        *RUN, "--webperf-against=HEAD~1", "--webperf-json=ab.json"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*webperf regression:", "*[[]GET /work on *[]] cpu_per_req * -> * (+*%, *% CI +*%..+*%*"]
    )
    assert "Traceback" not in result.stdout.str()
    entry = report(repo / "ab.json")
    assert entry["verdict"]["status"] == "regression"
    against = entry["against"]
    assert against["ref"] == "HEAD~1" and against["commit"] == git(repo, "rev-parse", "HEAD~1")
    assert against["changed"] is True and against["pairs"] >= 3
    assert against["order"][:2] == ["AB", "BA"]
    assert len(entry["base_repetitions"]) == len(entry["repetitions"]) == against["pairs"]
    cpu = next(c for c in entry["verdict"]["checks"] if c["metric"] == "cpu_per_req")
    assert cpu["outcome"] == "fail" and cpu["change"] > 0.5, cpu  # twice the work per request
    assert cpu["current"] > 1.5 * cpu["baseline"]
    assert cpu["detectable"] is not None and 0 < cpu["detectable"] < 0.5


def test_an_unchanged_server_is_not_measured(pytester: pytest.Pytester, repo: Path) -> None:
    result = pytester.runpytest_subprocess(
        *RUN, "--webperf-against=HEAD", "--webperf-json=u.json", "-rs"
    )
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [
            "webperf A/B: A = HEAD (*), B = working tree",
            "test_work[[]c4[]] *GET /work*costly*unchanged",
            "*costly is the same as at HEAD (*) in its image's build context, settings and "
            "dependencies: not measured*",
            "SKIPPED * webperf: unchanged: costly is the same as at HEAD*",
        ]
    )
    entry = report(repo / "u.json")
    assert entry["verdict"]["status"] == "unchanged"
    assert entry["repetitions"] == []


def test_always_measures_an_unchanged_server_and_it_passes(
    pytester: pytest.Pytester, repo: Path
) -> None:
    result = pytester.runpytest_subprocess(
        *RUN,
        "--webperf-against=HEAD",
        "--webperf-against-always",
        "--webperf-compare-fail=cpu_per_req:25%,errors:50%",  # A/A: only what noise cannot move
        "--webperf-json=aa.json",
    )
    assert_not_failed(result, 1)
    entry = report(repo / "aa.json")
    assert entry["verdict"]["status"] in ("pass", "undecided"), entry["verdict"]
    assert entry["against"]["changed"] is False
    # both sides restarted between pairs: each pair ran on its own instances
    assert entry["against"]["instances"] == list(range(entry["against"]["pairs"]))
    assert [run["instance"] for run in entry["repetitions"]] == entry["against"]["instances"]


def test_an_uncommitted_change_is_measured_against_head(
    pytester: pytest.Pytester, repo: Path
) -> None:
    set_cost(repo, 2 * COST_US)  # not committed: B is the working tree
    result = pytester.runpytest_subprocess(*RUN, "--webperf-against=HEAD", "--webperf-json=d.json")
    result.assert_outcomes(failed=1)
    assert report(repo / "d.json")["against"]["dirty"] is True


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--webperf-against=no-such-ref"], "*--webperf-against=no-such-ref: git knows no commit*"),
        (
            ["--webperf-against=HEAD", "--webperf-target-url=http://127.0.0.1:9"],
            "*--webperf-against and --webperf-target-url cannot go together*",
        ),
    ],
)
def test_bad_input_is_a_one_line_usage_error(
    pytester: pytest.Pytester, repo: Path, args: list[str], message: str
) -> None:
    result = pytester.runpytest_subprocess(*RUN, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert "Traceback" not in result.stderr.str()


def test_outside_a_repository_is_a_usage_error(pytester: pytest.Pytester, engine: None) -> None:
    pytester.makepyfile(test_ab=TARGET)
    result = pytester.runpytest_subprocess(*RUN, "--webperf-against=HEAD")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --webperf-against needs a git repository*"])


def test_a_server_new_since_the_base_is_measured_alone(
    pytester: pytest.Pytester, repo: Path
) -> None:
    shutil.copytree(repo / "servers" / "costly", repo / "servers" / "costly2")
    (repo / "servers" / "costly2" / "server.toml").write_text(
        (repo / "servers" / "costly2" / "server.toml")
        .read_text()
        .replace('name = "costly"', 'name = "costly2"')
    )
    pytester.makepyfile(test_ab=TARGET.replace('"costly"', '"costly2"'))
    result = pytester.runpytest_subprocess(*RUN, "--webperf-against=HEAD", "--webperf-json=n.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*costly2 does not exist at HEAD: measured alone*"])
    entry = report(repo / "n.json")
    assert entry["against"]["changed"] is True and "base_repetitions" in entry
    assert len(entry["repetitions"]) == 3 and entry["base_repetitions"] == []
