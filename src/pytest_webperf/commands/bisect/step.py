"""One step of ``webperf bisect``: a commit checked out into a temporary ``git
worktree`` (the user's working tree, index and branches are never touched; the
worktree is removed after the step), the given webperf tests run there in A/B mode
against GOOD, and the step read from pytest's exit status and JSON report:

- a regression (or a broken run): the commit is **bad**;
- every test passed (or was unchanged): **good**; so is an undecided test whose every
  open check's interval lies wholly on the good side of its threshold;
- otherwise, undecided after the A/B budget: ``search.py`` reads it against the hunted
  effect (``commands/bisect/hunt.py``), or skips it.

pytest arguments that name the user's checkout (``--rootdir``, ``-c``, test paths, any
absolute path inside the repository) are mapped into the step's worktree, so every
step measures its own commit; the options bisect sets itself are refused in one line.
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

from pytest_webperf.errors import OptionError, WebperfError
from pytest_webperf.gate.metrics import METRICS

SKIP_EXIT = 125  # what `git bisect run` takes for "cannot test this commit"
Outcome = Literal["good", "bad", "skip"]


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
    rule: str = "the tests' checks"  # what decided the outcome
    undecided: bool = False  # skipped as undecided after its budget (more pairs may decide)
    report: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False, timeout=120
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise OptionError(f"git {args[0]} failed: {lines[-1] if lines else done.returncode}")
    return done.stdout.strip()


@contextlib.contextmanager
def worktree(repo: Path, commit: str) -> Iterator[Path]:
    """``commit`` checked out (detached) in a temporary worktree, removed at exit."""
    parent = Path(tempfile.mkdtemp(prefix="webperf-bisect-"))
    tree = parent / "tree"
    git(repo, "worktree", "add", "--detach", "--quiet", str(tree), commit)
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

    def step(outcome: Outcome, why: str, rule: str = "the tests' checks") -> Step:
        undecided = outcome == "skip" and returncode == SKIP_EXIT
        return Step(commit, outcome, why, changes, rule, undecided, report)

    if zero and returncode in (0, SKIP_EXIT):
        return step("skip", f"a side measured zero, not trusted ({', '.join(zero)})")
    if returncode == 0:
        return step("good", summary or "passed")
    if returncode == SKIP_EXIT and _settled_good(report):
        return step("good", f"credibly within them ({summary})", "the tests' thresholds")
    if returncode == SKIP_EXIT:
        return step("skip", f"undecided after its budget ({summary})")
    if returncode == 1 and any(s in ("regression", "broken") for s in statuses):
        return step("bad", summary)
    if returncode == 1:
        return step("skip", f"tests failed without a webperf verdict: {tail}")
    raise WebperfError(f"webperf bisect: pytest exited {returncode} at {commit.short}: {tail}")


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


# options bisect sets at every step: given again, they would undo it
OWN_OPTIONS = {
    "--webperf-against": "every step is measured against GOOD",
    "--webperf-json": "each step's report is read from bisect's own",
    "--webperf-undecided-exit": "bisect reads an undecided step from it",
}
# options whose value is a path the run writes: kept in the user's checkout, not mapped
OUTPUT_OPTIONS = ("--webperf-html", "--webperf-markdown", "--webperf-history", "--junitxml")


def refuse_own(args: Sequence[str]) -> None:
    """One line for an option that bisect sets itself."""
    for arg in args:
        option = arg.split("=", 1)[0]
        if option in OWN_OPTIONS:
            raise OptionError(
                f"webperf bisect: {option} is bisect's own ({OWN_OPTIONS[option]}): "
                "leave it out of the arguments after --"
            )


def map_arguments(args: Sequence[str], repo: Path, tree: Path, cwd: Path) -> list[str]:
    """The pytest arguments as they run in the step's worktree ``tree``: every absolute
    path inside the user's checkout ``repo`` (``--rootdir=``, ``-c``, test paths with
    their ``::`` ids, ``--webperf-servers=``, ...) points to the same place in ``tree``;
    a relative one already does (the step runs in the same directory of ``tree``). The
    paths of reports the run writes are made absolute in the user's checkout (from
    ``cwd``, where bisect was started) instead."""
    mapped: list[str] = []
    output_next = False
    for arg in args:
        if output_next:
            mapped.append(str((cwd / arg).resolve()))
            output_next = False
            continue
        option, eq, value = arg.partition("=")
        if option in OUTPUT_OPTIONS:
            if eq:
                mapped.append(f"{option}={(cwd / value).resolve()}")
            else:
                mapped.append(arg)
                output_next = True
            continue
        if eq and option.startswith("--"):
            mapped.append(f"{option}={_map_path(value, repo, tree)}")
        elif arg.startswith("-c") and len(arg) > 2:
            mapped.append(f"-c{_map_path(arg[2:], repo, tree)}")
        else:
            mapped.append(_map_path(arg, repo, tree))
    return mapped


def _map_path(text: str, repo: Path, tree: Path) -> str:
    """An absolute path inside ``repo`` (a test id's ``::`` part kept) in ``tree``."""
    path, sep, rest = text.partition("::")
    if not path.startswith("/"):
        return text
    resolved = Path(path).resolve()
    if not resolved.is_relative_to(repo):
        return text
    return f"{tree / resolved.relative_to(repo)}{sep}{rest}"


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
            *map_arguments(pytest_args, repo, tree, repo / where),
            f"--webperf-against={good}",
            f"--webperf-undecided-exit={SKIP_EXIT}",
            f"--webperf-json={report_path}",
        ]
        done = subprocess.run(argv, cwd=tree / where, capture_output=True, text=True, check=False)
        report = json.loads(report_path.read_text()) if report_path.exists() else None
        tail = _tail(done.stderr if done.returncode in (3, 4) else done.stdout + done.stderr)
        return judge_step(commit, done.returncode, report, tail)


StepRunner = Callable[[Path, Commit, str, Sequence[str], Path], Step]


DEFAULT_BUDGET_S = 60.0  # --webperf-against-budget's default: an undecided step gets twice


def more_pairs(report: Mapping[str, Any] | None, budget: float | None) -> list[str]:
    """The options that measure an undecided step again with twice the pairs it ran
    (at least) and twice the budget."""
    pairs = [
        int(test.get("against", {}).get("pairs") or 0) for test in (report or {}).get("tests", ())
    ]
    most = max(pairs, default=0)
    options = [f"--webperf-against-budget={2 * (budget or DEFAULT_BUDGET_S):g}s"]
    return [f"--webperf-repeat={2 * most}", *options] if most else options
