"""``webperf bisect GOOD BAD [-- pytest args]``: the first commit that made a test slower.

Every step checks a commit out into a temporary ``git worktree`` (the user's working
tree, index and branches are never touched; the worktree is removed after the step),
runs the given webperf tests there in A/B mode against GOOD (``--webperf-against``,
the test's own checks) and reads the verdicts from the JSON report:

- a regression (or a broken run): the commit is **bad**;
- every test passed (or was unchanged): **good**; so is an undecided test whose every
  open check's interval lies wholly on the good side of its threshold (the change is
  credibly smaller than the regression hunted, at the level a failure needs, though
  too noisy for the gate's power rule);
- otherwise a verdict that stayed undecided after the A/B budget had added its pairs:
  the step is **skipped** (reported), and the search goes on around it, as
  ``git bisect skip``.

The end names the first bad commit and its change, or, where skipped steps leave it
open, the commits it could not tell apart. ``pytest --webperf-against=REF
--webperf-undecided-exit=125`` gives ``git bisect run`` the same three answers.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pytest_webperf import gitref
from pytest_webperf.errors import OptionError, WebperfError
from pytest_webperf.metrics import METRICS
from pytest_webperf.models import Measurement

UNDECIDED = "undecided"
SKIP_EXIT = 125  # what `git bisect run` takes for "cannot test this commit"
Outcome = Literal["good", "bad", "skip"]


def undecided_exit(measurements: Sequence[Measurement], code: int) -> int | None:
    """The exit status of a run in which no test failed: ``code``
    (``--webperf-undecided-exit``) when a verdict was undecided, else None (unchanged)."""
    if code == 0:
        return None
    if any(m.verdict is not None and m.verdict.status == UNDECIDED for m in measurements):
        return code
    return None


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str

    @property
    def short(self) -> str:
        return self.sha[:10]

    def describe(self) -> str:
        return f"{self.short} {self.subject}"


@dataclass(frozen=True)
class Step:
    """One commit measured against GOOD."""

    commit: Commit
    outcome: Outcome
    why: str  # one line: the verdicts, or what went wrong
    changes: tuple[str, ...] = ()  # per test and check: the change with its interval


@dataclass
class Search:
    """The state of a bisection over ``commits`` (oldest first, after GOOD, BAD last):
    everything before ``good`` (an index, -1 for GOOD itself) is good, ``bad`` and after
    is bad; ``skipped`` could not be decided."""

    commits: Sequence[Commit]
    good: int = -1
    bad: int = -1
    skipped: set[int] = field(default_factory=set)
    steps: dict[int, Step] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.bad < 0:
            self.bad = len(self.commits) - 1

    def next(self) -> int | None:
        """The commit to measure next: the untested one nearest the middle of the open
        range; None when the range holds nothing left to measure."""
        open_ = [i for i in range(self.good + 1, self.bad) if i not in self.skipped]
        if not open_:
            return None
        middle = (self.good + self.bad) / 2
        return min(open_, key=lambda i: (abs(i - middle), i))

    def record(self, index: int, step: Step) -> None:
        self.steps[index] = step
        outcome = step.outcome
        if outcome == "good":
            self.good = index
        elif outcome == "bad":
            self.bad = index
        else:
            self.skipped.add(index)

    def suspects(self) -> list[Commit]:
        """The commits the first bad one may be: the first bad alone, or the skipped
        ones before it in the open range and it."""
        between = [i for i in range(self.good + 1, self.bad) if i in self.skipped]
        return [self.commits[i] for i in (*between, self.bad)]


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False, timeout=120
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise OptionError(f"git {args[0]} failed: {lines[-1] if lines else done.returncode}")
    return done.stdout.strip()


def commits_between(repo: Path, good: str, bad: str) -> list[Commit]:
    """The commits after ``good`` up to ``bad``, oldest first, along the first parents."""
    good_sha = gitref.resolve_commit(repo, good)
    bad_sha = gitref.resolve_commit(repo, bad)
    ancestor = subprocess.run(
        ["git", "-C", str(repo), "merge-base", "--is-ancestor", good_sha, bad_sha],
        capture_output=True,
        check=False,
    )
    if ancestor.returncode != 0:
        raise OptionError(f"webperf bisect: GOOD ({good}) is not an ancestor of BAD ({bad})")
    listed = _git(
        repo, "rev-list", "--reverse", "--first-parent", "--format=%H %s", f"{good_sha}..{bad_sha}"
    )
    commits = []
    for line in listed.splitlines():
        if line.startswith("commit "):
            continue
        sha, _, subject = line.partition(" ")
        commits.append(Commit(sha, subject))
    if not commits:
        raise OptionError(f"webperf bisect: no commits between GOOD ({good}) and BAD ({bad})")
    return commits


@contextlib.contextmanager
def worktree(repo: Path, commit: str) -> Iterator[Path]:
    """``commit`` checked out (detached) in a temporary worktree, removed at exit."""
    parent = Path(tempfile.mkdtemp(prefix="webperf-bisect-"))
    tree = parent / "tree"
    _git(repo, "worktree", "add", "--detach", "--quiet", str(tree), commit)
    try:
        yield tree
    finally:
        subprocess.run(
            ["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(parent, ignore_errors=True)
        subprocess.run(
            ["git", "-C", str(repo), "worktree", "prune"], capture_output=True, check=False
        )


def _pct(value: float | None) -> str:
    return "?" if value is None else f"{value * 100:+.1f}%"


def changes_of(entry: Mapping[str, Any]) -> list[str]:
    """A test's relative checks as ``cpu_per_req +30.2% (+25.1..+35.4%) fail``."""
    lines = []
    for check in entry.get("verdict", {}).get("checks", ()):
        if check.get("change") is None:
            continue
        interval = (
            f" ({_pct(check['low'])}..{_pct(check['high'])})"
            if check.get("low") is not None and check.get("high") is not None
            else ""
        )
        lines.append(
            f"{check.get('check', check.get('metric'))} {_pct(check['change'])}{interval} "
            f"{check.get('outcome')}"
        )
    return lines


