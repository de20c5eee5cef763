"""What the HTML report opens on, under its headline: each failed, then undecided,
measurement with its verdict's reasons, its checks (change, interval, threshold, could
detect) beside the chart of their changes, and the functions whose cost changed (the
profile's table and its flame graph). Its details section, further down, links back here
instead of saying it twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

from pytest_webperf.report import headline, verdicts
from pytest_webperf.report.html.charts import Figure, change_figure
from pytest_webperf.report.html.tables import (
    Table,
    checks_table,
    profile_flame,
    profile_note,
    profile_table,
)
from pytest_webperf.report.table import (
    MISSING,
    Entry,
    short_test,
    status,
    verdict_texts,
)

TOP = 5  # functions shown at the top; the details section lists them all


@dataclass(frozen=True)
class Finding:
    """One failed or undecided measurement, as the top of the page shows it."""

    anchor: str  # its own id; its details section is ``detail``
    detail: str
    nodeid: str
    test: str
    what: str  # ``GET /work on pages``
    status: str | None
    reasons: Sequence[str]
    unchecked: Sequence[str]  # each check compared and not checked, and what would decide it
    notes: Sequence[str]
    checks: Table | None
    change: Figure | None
    profile_title: str
    profile: Table | None
    profile_note: str
    flame: Markup | None


def profile_title(entry: Entry) -> str:
    """What the functions' figures are: instructions (counted) or CPU (sampled)."""
    if (verdicts.profile_of(entry) or {}).get("unit") == "Ir":
        return "Functions that changed: instructions, B - A per request (counted)"
    sides = "B - A" if verdicts.is_ab(entry) else "this run - the baseline"
    return f"Functions that changed: CPU, {sides} per request"


def finding(index: int, entry: Entry) -> Finding:
    return Finding(
        anchor=f"f{index}",
        detail=f"m{index}",
        nodeid=str(entry.get("nodeid", MISSING)),
        test=short_test(entry),
        what=f"{entry.get('name', MISSING)} on {entry.get('server', MISSING)}",
        status=status(entry),
        reasons=verdict_texts(entry, "reasons"),
        unchecked=verdicts.not_checked(entry),
        notes=verdicts.other_notes(entry),
        checks=checks_table(entry),
        change=change_figure(entry),
        profile_title=profile_title(entry),
        profile=profile_table(entry, most=TOP),
        profile_note=profile_note(entry),
        flame=profile_flame(entry),
    )


def findings(entries: Sequence[Entry]) -> list[Finding]:
    """The failed measurements, then the undecided ones, in report order."""
    return [finding(i, entry) for i, entry in headline.open_first(entries)]
