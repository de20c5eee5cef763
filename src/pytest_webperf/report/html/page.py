"""The HTML report: one self-contained page rendered from Jinja2 templates.

No script, font or stylesheet is fetched (CI machines and the lab are offline); the
only JavaScript is a few lines that hide or show repetitions. Jinja2 escapes every
text from the report; charts come from ``charts`` and ``workloads`` as SVG ``Markup``.
Like every renderer it renders what the report holds and decides nothing.

This module turns the report's dict into plain view objects (texts already formatted)
and hands them to ``templates/report.html``, which lays them out answer first: the
headline (``headline``), the failed and undecided tests (``findings``), every test's row,
the comparisons, each measurement's details, and the settings and machine last.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from pytest_webperf.fileio import write_text_atomic
from pytest_webperf.report import counts, headline, studies, verdicts
from pytest_webperf.report.html.charts import (
    Figure,
    change_figure,
    endpoint_charts,
    pair_charts,
)
from pytest_webperf.report.html.comparisons import Workload, comparisons
from pytest_webperf.report.html.curve import curve_figures, stage_figures, stage_groups
from pytest_webperf.report.html.findings import findings
from pytest_webperf.report.html.tables import (
    OUTCOME_CSS,
    Cell,
    Row,
    Table,
    checks_table,
    counted_table,
    endpoints_table,
    folded_links,
    mqtt_table,
    profile_flame,
    profile_note,
    profile_table,
    repetitions_table,
    saves_table,
    stream_table,
)
from pytest_webperf.report.html.timeline import measurement_charts, runs_of
from pytest_webperf.report.html.trend import trend_figures
from pytest_webperf.report.table import (
    COLUMNS,
    MISSING,
    NUMERIC,
    STATUSES,
    Entry,
    code,
    durations,
    endpoint_cells,
    endpoints,
    fmt,
    is_counted,
    number,
    placement_text,
    repetitions,
    short_sha,
    short_test,
    shown,
    status,
    tests,
    users,
    verdict_texts,
)

# Charts are collapsed beyond this many measurements, so a big report opens quickly.
OPEN_SECTIONS_UP_TO = 12
# Run options that an entry may override (a marker): shown per measurement instead.
PER_ENTRY_OPTIONS = frozenset({"concurrency", "duration_s", "repeat"})


# ---------------------------------------------------------------- view objects


@dataclass(frozen=True)
class VerdictText:
    """A verdict as the page shows it: its status, reasons and notes."""

    status: str | None
    reasons: Sequence[str] = ()
    notes: Sequence[str] = ()


@dataclass(frozen=True)
class SummaryRow:
    anchor: str
    nodeid: str
    test: str
    cells: Sequence[Cell]
    verdict: VerdictText
    endpoints: Sequence[Sequence[Cell]] = ()  # a request mix: a row per endpoint under it


@dataclass(frozen=True)
class Sides:
    """What A and B of an A/B entry were, and how they were measured."""

    a: str
    b: str
    facts: str
    pairs: Table
    base_reps: Table | None
    figures: Sequence[Figure]


@dataclass(frozen=True)
class Section:
    anchor: str
    nodeid: str
    facts: Sequence[tuple[str, str]]
    target: str
    verdict: VerdictText
    checks: Table | None
    sides: Sides | None
    reps: Table | None
    mqtt: Table | None
    stream: Table | None
    toggles: Sequence[tuple[str, str, str]]  # css, colour, label
    change: Figure | None = None  # each check's change with its interval
    trend: Sequence[Figure] = field(default_factory=list)  # over the baseline's saves
    saves: Table | None = None  # the baseline's saves behind the trend, as figures
    figures: Sequence[Figure] = field(default_factory=list)
    open: bool = True
    endpoints: Table | None = None  # a request mix: a row per endpoint (side B's in A/B)
    base_endpoints: Table | None = None  # side A's, in an A/B run
    endpoint_figures: Sequence[Figure] = field(default_factory=list)
    profile: Table | None = None  # A/B: the functions whose CPU per request changed
    profile_note: str = ""  # what was profiled, or why there is no profile
    folded: Sequence[tuple[str, str]] = ()  # both sides' folded stacks: file name, data URI
    flame: Markup | None = None  # B's stacks coloured by the change against A
    profile_title: str = "CPU profile: B - A per request"
    counted: Sequence[str] = ()  # a counted measurement's figures and cost, line by line
    above: str = ""  # the anchor of its finding at the top: checks and profile are there


# ---------------------------------------------------------------- builders


def _verdict(entry: Entry) -> VerdictText:
    return VerdictText(
        status(entry), verdict_texts(entry, "reasons"), verdict_texts(entry, "notes")
    )


# The summary's own columns after the table's: the change of each check with its
# interval (each side's figures are in the checks' tables).
SUMMARY_CHANGE = verdicts.SUMMARY_COLUMNS[1:]


def _summary(entries: Sequence[Entry]) -> tuple[list[Cell], list[SummaryRow]]:
    """The columns with a figure for some entry (``table.shown``), then each check's
    change; the verdict's badge is the second column."""
    columns = [*shown(entries, COLUMNS)[1:], *SUMMARY_CHANGE]
    numeric = NUMERIC
    headers = [("test", False), ("verdict", False)]
    headers += [(name, name in numeric) for name, _ in columns]
    names = [name for name, _ in columns]
    first = {i for i, _ in headline.open_first(entries)}  # their reasons are at the top
    rows = [
        SummaryRow(
            anchor=f"m{i}",
            nodeid=str(entry.get("nodeid", "")),
            test=short_test(entry),
            cells=[(render(entry), name in numeric) for name, render in columns],
            verdict=VerdictText(status(entry)) if i in first else _verdict(entry),
            endpoints=[
                list(
                    zip(
                        endpoint_cells(row, names, indent="↳ "),
                        [n in numeric for n in names],
                        strict=True,
                    )
                )
                for row in endpoints(entry)
            ],
        )
        for i, entry in enumerate(entries)
    ]
    return headers, rows


