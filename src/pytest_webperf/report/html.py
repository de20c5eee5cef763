"""The HTML report: one self-contained page rendered from Jinja2 templates.

No script, font or stylesheet is fetched (CI machines and the lab are offline); the
only JavaScript is a few lines that hide or show repetitions. Jinja2 escapes every
text from the report; charts come from ``charts`` and ``workloads`` as SVG ``Markup``.
Like every renderer it renders what the report holds and decides nothing.

This module turns the report's dict into plain view objects (texts already formatted)
and hands them to ``templates/report.html``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from markupsafe import Markup

from pytest_webperf.fileio import write_text_atomic
from pytest_webperf.report import checks as ab
from pytest_webperf.report import studies
from pytest_webperf.report.charts import (
    SIDE_COLOUR,
    Figure,
    change_figure,
    endpoint_charts,
    measurement_charts,
    pair_charts,
    rep_label,
    save_code,
    save_value,
    save_when,
    saves,
    trend_figures,
    trend_metrics,
)
from pytest_webperf.report.curve import curve_figures, stage_figures, stage_groups
from pytest_webperf.report.flame import flame_graph
from pytest_webperf.report.svg import colour
from pytest_webperf.report.table import (
    COLUMNS,
    ENDPOINT_COLUMNS,
    MISSING,
    NUMERIC,
    STATUSES,
    Entry,
    code,
    delivery,
    durations,
    endpoint_cells,
    endpoints,
    fmt,
    number,
    placement_text,
    rep_latency,
    rep_nested,
    rep_rps,
    repetitions,
    short_sha,
    short_test,
    status,
    status_counts,
    tests,
    verdict_texts,
)
from pytest_webperf.report.workloads import Workload, comparisons

# Charts are collapsed beyond this many measurements, so a big report opens quickly.
OPEN_SECTIONS_UP_TO = 12
# Run options that an entry may override (a marker): shown per measurement instead.
PER_ENTRY_OPTIONS = frozenset({"concurrency", "duration_s", "repeat"})

Rep = Mapping[str, Any]
Cell = tuple[str, bool]  # text, numeric


def _pair(first: float | None, second: float | None) -> str:
    return MISSING if first is None and second is None else f"{fmt(first)} / {fmt(second)}"


REP_COLUMNS: tuple[tuple[str, Callable[[Rep], str]], ...] = (
    ("duration s", lambda r: fmt(number(r.get("duration_s")), 1)),
    ("req/s", lambda r: fmt(rep_rps(r))),
    ("requests", lambda r: fmt(number(r.get("requests")))),
    ("errors", lambda r: fmt(number(r.get("errors")))),
    ("timeouts", lambda r: fmt(number(r.get("timeouts")))),
    ("connect errors", lambda r: fmt(number(r.get("connect_errors")))),
    ("p50 ms", lambda r: fmt(rep_latency(r, "p50_ms"), 2)),
    ("p95 ms", lambda r: fmt(rep_latency(r, "p95_ms"), 2)),
    ("p99 ms", lambda r: fmt(rep_latency(r, "p99_ms"), 2)),
    ("p99.9 ms", lambda r: fmt(rep_latency(r, "p999_ms"), 2)),
    ("max ms", lambda r: fmt(rep_latency(r, "max_ms"), 2)),
    (
        "cpu % mean/max",
        lambda r: _pair(rep_nested(r, "cpu_percent", "mean"), rep_nested(r, "cpu_percent", "max")),
    ),
    ("peak rss MB", lambda r: fmt(rep_nested(r, "rss_mb", "max"))),
    ("generator cpu %", lambda r: fmt(number(r.get("generator_cpu_percent")))),
    ("foreign cpu %", lambda r: fmt(number(r.get("foreign_cpu_percent")))),
    ("cpu/req µs", lambda r: fmt(number(r.get("cpu_per_req_us")))),
)

MQTT_COLUMNS: tuple[tuple[str, Callable[[Mapping[str, Any]], str], bool], ...] = (
    ("QoS", lambda m: fmt(number(m.get("qos"))), True),
    ("users", lambda m: fmt(number(m.get("users"))), True),
    ("published", lambda m: fmt(number(m.get("published"))), True),
    ("acked", lambda m: fmt(number(m.get("acked"))), True),
    ("unacked", lambda m: fmt(number(m.get("unacked"))), True),
    ("tps", lambda m: fmt(number(m.get("tps")), 1), True),
    ("observer", lambda m: delivery(m.get("observer"), "delivered") or MISSING, False),
    ("store", lambda m: delivery(m.get("store"), "stored") or MISSING, False),
)

# ---------------------------------------------------------------- view objects


@dataclass(frozen=True)
class Row:
    cells: Sequence[Cell]
    label: str = ""
    css: str = ""  # e.g. "rep-2" (toggles) or an outcome
    dot: str = ""  # a colour for the label's dot


@dataclass(frozen=True)
class Table:
    headers: Sequence[Cell]
    rows: Sequence[Row]
    css: str = "reps"
    label: str = ""  # the first column's header, when rows have labels


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


# ---------------------------------------------------------------- builders


def _verdict(entry: Entry) -> VerdictText:
    return VerdictText(
        status(entry), verdict_texts(entry, "reasons"), verdict_texts(entry, "notes")
    )


def _summary(entries: Sequence[Entry]) -> tuple[list[Cell], list[SummaryRow]]:
    columns = [*COLUMNS[1:], *ab.SUMMARY_COLUMNS]
    numeric = NUMERIC
    headers = [(name, name in numeric) for name, _ in COLUMNS]
    headers += [(name, False) for name, _ in ab.SUMMARY_COLUMNS]
    names = [name for name, _ in columns]
    rows = [
        SummaryRow(
            anchor=f"m{i}",
            nodeid=str(entry.get("nodeid", "")),
            test=short_test(entry),
            cells=[(render(entry), name in numeric) for name, render in columns],
            verdict=_verdict(entry),
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


def endpoints_table(rows: Sequence[Mapping[str, Any]]) -> Table | None:
    """A request mix's endpoints, every figure (``table.ENDPOINT_COLUMNS``)."""
    if not rows:
        return None
    text = {"endpoint", "method"}
    return Table(
        [(name, name not in text) for name, _ in ENDPOINT_COLUMNS],
        [Row([(render(r), name not in text) for name, render in ENDPOINT_COLUMNS]) for r in rows],
    )


