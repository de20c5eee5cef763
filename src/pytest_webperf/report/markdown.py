"""The Markdown summary for CI job summaries (``$GITHUB_STEP_SUMMARY``) and the pull
request's comment (``commands/ci.py`` posts it as it is).

It opens on the answer, as the HTML report does: the headline (``headline``: how many
tests failed, were undecided or passed, against what), then each failed or undecided test
with its checks (change, interval, could detect) and the functions that changed, then
every test's row, the other tests' checks folded in ``<details>``, and the rest. The
columns come from ``table`` and ``verdicts``; this module only renders them as Markdown.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from pytest_webperf.fileio import write_text_atomic
from pytest_webperf.report import counts as counted
from pytest_webperf.report import headline, studies, verdicts
from pytest_webperf.report import table as shared
from pytest_webperf.report.table import (
    MISSING,
    NUMERIC,
    Entry,
    fmt,
    shown,
    status,
    tests,
    verdict_texts,
)

STATUS_MARK = {
    "pass": "✅",
    "regression": "❌",
    "broken": "🛑",
    "undecided": "🟡",
    "generator-bound": "⚠️",
    "unchanged": "💤",
    "no-baseline": "⚪",
}
# The shared columns, what code was measured (a container's image, a process's commit),
# then the baseline (or side A) and the change of each check.
COLUMNS = (*shared.COLUMNS, ("code", shared.code), *verdicts.SUMMARY_COLUMNS)

# GFM lets a backslash escape any ASCII punctuation; these are the ones that could start
# emphasis, code, links, HTML or strike-through, or end a table cell.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|&~])")


def md_escape(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _verdict_cell(entry: Entry) -> str:
    state = status(entry)
    return MISSING if state is None else f"{STATUS_MARK.get(state, '')} {md_escape(state)}".strip()


def table(entries: Sequence[Entry]) -> list[str]:
    """The summary table: a header, its rule, one row per measurement (the columns with a
    figure for some measurement)."""
    columns = shown(entries, COLUMNS)
    names = [name for name, _ in columns] + ["verdict"]
    rule = ["---:" if name in NUMERIC else "---" for name in names]
    lines = [_row([md_escape(n) for n in names]), _row(rule)]
    for entry in entries:
        cells = [md_escape(render(entry)) for _, render in columns]
        lines.append(_row([*cells, _verdict_cell(entry)]))
        for row in shared.endpoints(entry):  # a request mix: a row per endpoint under it
            cells = shared.endpoint_cells(row, names, indent="↳ ")
            lines.append(_row([md_escape(c) for c in cells]))
    return lines


def _checks(entry: Entry) -> list[str]:
    """An entry's checks as a table, then the functions that changed, as bullets."""
    headers = verdicts.check_headers(verdicts.is_ab(entry))
    return [
        _row([md_escape(h) for h in headers]),
        _row(["---", *["---:"] * (len(headers) - 2), "---"]),
        *(_row([md_escape(c) for c in verdicts.check_cells(c)]) for c in verdicts.checks(entry)),
        "",
        *(
            ("  - " if line.startswith("  ") else "- ") + md_escape(line.strip())
            for line in verdicts.profile_lines(entry)
        ),
    ]


def findings(entries: Sequence[Entry]) -> list[str]:
    """Each failed, then undecided, measurement first: its test, its verdict's reasons,
    its checks and the functions that changed, then its notes."""
    lines = []
    for _, entry in headline.open_first(entries):
        lines += [
            f"### {_verdict_cell(entry)}: {md_escape(str(entry.get('nodeid', MISSING)))}",
            "",
            f"{md_escape(str(entry.get('name', MISSING)))} on "
            f"{md_escape(str(entry.get('server', MISSING)))}",
            "",
            *(f"- {md_escape(text)}" for text in verdict_texts(entry, "reasons")),
            *([""] if verdict_texts(entry, "reasons") else []),
            *(_checks(entry) if verdicts.checks(entry) else []),
            *(f"- {md_escape(text)}" for text in verdicts.not_checked(entry)),
            *(f"- note: {md_escape(text)}" for text in verdicts.other_notes(entry)),
            "",
        ]
    return lines


