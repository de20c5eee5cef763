"""The bisection's search, its reading of a step's pytest run, and its git plumbing (a
real throwaway repository; the steps' measurements are stood in for)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf import cli
from pytest_webperf.commands.bisect import search as bisection
from pytest_webperf.commands.bisect import step as one_step
from pytest_webperf.commands.bisect.search import Search
from pytest_webperf.commands.bisect.step import Commit, Step, judge_step
from pytest_webperf.errors import OptionError, WebperfError
from pytest_webperf.models.measurement import Measurement, Verdict
from pytest_webperf.run.finish import undecided_exit


def commits(n: int) -> list[Commit]:
    return [Commit(f"{i:040x}", f"commit {i}") for i in range(n)]


def run(search: Search, first_bad: int, undecidable: frozenset[int] = frozenset()) -> list[int]:
    measured = []
    while (index := search.next()) is not None:
        measured.append(index)
        outcome: one_step.Outcome = (
            "skip" if index in undecidable else "bad" if index >= first_bad else "good"
        )
        search.record(index, Step(search.commits[index], outcome, ""))
    return measured


@given(st.integers(1, 40), st.data())
def test_the_search_finds_the_first_bad_commit_in_log2_steps(n: int, data: Any) -> None:
    first_bad = data.draw(st.integers(0, n - 1))
    search = Search(commits(n))
    measured = run(search, first_bad)
    assert search.suspects() == [search.commits[first_bad]]
    assert len(measured) <= max(1, n - 1).bit_length()
    assert n - 1 not in measured  # BAD is bad as given


@given(st.integers(2, 30), st.data())
def test_skipped_commits_leave_exactly_the_suspects_that_cannot_be_told_apart(
    n: int, data: Any
) -> None:
    first_bad = data.draw(st.integers(0, n - 1))
    undecidable = frozenset(data.draw(st.sets(st.integers(0, n - 1))))
    search = Search(commits(n))
    run(search, first_bad, undecidable)
    suspects = [int(c.subject.split()[1]) for c in search.suspects()]
    assert first_bad in suspects
    assert all(s in undecidable for s in suspects[:-1])  # all but the last were skipped
    assert suspects == list(range(suspects[0], suspects[-1] + 1))  # one contiguous run
    # the commit before the suspects was measured good (or is GOOD itself)
    assert search.good == suspects[0] - 1


def report(*checks: dict[str, Any], status: str = "undecided") -> dict[str, Any]:
    return {
        "tests": [
            {
                "nodeid": "t.py::t",
                "name": "GET /",
                "verdict": {"status": status, "checks": list(checks)},
            }
        ]
    }


def check(metric: str, change: float, low: float, high: float, outcome: str) -> dict[str, Any]:
    return {
        "check": f"{metric}:10%",
        "metric": metric,
        "change": change,
        "low": low,
        "high": high,
        "threshold": 0.10,
        "outcome": outcome,
    }


COMMIT = Commit("a" * 40, "subject")


def test_a_step_is_read_from_pytests_exit_status_and_report() -> None:
    slower = report(check("cpu_per_req", 0.3, 0.2, 0.4, "fail"), status="regression")
    bad = judge_step(COMMIT, 1, slower, "1 failed")
    assert bad.outcome == "bad"
    assert bad.changes == ("t.py::t [GET /]: cpu_per_req:10% +30.0% (+20.0%..+40.0%) fail",)
    assert judge_step(COMMIT, 0, report(status="pass"), "").outcome == "good"
    noisy = report(check("cpu_per_req", 0.01, -0.2, 0.25, "undecided"))
    assert judge_step(COMMIT, 125, noisy, "").outcome == "skip"
    # an errored test (no regression among the verdicts) is not taken for a slower commit
    assert judge_step(COMMIT, 1, report(status="pass"), "1 error").outcome == "skip"
    with pytest.raises(WebperfError, match="pytest exited 4 at aaaaaaaaaa: bad option"):
        judge_step(COMMIT, 4, None, "bad option")


def test_a_pass_with_a_side_measured_zero_is_not_trusted() -> None:
    zero = check("cpu_per_req", -1.0, -1.0, -1.0, "improved")
    zero["current"], zero["baseline"] = 0.0, 1400.0
    step = judge_step(COMMIT, 0, report(zero, status="pass"), "")
    assert step.outcome == "skip" and "a side measured zero" in step.why
    errors = check("errors", -1.0, -1.0, -1.0, "pass")  # a count of zero is a count
    errors["current"], errors["baseline"] = 0.0, 2.0
    assert judge_step(COMMIT, 0, report(errors, status="pass"), "").outcome == "good"


@pytest.mark.parametrize(
    ("metric", "low", "high", "good"),
    [
        ("cpu_per_req", -0.05, 0.08, True),  # credibly under +10 %
        ("cpu_per_req", -0.05, 0.12, False),  # could be +12 %
        ("rps", -0.08, 0.05, True),  # rps: worse is down
        ("rps", -0.12, 0.05, False),
    ],
)
def test_an_undecided_step_credibly_within_its_thresholds_is_good(
    metric: str, low: float, high: float, good: bool
) -> None:
    step = judge_step(COMMIT, 125, report(check(metric, 0.0, low, high, "undecided")), "")
    assert step.outcome == ("good" if good else "skip")


def verdict(status: str) -> Measurement:
    m = Measurement.__new__(Measurement)
    object.__setattr__(m, "verdict", Verdict(status))
    return m


def test_the_undecided_exit_status_applies_only_when_asked_and_undecided() -> None:
    assert undecided_exit([verdict("undecided")], 0) is None
    assert undecided_exit([verdict("pass"), verdict("undecided")], 125) == 125
    assert undecided_exit([verdict("pass"), verdict("unchanged")], 125) is None


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    for number in range(1, 6):
        (tmp_path / "cost.txt").write_text(f"{100 if number < 3 else 130}\n")
        (tmp_path / "n.txt").write_text(f"{number}\n")
        git(tmp_path, "add", "-A")
        git(tmp_path, "commit", "-q", "-m", f"commit {number}")
    return tmp_path


def test_bisect_measures_each_commit_in_a_worktree_of_its_own(repo: Path) -> None:
    (repo / "n.txt").write_text("uncommitted\n")  # the user's work in progress
    seen: list[tuple[str, str]] = []

    def step(top: Path, commit: Commit, good: str, args: Sequence[str], where: Path) -> Step:
        with one_step.worktree(top, commit.sha) as tree:
            cost = int((tree / where / "cost.txt").read_text())
            seen.append((commit.subject, (tree / "n.txt").read_text().strip()))
        return Step(commit, "bad" if cost > 100 else "good", f"cost {cost}")

    said: list[str] = []
    search = bisection.bisect(repo, "HEAD~4", "HEAD", ["-k", "x"], say=said.append, step=step)
    assert [c.subject for c in search.suspects()] == ["commit 3"]
    assert said[0].startswith("webperf bisect: 4 commit(s) after HEAD~4")
    assert "step: " in said[1] and " -> " in said[2]
    assert all(n == subject.split()[1] for subject, n in seen)  # each its own tree
    assert (repo / "n.txt").read_text() == "uncommitted\n"
    assert len(git(repo, "worktree", "list").splitlines()) == 1
    lines = bisection.conclusion(search)
    assert lines[0].startswith("first bad commit: ") and "commit 3" in lines[0]


def test_good_must_be_an_ancestor_of_bad(repo: Path) -> None:
    with pytest.raises(OptionError, match=r"GOOD \(HEAD\) is not an ancestor of BAD \(HEAD~2\)"):
        bisection.commits_between(repo, "HEAD", "HEAD~2")
    with pytest.raises(OptionError, match="git knows no commit"):
        bisection.commits_between(repo, "nope", "HEAD")


def test_outside_a_repository_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match="webperf bisect needs a git repository"):
        bisection.bisect(tmp_path, "HEAD~1", "HEAD", [], say=print)


def test_arguments_after_the_double_dash_are_for_bisect_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        cli.main(["list", "--", "-k", "x"])
    assert "arguments after -- are for webperf bisect only: -k x" in capsys.readouterr().err


def test_paths_into_the_users_checkout_are_mapped_into_the_steps_worktree(
    tmp_path: Path,
) -> None:
    repo, tree = tmp_path / "repo", tmp_path / "wt"
    repo.mkdir()
    mapped = one_step.map_arguments(
        [
            f"--rootdir={repo}",
            "-c",
            str(repo / "pytest.ini"),
            f"-c{repo / 'tox.ini'}",
            f"{repo / 'tests' / 'test_perf.py'}::test_work[c2]",
            "tests/test_perf.py",  # relative: the step runs in the same directory of its tree
            "/elsewhere/servers",  # outside the checkout: as given
            "--webperf-html",
            "report.html",  # a report the run writes: in the user's checkout
            "-k",
            "work",
        ],
        repo.resolve(),
        tree,
        repo / "tests",
    )
    assert mapped == [
        f"--rootdir={tree}",
        "-c",
        str(tree / "pytest.ini"),
        f"-c{tree / 'tox.ini'}",
        f"{tree / 'tests' / 'test_perf.py'}::test_work[c2]",
        "tests/test_perf.py",
        "/elsewhere/servers",
        "--webperf-html",
        str((repo / "tests" / "report.html").resolve()),
        "-k",
        "work",
    ]


@pytest.mark.parametrize("option", ["--webperf-against=HEAD", "--webperf-json=x.json"])
def test_options_bisect_sets_itself_are_refused_in_one_line(option: str, repo: Path) -> None:
    with pytest.raises(
        OptionError, match=f"webperf bisect: {option.split('=', maxsplit=1)[0]} is bisect's own"
    ):
        bisection.bisect(repo, "HEAD~4", "HEAD", [option], say=print)


def hunted_report(low: float, high: float, outcome: str, change: float = 0.0) -> dict[str, Any]:
    status = "regression" if outcome == "fail" else "undecided"
    return report(check("cpu_per_req", change, low, high, outcome), status=status)


def test_bad_is_measured_first_and_undecided_steps_read_against_its_effect(repo: Path) -> None:
    # commit 5 (BAD): +21 %, failed; commit 3: undecided, short of it; commit 4: spans
    # both at first, consistent with the effect when measured with twice the budget
    runs: dict[str, list[tuple[int, dict[str, Any]]]] = {
        "commit 5": [(1, hunted_report(0.144, 0.28, "fail", 0.21))],
        "commit 3": [(125, hunted_report(-0.103, 0.161, "undecided"))],
        "commit 4": [
            (125, hunted_report(-0.05, 0.35, "undecided")),
            (125, hunted_report(0.04, 0.30, "undecided", 0.17)),
        ],
    }
    asked: list[tuple[str, tuple[str, ...]]] = []

    def step(top: Path, commit: Commit, good: str, args: Sequence[str], where: Path) -> Step:
        asked.append((commit.subject, tuple(args)))
        code, data = runs[commit.subject].pop(0)
        return judge_step(commit, code, data, "")

    said: list[str] = []
    search = bisection.bisect(
        repo, "HEAD~4", "HEAD", ["-k", "x"], say=said.append, step=step, budget=30
    )
    assert [subject for subject, _ in asked] == ["commit 5", "commit 3", "commit 4", "commit 4"]
    assert asked[-1][1] == ("-k", "x", "--webperf-against-budget=60s")  # no pairs in the report
    assert [c.subject for c in search.suspects()] == ["commit 4"]
    text = "\n".join(said)
    assert "(BAD: the effect hunted)" in said[1]
    assert "hunting: t.py::t [GET /]: cpu_per_req:10% +21.0%" in text
    assert (
        "-> good (the hunted effect): cpu_per_req:10% -10.3..+16.1% against +21.0% (+14.4..+28.0%)"
        in text
    )
    assert "measured again, --webperf-against-budget=60s" in text
    assert "-> bad (the hunted effect): " in text


def test_an_undecided_step_is_measured_again_with_twice_its_pairs() -> None:
    ran = report(status="undecided")
    ran["tests"][0]["against"] = {"pairs": 3}
    assert one_step.more_pairs(ran, 20.0) == [
        "--webperf-repeat=6",
        "--webperf-against-budget=40s",
    ]


def test_a_bad_that_is_not_slower_leaves_nothing_to_hunt(repo: Path) -> None:
    def step(top: Path, commit: Commit, good: str, args: Sequence[str], where: Path) -> Step:
        return judge_step(commit, 0, report(status="pass"), "")

    search = bisection.bisect(repo, "HEAD~4", "HEAD", [], say=lambda line: None, step=step)
    (line,) = bisection.conclusion(search)
    assert line.startswith("BAD (HEAD, ") and line.endswith("nothing to hunt")