def _error_kinds(rep: Rep) -> str:
    kinds = rep.get("error_kinds")
    if not isinstance(kinds, Mapping) or not kinds:
        return ""
    return "; ".join(f"{kind}: {count}" for kind, count in kinds.items())


def repetitions_table(reps: Sequence[Rep], *, side: str = "") -> Table | None:
    if not reps:
        return None
    rows = []
    for i, rep in enumerate(reps):
        notes = rep.get("notes") if isinstance(rep.get("notes"), list) else []
        remarks = " | ".join(r for r in [_error_kinds(rep), *(str(n) for n in notes or ())] if r)
        cells = [(render(rep), True) for _, render in REP_COLUMNS] + [(remarks, False)]
        label = f"{side} {rep_label(rep, i)}".strip()
        dot = SIDE_COLOUR[side] if side else colour(i)
        rows.append(Row(cells, label, "" if side else f"rep-{i + 1}", dot))
    headers = [(name, True) for name, _ in REP_COLUMNS] + [("errors by kind, notes", False)]
    return Table(headers, rows, label="repetition")


def mqtt_table(reps: Sequence[Rep]) -> Table | None:
    rows = [
        Row(
            [(render(m), num) for _, render, num in MQTT_COLUMNS], rep_label(rep, i), f"rep-{i + 1}"
        )
        for i, rep in enumerate(reps)
        if isinstance(m := rep.get("mqtt"), Mapping)
    ]
    if not rows:
        return None
    return Table([(name, False) for name, _, _ in MQTT_COLUMNS], rows, label="repetition")


OUTCOME_CSS = {"fail": "bad", "broken": "bad", "undecided": "warn", "too-noisy": "warn"}
OUTCOME_CSS |= {"contended": "warn", "generator-bound": "warn", "pass": "good", "improved": "good"}


def checks_table(entry: Entry) -> Table | None:
    found = ab.checks(entry)
    if not found:
        return None
    numeric = {"A", "B", "baseline", "current", "change", "interval", "could detect"}
    headers = [(h, h in numeric) for h in ab.check_headers(ab.is_ab(entry))]
    rows = [
        Row(
            [(text, h in numeric) for (h, _), text in zip(headers, ab.check_cells(c), strict=True)],
            css=OUTCOME_CSS.get(str(c.get("outcome")), ""),
        )
        for c in found
    ]
    return Table(headers, rows, css="checks")


def profile_table(entry: Entry) -> Table | None:
    """The ranked functions of an A/B entry's differential profile (B - A, self CPU per
    request, with its interval); None if none changed credibly."""
    changes = ab.profile_changes(entry)
    if not changes:
        return None
    headers = [("function", False), ("A µs/req", True), ("B - A µs/req", True)]
    headers += [("interval", True), ("B - A total µs/req", True)]
    rows = []
    for c in changes:
        low, high, change = number(c.get("low_us")), number(c.get("high_us")), c.get("change_us")
        interval = f"{low:+.1f}..{high:+.1f}" if low is not None and high is not None else MISSING
        cells = [
            (str(c.get("function", MISSING)), False),
            (fmt(number(c.get("base_us")), 1), True),
            (ab.change_line(c).split(" µs/req")[0], True),
            (interval, True),
            (fmt(number(c.get("change_total_us")), 1), True),
        ]
        css = "bad" if isinstance(change, int | float) and change > 0 else "good"
        rows.append(Row(cells, css=css))
    return Table(headers, rows, css="checks")