def check_details(entries: Sequence[Entry]) -> list[str]:
    """Per other test that has checks (the failed and undecided ones are above), a folded
    table of them (GitHub renders Markdown inside ``<details>`` after a blank line; the
    summary line is HTML, so HTML-escaped)."""
    lines = []
    first = {i for i, _ in headline.open_first(entries)}
    for i, entry in enumerate(entries):
        if i in first or not verdicts.checks(entry):
            continue
        what = f"{entry.get('nodeid', MISSING)} [{entry.get('name', MISSING)}]"
        state = _verdict_cell(entry)
        lines += [
            f"<details><summary>{escape(state)} {escape(what)}: checks</summary>",
            "",
            *_checks(entry),
            "",
            "</details>",
            "",
        ]
    return lines


def verdict_lines(entries: Sequence[Entry]) -> list[str]:
    """One bullet per verdict reason, then per note, of the tests not shown first (the
    failed and undecided ones have theirs under their checks)."""
    first = {i for i, _ in headline.open_first(entries)}
    rest = [entry for i, entry in enumerate(entries) if i not in first]
    lines = []
    for key, label in (("reasons", ""), ("notes", "note: ")):
        for entry in rest:
            where = (
                f"**{md_escape(str(entry.get('nodeid', MISSING)))}** "
                f"\\[{md_escape(str(entry.get('name', MISSING)))}\\]"
            )
            for text in verdict_texts(entry, key):
                lines.append(f"- {_verdict_cell(entry)} {where}: {label}{md_escape(text)}")
    return lines


def not_checked_lines(entries: Sequence[Entry]) -> list[str]:
    """One bullet per check compared and not checked (``verdicts.not_checked``)."""
    return [
        f"- {_verdict_cell(entry)} **{md_escape(str(entry.get('nodeid', MISSING)))}** "
        f"\\[{md_escape(str(entry.get('name', MISSING)))}\\]: {md_escape(line)}"
        for entry in entries
        for line in verdicts.not_checked(entry)
    ]


def study_lines(comparisons: Sequence[Mapping[str, Any]]) -> list[str]:
    """The studies beside this run, one bullet per study line, its notes under it."""
    lines = []
    for c in comparisons:
        where = f" {c['path']}" if c.get("path") else ""
        figures = ", ".join(f"{s} {fmt(c['here'][s])}" for s in c["servers"])
        lines.append(
            f"- **seed {md_escape(str(c['seed']))}{md_escape(where)}**, "
            f"{fmt(c['users'])} users, {md_escape(str(c['label']))}: {md_escape(figures)}; "
            f"{md_escape(studies.verdict_text(c))}"
        )
        lines += [f"  - note: {md_escape(str(n))}" for n in c.get("notes", ())]
    return lines


def count_lines(entries: Sequence[Entry]) -> list[str]:
    """Each counted measurement's figures and cost (``counts.lines``), as bullets."""
    found = counted.lines(entries)
    return [("  - " if line.startswith("  ") else "- ") + md_escape(line.strip()) for line in found]


def render_markdown(report: Mapping[str, Any]) -> str:
    """A compact summary for CI, the answer first: the headline, each failed or undecided
    test's checks and functions, then every test's row and the rest; when it was made
    last."""
    entries = tests(report)
    lines = [f"## pytest-webperf: {md_escape(headline.headline(report))}", ""]
    created = report.get("created")
    ended = [f"Report created {md_escape(str(created))}.", ""] if created else []
    if not entries:
        return "\n".join([*lines, "Nothing was measured.", "", *ended])
    lines += findings(entries)
    first = {i for i, _ in headline.open_first(entries)}
    unchecked = not_checked_lines([e for i, e in enumerate(entries) if i not in first])
    if unchecked:  # a green job with these is not "measured and fine": said first
        lines += ["### Not checked", "", *unchecked, ""]
    lines += ["### Every test", "", *table(entries), "", *check_details(entries)]
    found = count_lines(entries)
    if found:
        lines += ["### Counted", "", *found, ""]
    compared = studies.of_report(report)
    if compared:
        lines += ["### The studies", "", *study_lines(compared), ""]
    reasons = verdict_lines(entries)
    if reasons:
        lines += ["### Verdicts", "", *reasons, ""]
    return "\n".join([*lines, *ended])


def write_markdown(path: Path, report: Mapping[str, Any]) -> None:
    """Write the summary; GitHub's job summary file is appended to, as GitHub expects."""
    text = render_markdown(report)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary and Path(summary).resolve() == path.resolve():
        with path.open("a", encoding="utf-8") as handle:
            handle.write(text)
        return
    write_text_atomic(path, text)
