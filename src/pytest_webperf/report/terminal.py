"""The terminal summary: the report's table as aligned text, then the verdicts' reasons."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_webperf.report.table import (
    COLUMNS,
    MISSING,
    NUMERIC,
    Entry,
    mqtt_lines,
    status,
    verdict_texts,
)


def table(entries: Sequence[Entry]) -> list[str]:
    """Rows of aligned text; ``[]`` when nothing was measured."""
    if not entries:
        return []
    names = [name for name, _ in COLUMNS] + ["verdict"]
    rows = [names] + [
        [render(e) for _, render in COLUMNS] + [status(e) or MISSING] for e in entries
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(names))]

    def line(row: list[str]) -> str:
        cells = [
            cell.rjust(w) if names[i] in NUMERIC else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    return [line(rows[0]), "  ".join("-" * w for w in widths), *(line(r) for r in rows[1:])]


def verdict_lines(entries: Sequence[Entry]) -> list[str]:
    """The reasons and notes of every verdict, for under the table."""
    return [
        f"{e.get('nodeid')} [{e.get('name')}]: {text}"
        for e in entries
        for key in ("reasons", "notes")
        for text in verdict_texts(e, key)
    ]


def summary(report: Mapping[str, Any]) -> list[str]:
    entries = [e for e in report.get("tests", ()) if isinstance(e, Mapping)]
    return table(entries) + mqtt_lines(entries) + verdict_lines(entries)