OUTCOME_CSS |= {"contended": "warn", "generator-bound": "warn", "pass": "good", "improved": "good"}


def _image(target: object) -> str:
    """A target's image(s): ``image``, or each part's."""
    if not isinstance(target, Mapping):
        return MISSING
    if target.get("image"):
        return str(target["image"])
    parts = target.get("parts")
    if isinstance(parts, Mapping):
        images = [
            str(p["image"]) for p in parts.values() if isinstance(p, Mapping) and p.get("image")
        ]
        return ", ".join(images) or MISSING
    return MISSING


def sides(entry: Entry) -> Sides | None:
    if not verdicts.is_ab(entry):
        return None
    against: Mapping[str, Any] = entry["against"]
    ref = against.get("ref") or MISSING
    changed = against.get("changed")
    facts = [
        f"pairs {fmt(number(against.get('pairs')))}" if number(against.get("pairs")) else "",
        f"restart every {fmt(number(against.get('restart_every')))} pairs"
        if number(against.get("restart_every"))
        else "",
        "" if changed is None else f"targets changed: {'yes' if changed else 'no'}",
    ]
    head, rows = verdicts.pair_rows(entry)
    numeric = [h != "order" for h in head[1:]]
    pairs = Table(
        list(zip(head[1:], numeric, strict=True)),
        [Row(list(zip(r[1:], numeric, strict=True)), r[0]) for r in rows],
        label="pair",
    )
    commit = short_sha(against.get("commit"))
    return Sides(
        a=f"A = {ref} ({commit}) · image {_image(against.get('base_target'))}",
        b=f"B = working tree · image {_image(entry.get('target'))}",
        facts=" · ".join(f for f in facts if f),
        pairs=pairs,
        base_reps=(counted_table if is_counted(entry) else repetitions_table)(
            verdicts.base_repetitions(entry), side="A"
        )
        or Table([], []),
        figures=pair_charts(entry),
    )


def _target(entry: Entry) -> str:
    target = entry.get("target")
    if not isinstance(target, Mapping):
        return ""
    facts = [
        f"{k}: {v}"
        for k, v in target.items()
        if isinstance(v, str | int | float) and not isinstance(v, bool)
    ]
    parts = target.get("parts")
    if isinstance(parts, Mapping):
        for name, part in parts.items():
            image = part.get("image") if isinstance(part, Mapping) else None
            facts.append(f"{name}: {image}" if image else str(name))
    return " · ".join(facts)


