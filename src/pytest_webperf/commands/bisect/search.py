"""``webperf bisect GOOD BAD [-- pytest args]``: the first commit that made a test slower.

BAD is measured against GOOD first: the checks it fails, and by how much, are the
effect hunted (``commands/bisect/hunt.py``). Then the commits between are searched as ``git bisect``
does, each measured against GOOD in a worktree of its own (``step.py``). A step its
test's checks leave undecided is read against the hunted effect (good when credibly
short of it, bad when it excludes no change), measured once more with twice the pairs
when it is consistent with both, and only then skipped, as ``git bisect skip``. Each
step says which rule decided it.

The end names the first bad commit and its change, or, where skipped steps leave it
open, the commits it could not tell apart. ``pytest --webperf-against=REF
--webperf-undecided-exit=125`` gives ``git bisect run`` the same three answers.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_webperf.commands.bisect import hunt
from pytest_webperf.commands.bisect.step import (
    Commit,
    Outcome,
    Step,
    StepRunner,
    git,
    more_pairs,
    refuse_own,
    run_step,
)
from pytest_webperf.errors import OptionError
from pytest_webperf.targets import gitref


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
    nothing: str | None = None  # why there is nothing to hunt (BAD not worse than GOOD)

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
    listed = git(
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


def bisect(
    directory: Path,
    good: str,
    bad: str,
    pytest_args: Sequence[str],
    *,
    say: Callable[[str], None],
    step: StepRunner = run_step,
    budget: float | None = None,
) -> Search:
    """Search the commits after ``good`` up to ``bad`` for the first regression, saying
    every step: BAD against GOOD first (the effect hunted), then the search; the
    returned search names the suspects (or why there was nothing to hunt)."""
    refuse_own(pytest_args)
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
        f"{bad}; each measured against {good} (A/B, the tests' own checks), BAD first"
    )

    def measure(index: int) -> Step:
        commit = commits[index]
        say(f"step: {commit.describe()}{' (BAD: the effect hunted)' if index == last else ''}")
        result = _read_against_hunt(step(repo, commit, good_sha, pytest_args, where), hunts)
        if result.undecided:
            more = more_pairs(result.report, budget)
            say(f"  undecided ({result.why}): measured again, {' '.join(more)}")
            again = step(repo, commit, good_sha, [*pytest_args, *more], where)
            result = _read_against_hunt(again, hunts)
        for line in result.changes:
            say(f"  {line}")
        say(f"  -> {result.outcome} ({result.rule}): {result.why}")
        return result

    last = len(commits) - 1
    hunts: list[hunt.Hunted] = []
    first = measure(last)
    search.steps[last] = first
    if first.outcome != "bad":
        search.nothing = (
            f"BAD ({bad}, {commits[last].short}) is not slower than GOOD by the tests' checks "
            f"({first.outcome}: {first.why}): nothing to hunt"
        )
        return search
    hunts = hunt.hunted(first.report)
    if hunts:
        say("hunting: " + "; ".join(h.describe() for h in hunts))
    while (index := search.next()) is not None:
        search.record(index, measure(index))
    return search


def _read_against_hunt(result: Step, hunts: Sequence[hunt.Hunted]) -> Step:
    """An undecided step read against the hunted effect (as it was when none is)."""
    if not result.undecided or not hunts:
        return result
    reading, why = hunt.judge(result.report, list(hunts))
    outcome: Outcome = "skip" if reading == "undecided" else reading
    return Step(
        result.commit,
        outcome,
        why,
        result.changes,
        "the hunted effect",
        reading == "undecided",
        result.report,
    )


def conclusion(search: Search) -> list[str]:
    """The end of the output: the first bad commit and its change, or the suspects."""
    if search.nothing is not None:
        return [search.nothing]
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
