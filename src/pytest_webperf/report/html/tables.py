"""The HTML report's tables: a measurement's repetitions, endpoints, MQTT deliveries,
checks, profile and the baseline's saves, as rows of formatted cells for
templates/report.html."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from markupsafe import Markup

from pytest_webperf.report import verdicts
from pytest_webperf.report.html.charts import SIDE_COLOUR, rep_label
from pytest_webperf.report.html.flame import flame_graph
from pytest_webperf.report.html.svg import colour
from pytest_webperf.report.html.trend import save_code, save_value, save_when, saves, trend_metrics
from pytest_webperf.report.table import (
    ENDPOINT_COLUMNS,
    MISSING,
    Entry,
    delivery,
    fmt,
    number,
    rep_latency,
    rep_nested,
    rep_rps,
    stream_text,
)

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


def _counted(key: str, decimals: int) -> Callable[[Rep], str]:
    def cell(rep: Rep) -> str:
        found = rep.get("counts")
        return fmt(number(found.get(key)) if isinstance(found, Mapping) else None, decimals)

    return cell


# A counted repetition: what it counted per request, and what counting cost (its timed
# figures were taken under Valgrind: the JSON report keeps them, this table does not).
COUNTED_COLUMNS: tuple[tuple[str, Callable[[Rep], str]], ...] = (
    ("requests", _counted("requests", 0)),
    ("instructions/req", _counted("instructions_per_req", 1)),
    ("allocs/req", _counted("allocs_per_req", 3)),
    ("syscalls/req", _counted("syscalls_per_req", 3)),
    ("ctx switches/req", _counted("ctx_switches_per_req", 3)),
    ("counted window s", _counted("window_s", 2)),
    ("repetition s", _counted("run_s", 1)),
    ("Valgrind's slowdown x", _counted("slowdown", 1)),
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


def counted_table(reps: Sequence[Rep], *, side: str = "") -> Table | None:
    """A counted measurement's repetitions: its counts per request and their cost."""
    if not reps:
        return None
    rows = [
        Row(
            [(render(rep), True) for _, render in COUNTED_COLUMNS],
            f"{side} {rep_label(rep, i)}".strip(),
            "" if side else f"rep-{i + 1}",
            SIDE_COLOUR[side] if side else colour(i),
        )
        for i, rep in enumerate(reps)
    ]
    return Table([(name, True) for name, _ in COUNTED_COLUMNS], rows, label="repetition")


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


def stream_table(reps: Sequence[Rep]) -> Table | None:
    """A WebSocket or SSE measurement's own figures, a row per repetition."""
    rows = [
        Row([(stream_text(m), False)], rep_label(rep, i), f"rep-{i + 1}")
        for i, rep in enumerate(reps)
        if isinstance(m := rep.get("stream"), Mapping)
    ]
    if not rows:
        return None
    return Table([("connections, messages, handshakes, memory", False)], rows, label="repetition")


OUTCOME_CSS = {"fail": "bad", "broken": "bad", "undecided": "warn", "too-noisy": "warn"}


def checks_table(entry: Entry) -> Table | None:
    found = verdicts.checks(entry)
    if not found:
        return None
    numeric = {"A", "B", "baseline", "current", "change", "interval", "could detect"}
    headers = [(h, h in numeric) for h in verdicts.check_headers(verdicts.is_ab(entry))]
    rows = [
        Row(
            [
                (text, h in numeric)
                for (h, _), text in zip(headers, verdicts.check_cells(c), strict=True)
            ],
            css=OUTCOME_CSS.get(str(c.get("outcome")), ""),
        )
        for c in found
    ]
    return Table(headers, rows, css="checks")


def counted_profile_table(changes: Sequence[Mapping[str, Any]]) -> Table:
    """A counted profile's functions: exclusive and inclusive instructions per request of
    A and B, the change with its range over the pairs, and whether it is named."""
    headers = [("function", False), ("A excl Ir/req", True), ("B excl Ir/req", True)]
    headers += [("B - A", True), ("range over pairs", True), ("A incl", True), ("B incl", True)]
    headers += [("B - A incl", True), ("named", False)]
    rows = []
    for c in changes:
        low, high = number(c.get("low_ir")), number(c.get("high_ir"))
        span = f"{low:+,.1f}..{high:+,.1f}" if low is not None and high is not None else MISSING
        change = number(c.get("change_ir"))
        cells = [
            (str(c.get("function", MISSING)), False),
            (fmt(number(c.get("base_ir")), 1), True),
            (fmt(number(c.get("change_side_ir")), 1), True),
            (MISSING if change is None else f"{change:+,.1f}", True),
            (span, True),
            (fmt(number(c.get("base_inclusive_ir")), 1), True),
            (fmt(number(c.get("change_inclusive_ir")), 1), True),
            (MISSING if (d := number(c.get("change_total_ir"))) is None else f"{d:+,.1f}", True),
            ("yes" if c.get("credible") else "no", False),
        ]
        css = "" if not c.get("credible") else ("bad" if (change or 0) > 0 else "good")
        rows.append(Row(cells, css=css))
    return Table(headers, rows, css="checks")


def top_changes(changes: Sequence[Mapping[str, Any]], most: int) -> list[Mapping[str, Any]]:
    """The functions to show first: the named ones (every sampled one is; a counted
    profile also lists the largest changes it did not name), else the largest few."""
    named = [c for c in changes if c.get("credible", True)]
    return (named or list(changes))[:most] if most else list(changes)