def profile_note(entry: Entry) -> str:
    profile = ab.profile_of(entry)
    if profile is None:
        return ""
    if profile.get("why"):
        return f"No CPU profile: {profile['why']}"
    found = profile.get("samples")
    samples: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    tools = ", ".join(str(t) for t in profile.get("tools") or ()) or MISSING
    text = (
        f"Sampled by {tools} at 99 Hz over {profile.get('pairs', MISSING)} pairs "
        f"({fmt(number(samples.get('A')))} samples of A, {fmt(number(samples.get('B')))} of B); "
        f"{profile.get('tested', MISSING)} functions tested, "
        f"{len(ab.profile_changes(entry))} changed credibly (self CPU per request, "
        "Bonferroni over the functions tested)."
    )
    notes = [str(n) for n in profile.get("notes") or ()]
    return " ".join([text, *notes])


def folded_links(entry: Entry) -> list[tuple[str, str]]:
    profile = ab.profile_of(entry)
    if profile is None:
        return []
    return [
        (f"{side}.folded", "data:text/plain;charset=utf-8," + quote(str(profile[key])))
        for side, key in (("A", "base_folded"), ("B", "change_folded"))
        if profile.get(key)
    ]


def profile_flame(entry: Entry) -> Markup | None:
    profile = ab.profile_of(entry)
    if profile is None or profile.get("why"):
        return None
    found = profile.get("requests")
    requests: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    a, b = number(requests.get("A")), number(requests.get("B"))
    return flame_graph(
        str(profile.get("base_folded") or ""),
        str(profile.get("change_folded") or ""),
        int(a or 0),
        int(b or 0),
    )


def saves_table(entry: Entry) -> Table | None:
    """The baseline's saves behind the trend charts: when, which code, each figure."""
    metrics = [str(c.get("metric")) for c in trend_metrics(entry)]
    if not metrics:
        return None
    rows = [
        Row(
            [(save_when(s), False), (save_code(s), False)]
            + [(ab.value(save_value(s, m)), True) for m in metrics],
            str(i + 1),
        )
        for i, s in enumerate(saves(entry))
    ]
    headers = [("saved", False), ("code", False)] + [(m, True) for m in metrics]
    return Table(headers, rows, label="save")


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
    if not ab.is_ab(entry):
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
    head, rows = ab.pair_rows(entry)
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
        base_reps=repetitions_table(ab.base_repetitions(entry), side="A") or Table([], []),
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


def section(index: int, entry: Entry, open_charts: bool) -> Section:
    reps = repetitions(entry)
    facts = [
        ("workload", str(entry.get("name", MISSING))),
        ("server", str(entry.get("server", MISSING))),
        ("users", fmt(number(entry.get("concurrency")))),
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
        reps=repetitions_table(reps),
        mqtt=mqtt_table(reps),
        toggles=[(f"rep-{i + 1}", colour(i), rep_label(r, i)) for i, r in enumerate(reps)]
        if len(reps) > 1
        else [],
        change=change_figure(entry),
        trend=trend_figures(entry),
        saves=saves_table(entry),
        figures=[*curve_figures(entry), *(measurement_charts(reps) if reps else [])],
        open=open_charts,
        endpoints=endpoints_table(endpoints(entry)),
        base_endpoints=endpoints_table(endpoints(entry, "base_endpoints")),
        endpoint_figures=endpoint_charts(entry),
        profile=profile_table(entry),
        profile_note=profile_note(entry),
        folded=folded_links(entry),
        flame=profile_flame(entry),
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
    """Blocks of facts for the header: what each measurement ran with (from the entries,
    not the run's options, which a marker may override), the run, placement, machine."""
    ran = [
        ("users", _distinct(entries, lambda e: fmt(number(e.get("concurrency"))))),
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
        loader=jinja2.PackageLoader("pytest_webperf.report", "templates"),
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
    open_charts = len(entries) <= OPEN_SECTIONS_UP_TO
    workloads: list[Workload] = comparisons(entries) if entries else []
    workloads += [
        Workload(f"{k}: stages", tuple(stage_figures(g))) for k, g in stage_groups(entries).items()
    ]
    return (
        environment()
        .get_template("report.html")
        .render(
            title="pytest-webperf report" + (f" {created}" if created else ""),
            count=len(entries),
            counts=status_counts(entries),
            against=ab.run_against(report),
            blocks=header_facts(report, entries),
            summary_headers=headers,
            summary_rows=rows,
            workloads=workloads,
            studies=studies.of_report(report),
            study_verdict=studies.verdict_text,
            sections=[section(i, e, open_charts) for i, e in enumerate(entries)],
            statuses=STATUSES,
        )
    )


def write_html(path: Path, report: Mapping[str, Any]) -> None:
    """Write atomically: a reader never sees half a page."""
    write_text_atomic(path, render_html(report))
