"""What a report opens on: how many tests failed, were undecided or passed, against what
(A = a ref and B = the working tree, or the stored baseline), and which measurements to
show first (the failed ones, then the undecided).

It reads the verdicts the gate gave (``verdict.status`` of each entry); a test counts once,
by its worst measurement. Every renderer (the HTML page, the Markdown summary and the
pull request's comment) opens with these words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_webperf.report import verdicts
from pytest_webperf.report.table import MISSING, Entry, status, tests

# The verdicts' statuses as a reader counts them, worst first: failed (the test fails),
# undecided (the checks could not tell), then the rest by name.
OUTCOMES: tuple[tuple[str, frozenset[str]], ...] = (
    ("failed", frozenset({"regression", "broken"})),
    ("undecided", frozenset({"undecided"})),
    ("generator-bound", frozenset({"generator-bound"})),
    ("passed", frozenset({"pass"})),
    ("unchanged", frozenset({"unchanged"})),
    ("without a baseline", frozenset({"no-baseline"})),
)
NO_VERDICT = "without a verdict"


def outcome(entry: Entry) -> str:
    """``failed``, ``undecided``, ``passed``, ... for one measurement's verdict."""
    state = status(entry)
    return next((word for word, states in OUTCOMES if state in states), NO_VERDICT)


def _rank(word: str) -> int:
    words = [w for w, _ in OUTCOMES]
    return words.index(word) if word in words else len(words)


def outcomes_by_test(entries: Sequence[Entry]) -> dict[str, str]:
    """Each test (node id) by its worst measurement's outcome, in report order."""
    found: dict[str, str] = {}
    for entry in entries:
        nodeid, word = str(entry.get("nodeid", MISSING)), outcome(entry)
        if nodeid not in found or _rank(word) < _rank(found[nodeid]):
            found[nodeid] = word
    return found


def counts(entries: Sequence[Entry]) -> list[tuple[str, int]]:
    """``[("failed", 1), ("undecided", 1), ("passed", 3)]``: tests per outcome, worst
    first, the outcomes no test had left out."""
    found = list(outcomes_by_test(entries).values())
    order = [w for w, _ in OUTCOMES] + [NO_VERDICT]
    return [(word, found.count(word)) for word in order if word in found]


def against(report: Mapping[str, Any]) -> str:
    """What the verdicts compared with: ``A = main (1a2b3c4d5e), B = working tree``, the
    stored baseline of this machine, or nothing yet."""
    line = verdicts.run_against(report)
    if line:
        return line
    entries = tests(report)
    judged = [e for e in entries if verdicts.checks(e) and status(e) != "no-baseline"]
    machine = report.get("machine_id")
    where = f" of machine {machine}" if machine else ""
    if judged:
        return f"against the stored baseline{where}"
    if entries and all(status(e) == "no-baseline" for e in entries):
        return f"no stored baseline{where} yet: --webperf-save stores this run as one"
    return ""


def headline(report: Mapping[str, Any]) -> str:
    """``1 failed, 1 undecided, 3 passed of 5 tests · A = main (1a2b3c4d5e), B = working
    tree``; ``nothing was measured`` for an empty report."""
    entries = tests(report)
    if not entries:
        return "nothing was measured"
    tested = outcomes_by_test(entries)
    measured = "" if len(entries) == len(tested) else f" ({len(entries)} measurements)"
    text = ", ".join(f"{n} {word}" for word, n in counts(entries))
    text += f" of {len(tested)} test{'' if len(tested) == 1 else 's'}{measured}"
    base = against(report)
    return f"{text} · {base}" if base else text


def open_first(entries: Sequence[Entry]) -> list[tuple[int, Entry]]:
    """The measurements a reader wants first, with their index in the report: the failed
    ones, then the undecided, each in report order."""
    indexed = list(enumerate(entries))
    failed = [(i, e) for i, e in indexed if outcome(e) == "failed"]
    undecided = [(i, e) for i, e in indexed if outcome(e) == "undecided"]
    return failed + undecided