def profile_table(entry: Entry, most: int = 0) -> Table | None:
    """The ranked functions of an A/B entry's differential profile (B - A, self CPU per
    request, with its interval); None if none changed credibly. A counted profile's:
    ``counted_profile_table``. ``most``: the first few only (``top_changes``)."""
    changes = top_changes(verdicts.profile_changes(entry), most)
    if not changes:
        return None
    profile = verdicts.profile_of(entry)
    if profile is not None and profile.get("unit") == "Ir":
        return counted_profile_table(changes)
    headers = [("function", False), ("A µs/req", True), ("B - A µs/req", True)]
    headers += [("interval", True), ("B - A total µs/req", True)]
    rows = []
    for c in changes:
        low, high, change = number(c.get("low_us")), number(c.get("high_us")), c.get("change_us")
        interval = f"{low:+.1f}..{high:+.1f}" if low is not None and high is not None else MISSING
        cells = [
            (str(c.get("function", MISSING)), False),
            (fmt(number(c.get("base_us")), 1), True),
            (verdicts.change_line(c).split(" µs/req")[0], True),
            (interval, True),
            (fmt(number(c.get("change_total_us")), 1), True),
        ]
        css = "bad" if isinstance(change, int | float) and change > 0 else "good"
        rows.append(Row(cells, css=css))
    return Table(headers, rows, css="checks")


def _rates(profile: Mapping[str, Any]) -> str:
    """``perf 1999 Hz`` (or ``py-spy 997-499 Hz``): the rates the repetitions used."""
    found: dict[str, set[int]] = {}
    for key in ("repetitions", "base_repetitions"):
        reps = profile.get(key)
        for rep in reps if isinstance(reps, list) else ():
            rates = rep.get("rate_hz") if isinstance(rep, Mapping) else None
            for tool, rate in rates.items() if isinstance(rates, Mapping) else ():
                found.setdefault(str(tool), set()).add(int(rate))
    return ", ".join(
        f"{tool} at {'-'.join(str(r) for r in sorted(rates, reverse=True))} Hz"
        for tool, rates in sorted(found.items())
    )


def profile_note(entry: Entry) -> str:
    profile = verdicts.profile_of(entry)
    if profile is None:
        return ""
    if profile.get("why"):
        return f"No CPU profile: {profile['why']}"
    if profile.get("unit") == "Ir":
        return counted_profile_note(profile, len(verdicts.profile_changes(entry)))
    found = profile.get("samples")
    samples: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    tools = _rates(profile) or ", ".join(str(t) for t in profile.get("tools") or ()) or MISSING
    phi = number(profile.get("dispersion"))
    text = (
        f"Sampled by {tools} ({fmt(number(samples.get('A')))} samples of A, "
        f"{fmt(number(samples.get('B')))} of B); {profile.get('tested', MISSING)} functions "
        f"tested, {len(verdicts.profile_changes(entry))} changed credibly: each function's "
        "share of the samples pooled over the repetitions, B against A, times the change of "
        "the CPU per request, Bonferroni over the functions tested at "
        f"{100 * (number(profile.get('family_alpha')) or 0.05):.0f}%"
        + (f", the repetitions {phi:.1f}x as dispersed as independent samples." if phi else ".")
    )
    notes = [str(profile[k]) for k in ("elsewhere", "unresolved") if profile.get(k)]
    notes += [str(n) for n in profile.get("notes") or ()]
    return " ".join([text, *notes])


def counted_profile_note(profile: Mapping[str, Any], shown: int) -> str:
    found = profile.get("requests")
    requests: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    tools = ", ".join(str(t) for t in profile.get("tools") or ()) or MISSING
    named = sum(1 for c in verdicts.profile_changes({"profile": profile}) if c.get("credible"))
    text = (
        f"Counted by {tools} over {profile.get('pairs', MISSING)} pairs "
        f"({fmt(number(requests.get('A')))} requests of A, {fmt(number(requests.get('B')))} "
        f"of B): {fmt(number(profile.get('base_ir')), 1)} -> "
        f"{fmt(number(profile.get('change_ir')), 1)} instructions per request. Exclusive "
        "instructions are exact; inclusive ones come from the stacks. "
        f"{profile.get('tested', MISSING)} functions compared, {named} named (every "
        "repetition of B beyond every one of A, by more than twice either side's range); "
        f"the {shown} largest changes below."
    )
    return " ".join([text, *(str(n) for n in profile.get("notes") or ())])


def folded_links(entry: Entry) -> list[tuple[str, str]]:
    profile = verdicts.profile_of(entry)
    if profile is None:
        return []
    return [
        (f"{side}.folded", "data:text/plain;charset=utf-8," + quote(str(profile[key])))
        for side, key in (("A", "base_folded"), ("B", "change_folded"))
        if profile.get(key)
    ]


def profile_flame(entry: Entry) -> Markup | None:
    profile = verdicts.profile_of(entry)
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
        instructions=profile.get("unit") == "Ir",
    )


def saves_table(entry: Entry) -> Table | None:
    """The baseline's saves behind the trend charts: when, which code, each figure."""
    metrics = [str(c.get("metric")) for c in trend_metrics(entry)]
    if not metrics:
        return None
    rows = [
        Row(
            [(save_when(s), False), (save_code(s), False)]
            + [(verdicts.value(save_value(s, m)), True) for m in metrics],
            str(i + 1),
        )
        for i, s in enumerate(saves(entry))
    ]
    headers = [("saved", False), ("code", False)] + [(m, True) for m in metrics]
    return Table(headers, rows, label="save")