def within(check: Mapping[str, Any]) -> bool:
    """Whether an unsettled relative check's interval lies wholly on the good side of
    its threshold: the change is credibly smaller than the regression hunted (at the
    level the failing side uses), though too noisy for the gate's power rule."""
    low, high, threshold = check.get("low"), check.get("high"), check.get("threshold")
    metric = METRICS.get(str(check.get("metric")))
    if low is None or high is None or threshold is None or metric is None:
        return False
    return bool(high < threshold) if metric.bad == "up" else bool(low > -threshold)


def _settled_good(report: Mapping[str, Any] | None) -> bool:
    """Undecided tests whose every unsettled check is credibly within its threshold."""
    tests = list((report or {}).get("tests", ()))
    open_ = [
        c
        for t in tests
        for c in t.get("verdict", {}).get("checks", ())
        if c.get("outcome") in ("undecided", "not-credible")
    ]
    return bool(tests) and all(within(c) for c in open_)


def unmeasured(report: Mapping[str, Any] | None) -> list[str]:
    """Relative checks (not counts) with a side measured as zero: no server does no work
    per request, so the figure was not measured and no verdict on it is trusted."""
    found = []
    for test in (report or {}).get("tests", ()):
        for check in test.get("verdict", {}).get("checks", ()):
            metric = METRICS.get(str(check.get("metric")))
            if metric is None or metric.count or check.get("change") is None:
                continue
            if check.get("current") == 0 or check.get("baseline") == 0:
                found.append(f"{test.get('nodeid')}: {check.get('check')}")
    return found


