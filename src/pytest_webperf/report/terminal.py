"""The terminal summary: the report's table as aligned text, each test's checks under
it, then the verdicts' reasons. An A/B run says once what A and B were."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_webperf.report import counts, studies, verdicts
from pytest_webperf.report.table import (
    MISSING,
    NUMERIC,
    Entry,
    counted_lines,
    endpoint_cells,
    endpoints,
    http2_lines,
    http2_notes,
    mqtt_lines,
    paced_lines,
    shown,
    status,
    stream_lines,
    tests,
    verdict_texts,
)


def aligned(rows: Sequence[Sequence[str]], right: Sequence[bool], indent: str = "") -> list[str]:
    """The first row as a header, a rule under it, every column padded to its widest."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]

    def line(row: Sequence[str]) -> str:
        cells = [
            cell.rjust(w) if right[i] else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        return (indent + "  ".join(cells)).rstrip()

    rule = indent + "  ".join("-" * w for w in widths)
    return [line(rows[0]), rule, *(line(r) for r in rows[1:])]


def table(entries: Sequence[Entry]) -> list[str]:
    """Rows of aligned text; ``[]`` when nothing was measured."""
    if not entries:
        return []
    columns = shown(entries)
    names = [name for name, _ in columns] + ["verdict"]
    rows = [names]
    for e in entries:
        rows.append([render(e) for _, render in columns] + [status(e) or MISSING])
        rows += [endpoint_cells(row, names) for row in endpoints(e)]  # a mix: indented
    return aligned(rows, [name in NUMERIC for name in names])


CHECK_RIGHT = (False, True, True, True, True, True, False)


def check_lines(entries: Sequence[Entry]) -> list[str]:
    """Per test that has checks: what each check compared, changed, and could detect."""
    lines = []
    for entry in entries:
        found = verdicts.checks(entry)
        if not found:
            continue
        lines.append(f"{entry.get('nodeid')} [{entry.get('name')}]: {status(entry) or MISSING}")
        rows = [
            verdicts.check_headers(verdicts.is_ab(entry)),
            *(verdicts.check_cells(c) for c in found),
        ]
        lines += aligned(rows, CHECK_RIGHT, indent="  ")
        pairs = verdicts.pairs_line(entry)
        lines += [f"  {pairs}"] if pairs else []
        lines += ["  " + line for line in verdicts.profile_lines(entry)]
    return lines


def verdict_lines(entries: Sequence[Entry]) -> list[str]:
    """The reasons and notes of every verdict, for under the table."""
    return [
        f"{e.get('nodeid')} [{e.get('name')}]: {text}"
        for e in entries
        for key in ("reasons", "notes")
        for text in verdict_texts(e, key)
    ]


def summary(report: Mapping[str, Any], verbose: bool = False) -> list[str]:
    """The run's summary; ``verbose`` (-v) adds each repetition's protocol details
    (HTTP/2's connections, HPACK, windows) and counted figures no check judged however
    widely they spread."""
    entries = tests(report)
    against = verdicts.run_against(report)
    head = [f"webperf A/B: {against}"] if against else []
    return (
        head
        + table(entries)
        + check_lines(entries)
        + mqtt_lines(entries)
        + stream_lines(entries)
        + paced_lines(entries)
        + (http2_lines(entries) if verbose else http2_notes(entries))
        + counted_lines(entries)
        + counts.lines(entries, verbose)
        + studies.lines(studies.of_report(report))
        + verdict_lines(entries)
    )