def section(index: int, entry: Entry, open_charts: bool, above: str = "") -> Section:
    """A measurement's details; ``above``: the anchor of its finding at the top of the
    page (its checks and profile are there)."""
    reps = repetitions(entry)
    counted = is_counted(entry)
    against = entry.get("against") if verdicts.is_ab(entry) else None
    ref = str(against.get("ref") or "") if isinstance(against, Mapping) else ""
    runs = runs_of(reps, verdicts.base_repetitions(entry) if against else (), ref)
    facts = [
        ("workload", str(entry.get("name", MISSING))),
        ("server", str(entry.get("server", MISSING))),
        ("users", users(entry)),
        ("duration s", durations(entry)),
        ("repetitions", str(len(reps))),
        ("code", code(entry)),
    ]
    return Section(
        anchor=f"m{index}",
        nodeid=str(entry.get("nodeid", MISSING)),
        facts=facts,
        target=_target(entry),
        verdict=_verdict(entry),
        checks=checks_table(entry),
        sides=sides(entry),
        reps=counted_table(reps) if counted else repetitions_table(reps),
        mqtt=mqtt_table(reps),
        stream=stream_table(reps),
        toggles=runs.boxes,
        change=change_figure(entry),
        trend=trend_figures(entry),
        saves=saves_table(entry),
        figures=[]
        if counted
        else [*curve_figures(entry), *(measurement_charts(runs) if reps else [])],
        open=open_charts,
        endpoints=endpoints_table(endpoints(entry)),
        base_endpoints=endpoints_table(endpoints(entry, "base_endpoints")),
        endpoint_figures=endpoint_charts(entry),
        profile=profile_table(entry),
        profile_note=profile_note(entry),
        folded=folded_links(entry),
        flame=profile_flame(entry),
        profile_title=(
            "Instructions: B - A per request (counted)"
            if (verdicts.profile_of(entry) or {}).get("unit") == "Ir"
            else "CPU profile: B - A per request"
        ),
        counted=counts.lines([entry], verbose=True)[1:],
        above=above,
    )


# ---------------------------------------------------------------- page


def _plain(value: object) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(_plain(v) for v in value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_plain(v)}" for k, v in value.items())
    return MISSING if value is None else str(value)


def _scalar(value: object) -> bool:
    return isinstance(value, str | int | float | bool) or value is None


def _distinct(entries: Sequence[Entry], read: Callable[[Entry], str]) -> str:
    return ", ".join(dict.fromkeys(read(e) for e in entries)) or MISSING


def header_facts(
    report: Mapping[str, Any], entries: Sequence[Entry]
) -> list[tuple[str, list[tuple[str, str]]]]:
    """Blocks of facts for the page's end: what each measurement ran with (from the
    entries, not the run's options, which a marker may override), the run, placement,
    machine."""
    ran = [
        ("users", _distinct(entries, users)),
        ("duration s", _distinct(entries, durations)),
        ("repetitions", _distinct(entries, lambda e: str(len(repetitions(e))))),
        ("placement", placement_text(report.get("placement"))),
    ]
    skip = {"tests", "config", "machine", "placement", "against"}
    run = [(str(k), _plain(v)) for k, v in report.items() if k not in skip and _scalar(v)]
    config = report.get("config")
    options = [
        (str(k), _plain(v))
        for k, v in (config.items() if isinstance(config, Mapping) else ())
        if k not in PER_ENTRY_OPTIONS
    ]
    machine = report.get("machine")
    # the machine info's "placement" is the pinning in cpuset terms ("-" unpinned): the
    # first block already says it in the terminal's words, so it is not said twice
    machine_facts = (
        [(str(k), _plain(v)) for k, v in machine.items() if k != "placement"]
        if isinstance(machine, Mapping)
        else []
    )
    blocks = [
        ("Measured with", ran if entries else []),
        ("Run", run),
        ("Other options", options),
        ("Machine", machine_facts),
    ]
    return [(title, facts) for title, facts in blocks if facts]


def badge_class(state: str | None) -> str:
    """The CSS class of a status's badge (``templates/report.html`` colours each)."""
    if state is None:
        return "none"
    return re.sub(r"[^a-z-]", "", state.lower()) or "none"


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pytest_webperf.report.html", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["badge_class"] = badge_class
    return env


def render_html(report: Mapping[str, Any]) -> str:
    """The whole page: self-contained, every text from the report escaped."""
    entries = tests(report)
    created = report.get("created")
    headers, rows = _summary(entries)
    found = findings(entries)
    above = {f.detail: f.anchor for f in found}
    open_charts = len(entries) <= OPEN_SECTIONS_UP_TO
    workloads: list[Workload] = comparisons(entries) if entries else []
    workloads += [
        Workload(f"{k}: stages", tuple(stage_figures(g))) for k, g in stage_groups(entries).items()
    ]
    return (
        environment()
        .get_template("report.html")
        .render(
            title=f"pytest-webperf: {headline.headline(report)}",
            outcomes=headline.counts(entries),
            tested=len(headline.outcomes_by_test(entries)),
            measured=len(entries),
            against=headline.against(report),
            created=created,
            findings=found,
            blocks=header_facts(report, entries),
            summary_headers=headers,
            summary_rows=rows,
            workloads=workloads,
            studies=studies.of_report(report),
            study_verdict=studies.verdict_text,
            sections=[
                section(i, e, open_charts, above.get(f"m{i}", "")) for i, e in enumerate(entries)
            ],
            statuses=STATUSES,
        )
    )


def write_html(path: Path, report: Mapping[str, Any]) -> None:
    """Write atomically: a reader never sees half a page."""
    write_text_atomic(path, render_html(report))