def judge_step(
    commit: Commit, returncode: int, report: Mapping[str, Any] | None, tail: str
) -> Step:
    """A step's outcome from pytest's exit status and its JSON report."""
    tests = list((report or {}).get("tests", ()))
    statuses = [t.get("verdict", {}).get("status", "?") for t in tests]
    changes = tuple(
        f"{t.get('nodeid')} [{t.get('name')}]: {c}" for t in tests for c in changes_of(t)
    )
    summary = ", ".join(f"{t.get('nodeid')}: {s}" for t, s in zip(tests, statuses, strict=True))
    zero = unmeasured(report)
    if zero and returncode in (0, SKIP_EXIT):
        why = f"a side measured zero, not trusted ({', '.join(zero)})"
        return Step(commit, "skip", why, changes)
    if returncode == 0:
        return Step(commit, "good", summary or "passed", changes)
    if returncode == SKIP_EXIT and _settled_good(report):
        return Step(commit, "good", f"within the thresholds, credibly ({summary})", changes)
    if returncode == SKIP_EXIT:
        return Step(commit, "skip", f"undecided after its budget ({summary})", changes)
    if returncode == 1 and any(s in ("regression", "broken") for s in statuses):
        return Step(commit, "bad", summary, changes)
    if returncode == 1:
        return Step(commit, "skip", f"tests failed without a webperf verdict: {tail}", changes)
    raise WebperfError(f"webperf bisect: pytest exited {returncode} at {commit.short}: {tail}")


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def run_step(
    repo: Path, commit: Commit, good: str, pytest_args: Sequence[str], where: Path
) -> Step:
    """Measure ``commit`` against ``good`` (full shas) in a worktree of its own."""
    with worktree(repo, commit.sha) as tree, tempfile.TemporaryDirectory() as scratch:
        report_path = Path(scratch) / "step.json"
        argv = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            *pytest_args,
            f"--webperf-against={good}",
            f"--webperf-undecided-exit={SKIP_EXIT}",
            f"--webperf-json={report_path}",
        ]
        done = subprocess.run(argv, cwd=tree / where, capture_output=True, text=True, check=False)
        report = json.loads(report_path.read_text()) if report_path.exists() else None
        tail = _tail(done.stderr if done.returncode in (3, 4) else done.stdout + done.stderr)
        return judge_step(commit, done.returncode, report, tail)


def bisect(
    directory: Path,
    good: str,
    bad: str,
    pytest_args: Sequence[str],
    *,
    say: Callable[[str], None],
    step: Callable[[Path, Commit, str, Sequence[str], Path], Step] = run_step,
) -> Search:
    """Search the commits after ``good`` up to ``bad`` for the first regression, saying
    every step; the returned search names the suspects."""
    try:
        repo = gitref.toplevel(directory)
    except OptionError:
        raise OptionError(
            f"webperf bisect needs a git repository, and {directory} is not inside one "
            "(run it from your repository's checkout)"
        ) from None
    where = directory.resolve().relative_to(repo)
    commits = commits_between(repo, good, bad)
    good_sha = gitref.resolve_commit(repo, good)
    search = Search(commits)
    say(
        f"webperf bisect: {len(commits)} commit(s) after {good} ({good_sha[:10]}) up to "
        f"{bad}; each measured against {good} (A/B, the tests' own checks)"
    )
    while (index := search.next()) is not None:
        commit = commits[index]
        say(f"step: {commit.describe()}")
        result = step(repo, commit, good_sha, pytest_args, where)
        for line in result.changes:
            say(f"  {line}")
        say(f"  -> {result.outcome}: {result.why}")
        search.record(index, result)
    return search


def conclusion(search: Search) -> list[str]:
    """The end of the output: the first bad commit and its change, or the suspects."""
    suspects = search.suspects()
    if len(suspects) == 1:
        first = suspects[0]
        step = search.steps.get(search.bad)
        lines = [f"first bad commit: {first.describe()} ({first.sha})"]
        if step is None:
            lines.append("  (BAD as given: not measured by this search)")
        else:
            lines += [f"  {line}" for line in step.changes if line.endswith(" fail")]
            lines.append(f"  {step.why}")
        return lines
    lines = [
        f"could not tell apart {len(suspects)} commits (undecided steps skipped): the first "
        "bad commit is one of"
    ]
    lines += [
        f"  {c.describe()}{' (skipped: undecided)' if i < len(suspects) - 1 else ''}"
        for i, c in enumerate(suspects)
    ]
    return lines
