"""The checks of a verdict and the two sides of an A/B run, as text for every renderer.

Reads the report's dict (``docs/reference/report-schema.md``): ``verdict.checks``, an entry's
``against`` and ``base_repetitions``, the run's ``against``. Figures are formatted here
once, so the terminal, Markdown and HTML say the same; nothing is decided here, and a
missing key shows as ``-``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from pytest_webperf.gate.metrics import METRICS as ALL_METRICS
from pytest_webperf.report import counts
from pytest_webperf.report.table import (
    MISSING,
    Entry,
    number,
    rep_latency,
    rep_nested,
    rep_rps,
    repetitions,
    short_sha,
)

Check = Mapping[str, Any]  # one item of verdict.checks
Rep = Mapping[str, Any]


def checks(entry: Entry) -> list[Check]:
    verdict = entry.get("verdict")
    found = verdict.get("checks") if isinstance(verdict, Mapping) else None
    return [c for c in found if isinstance(c, Mapping)] if isinstance(found, list) else []


def is_ab(entry: Entry) -> bool:
    """An entry of an A/B run: side A measured beside side B."""
    return isinstance(entry.get("against"), Mapping) and isinstance(
        entry.get("base_repetitions"), list
    )


def base_repetitions(entry: Entry) -> list[Rep]:
    reps = entry.get("base_repetitions")
    return [r for r in reps if isinstance(r, Mapping)] if isinstance(reps, list) else []


def against_line(against: object) -> str | None:
    """``A = main (1a2b3c4d5e), B = working tree`` for an A/B run; None otherwise."""
    if isinstance(against, str):  # a bare ref, should the run meta carry only that
        against = {"ref": against}
    if not isinstance(against, Mapping):
        return None
    ref = against.get("ref") or MISSING
    commit = against.get("commit")
    return f"A = {ref}" + (f" ({short_sha(commit)})" if commit else "") + ", B = working tree"


def pairs_line(entry: Entry) -> str | None:
    """How many pairs an A/B entry ran and why no more: every check decided, or its
    budget spent with checks undecided (``--webperf-against-budget``)."""
    against = entry.get("against")
    if not isinstance(against, Mapping) or not against.get("stopped"):
        return None
    return f"{against.get('pairs', MISSING)} pairs: {against['stopped']}"


def run_against(report: Mapping[str, Any]) -> str | None:
    """The run's A/B line, from its meta (or, lacking that, from its first A/B entry)."""
    line = against_line(report.get("against"))
    if line:
        return line
    tests = report.get("tests")
    for entry in tests if isinstance(tests, list) else ():
        if isinstance(entry, Mapping) and is_ab(entry):
            return against_line(entry["against"])
    return None


# ---------------------------------------------------------------- figures


def value(figure: object) -> str:
    """A measured value in its own unit, to about three significant digits."""
    n = number(figure)
    if n is None:
        return MISSING
    decimals = 0 if abs(n) >= 100 else 1 if abs(n) >= 10 else 2
    return f"{n:,.{decimals}f}"


def percent(fraction: object, digits: int = 1) -> str:
    """A relative change, signed: ``-0.162`` is ``-16.2%``."""
    n = number(fraction)
    return MISSING if n is None else f"{100 * n:+.{digits}f}%"


def digits(check: Check) -> int:
    """Decimals of a check's percentages: 2 for a counted figure (its changes are read to
    0.01 %), 3 where its change or its interval is narrower than 0.1 % (``+0.012%``,
    ``+0.004..+0.020%``, not ``+0.00..+0.02%``), else 1."""
    metric = ALL_METRICS.get(_metric(check))
    if metric is None or not metric.precise:
        return 1
    change, low, high = (number(check.get(k)) for k in ("change", "low", "high"))
    sizes = [abs(change) if change is not None else None]
    sizes.append(high - low if low is not None and high is not None else None)
    finest = min((s for s in sizes if s is not None and s > 0), default=1.0)
    return 3 if 100 * finest < 0.1 else 2


def resolved_within(check: Check) -> str | None:
    """``resolved, within 1%``: a passed check whose interval excludes no change (the run
    resolved it) and stays within the threshold; None otherwise."""
    low, high, threshold = (number(check.get(k)) for k in ("low", "high", "threshold"))
    if check.get("outcome") != "pass" or low is None or high is None or threshold is None:
        return None
    if low <= 0 <= high:
        return None
    return f"resolved, within {100 * abs(threshold):g}%"


def outcome(check: Check) -> str:
    """The check's outcome, and for a resolved pass that it was: ``pass (resolved, within
    1%)``."""
    text = _text(check, "outcome")
    resolved = resolved_within(check)
    return f"{text} ({resolved})" if resolved else text


def interval(check: Check) -> str:
    low, high = number(check.get("low")), number(check.get("high"))
    if low is None or high is None:
        return MISSING
    d = digits(check)
    top = f"{100 * high:+.{d}f}%" if high <= DETECTABLE_CAP else f">+{100 * DETECTABLE_CAP:.0f}%"
    return f"{100 * low:+.{d}f}..{top}"


def detectable(check: Check) -> str:
    """The smallest regression this run could have caught, e.g. ``>= 7%``."""
    n = number(check.get("detectable"))
    if n is None:
        return MISSING
    if n > DETECTABLE_CAP:  # one or two instances: the figure says only "nothing known"
        return f"> {100 * DETECTABLE_CAP:.0f}%"
    shown = f"{100 * n:.0f}" if 100 * n >= 10 else f"{100 * n:.{digits(check)}f}"
    return f">= {shown}%"


DETECTABLE_CAP = 10.0  # as checking.DETECTABLE_CAP; renderers read dicts, not compare


def _text(check: Check, key: str) -> str:
    got = check.get(key)
    return MISSING if got is None or got == "" else str(got)


def check_headers(ab: bool) -> list[str]:
    base, current = ("A", "B") if ab else ("baseline", "current")
    return ["check", base, current, "change", "interval", "could detect", "outcome"]


def check_cells(check: Check) -> list[str]:
    return [
        _text(check, "check"),
        value(check.get("baseline")),
        value(check.get("current")),
        percent(check.get("change"), digits(check)),
        interval(check),
        detectable(check),
        outcome(check),
    ]


WHY_NOT_CHECKED = {
    "contended": "other processes took the CPU",
    "generator-bound": "the generator, not the server, was the limit",
}


def not_checked(entry: Entry) -> list[str]:
    """A line per check the gate compared and did not check (``checked`` false): what it
    could have detected against what was asked, and what would decide it."""
    lines = []
    for check in checks(entry):
        if check.get("checked") is not False:
            continue
        threshold = number(check.get("threshold"))
        could = detectable(check)
        if could != MISSING and threshold is not None:
            why = f"could detect {could}, asked {100 * threshold:g}%"
        else:
            why = WHY_NOT_CHECKED.get(str(check.get("outcome")), str(check.get("outcome")))
        remedy = check.get("would_decide")
        lines.append(
            f"{_text(check, 'check')}: not checked: {why}" + (f"; {remedy}" if remedy else "")
        )
    return lines


def other_notes(entry: Entry) -> list[str]:
    """The verdict's notes but those about a check not checked (``not_checked`` says
    what they say, in a line, with what would decide it)."""
    unchecked = tuple(f"{label(c)}:" for c in checks(entry) if c.get("checked") is False)
    found = entry.get("verdict")
    notes = found.get("notes") if isinstance(found, Mapping) else None
    return [str(n) for n in notes or () if not str(n).startswith(unchecked or ("\0",))]


def _metric(check: Check) -> str:
    return str(check.get("metric") or str(check.get("check", MISSING)).split(":")[0])


def endpoint(check: Check) -> str | None:
    """The endpoint of a request mix a check judged alone, or None (the whole run)."""
    found = check.get("endpoint")
    return str(found) if found else None


def label(check: Check) -> str:
    """``p95``, or ``p95[create]`` for an endpoint's check."""
    found = endpoint(check)
    return _metric(check) if found is None else f"{_metric(check)}[{found}]"


def base_summary(entry: Entry) -> str:
    """The baseline (or side A) of every check, for one summary cell: ``rps 1,234``."""
    found = checks(entry)
    if not found:
        return MISSING
    return "; ".join(f"{label(c)} {value(c.get('baseline'))}" for c in found)


def change_summary(entry: Entry) -> str:
    """The change of every check with its interval, for one summary cell: ``rps -4.2%
    (-7.1..-1.6%)``."""
    found = checks(entry)
    if not found:
        return MISSING

    def one(check: Check) -> str:
        span = interval(check)
        text = f"{label(check)} {percent(check.get('change'), digits(check))}"
        return text if span == MISSING else f"{text} ({span})"

    return "; ".join(one(c) for c in found)


SUMMARY_COLUMNS: tuple[tuple[str, Callable[[Entry], str]], ...] = (
    ("baseline / A", base_summary),
    ("change", change_summary),
)


# ---------------------------------------------------------------- metrics per repetition

# How to read a check's metric off one repetition, and its unit (for paired charts).
METRICS: dict[str, tuple[str, Callable[[Rep], float | None]]] = {
    "rps": ("req/s", rep_rps),
    "cpu_per_req": ("CPU µs per request", lambda r: number(r.get("cpu_per_req_us"))),
    "p50": ("p50 latency (ms)", lambda r: rep_latency(r, "p50_ms")),
    "p95": ("p95 latency (ms)", lambda r: rep_latency(r, "p95_ms")),
    "p99": ("p99 latency (ms)", lambda r: rep_latency(r, "p99_ms")),
    "latency_mean": ("mean latency (ms)", lambda r: rep_latency(r, "mean_ms")),
    "cpu": ("CPU % (mean)", lambda r: rep_nested(r, "cpu_percent", "mean")),
    "rss": ("peak RSS (MB)", lambda r: rep_nested(r, "rss_mb", "max")),
    "errors": ("errors", lambda r: number(r.get("errors"))),
    "timeouts": ("timeouts", lambda r: number(r.get("timeouts"))),
    **{key: (f"{name} per request", counts.reader(key)) for key, name, _ in counts.FIGURES},
}
# Metrics where a higher value is better; for the rest, higher is worse.
HIGHER_IS_BETTER = frozenset({"rps", "tps", "capacity"})


def split_label(text: str) -> tuple[str, str | None]:
    """``p95[create]`` -> (``p95``, ``create``); ``p95`` -> (``p95``, None)."""
    metric, bracket, rest = text.partition("[")
    return (metric, rest[:-1]) if bracket and rest.endswith("]") else (text, None)


def unit(text: str) -> str:
    """A chart's axis label for a metric (or an endpoint's metric)."""
    metric, found = split_label(text)
    named = METRICS[metric][0] if metric in METRICS else metric
    return named if found is None else f"{named}, {found}"


def _of_endpoint(read: Callable[[Rep], float | None], name: str) -> Callable[[Rep], float | None]:
    """A repetition's reader applied to one of its endpoints (same keys, see the schema)."""

    def of(rep: Rep) -> float | None:
        found = rep.get("endpoints")
        row = found.get(name) if isinstance(found, Mapping) else None
        return read(row) if isinstance(row, Mapping) else None

    return of


def pairs(entry: Entry, metric: str) -> list[tuple[float | None, float | None]]:
    """(A, B) per pair for a metric (``p95``, or ``p95[create]`` read from that endpoint of
    each repetition): ``base_repetitions[i]`` against ``repetitions[i]``."""
    name, found = split_label(metric)
    got = METRICS.get(name)
    if got is None:
        return []
    read = got[1] if found is None else _of_endpoint(got[1], found)
    a, b = base_repetitions(entry), repetitions(entry)
    return [
        (read(a[i]) if i < len(a) else None, read(b[i]) if i < len(b) else None)
        for i in range(max(len(a), len(b)))
    ]


def signed_threshold(check: Check) -> float | None:
    """The threshold on the side where "worse" lies: a sign written in the check wins
    (``rps:-5%``), else the metric's direction (throughput down, the rest up)."""
    threshold = number(check.get("threshold"))
    if threshold is None:
        return None
    text = str(check.get("check", ""))
    written = re.search(r":\s*([+-])", text[text.rfind("]") + 1 :])  # not in an endpoint
    if written:
        return abs(threshold) * (-1 if written.group(1) == "-" else 1)
    return -abs(threshold) if _metric(check) in HIGHER_IS_BETTER else abs(threshold)


def orders(entry: Entry) -> list[str]:
    """``"AB"`` or ``"BA"`` per pair: the entry's ``order``, its ``against.order``, or
    each repetition's ``order``."""
    against = entry.get("against")
    for got in (entry.get("order"), against.get("order") if isinstance(against, Mapping) else None):
        if isinstance(got, list):
            return [str(o) for o in got]
    return [str(r.get("order", MISSING)) for r in repetitions(entry)]


def metric_names(entry: Entry) -> list[str]:
    """The metrics of an entry's checks that can be read per repetition, once each:
    ``p95``, or ``p95[create]`` for an endpoint's check (read from that endpoint)."""
    return list(dict.fromkeys(label(c) for c in checks(entry) if _metric(c) in METRICS))


def pair_rows(entry: Entry) -> tuple[list[str], list[list[str]]]:
    """A table of the pairs: order, then A and B for each checked metric."""
    metrics = metric_names(entry) or ["rps"]
    head = ["pair", "order"] + [f"{m} {side}" for m in metrics for side in ("A", "B")]
    columns = [pairs(entry, m) for m in metrics]
    order = orders(entry)
    rows = []
    for i in range(max((len(c) for c in columns), default=0)):
        cells = [str(i + 1), order[i] if i < len(order) else MISSING]
        for column in columns:
            a, b = column[i] if i < len(column) else (None, None)
            cells += [value(a), value(b)]
        rows.append(cells)
    return head, rows


PROFILE_TOP = 3  # functions named under a check
OPEN_OUTCOMES = ("fail", "not-credible", "undecided")
LATENCY = frozenset({"p50", "p95", "p99", "latency_mean"})


def profile_of(entry: Entry) -> Mapping[str, Any] | None:
    profile = entry.get("profile")
    return profile if isinstance(profile, Mapping) else None


def profile_changes(entry: Entry) -> list[Mapping[str, Any]]:
    """The ranked functions of an entry's differential profile (``[]`` if none)."""
    profile = profile_of(entry)
    found = profile.get("changes") if profile is not None else None
    return [c for c in found if isinstance(c, Mapping)] if isinstance(found, list) else []


def change_line(change: Mapping[str, Any]) -> str:
    """``+31.2 µs/req (+20.1..+44.0) x2.9  sha256_block_data_order (libcrypto.so.3)``;
    the interval and the ratio where the entry has them."""
    value = change.get("change_us")
    figure = f"{value:+.1f}" if isinstance(value, int | float) else MISSING
    low, high, ratio = (number(change.get(k)) for k in ("low_us", "high_us", "ratio"))
    extra = f" ({low:+.1f}..{high:+.1f})" if low is not None and high is not None else ""
    extra += f" x{ratio:.2g}" if ratio is not None else ""
    return f"{figure} µs/req{extra}  {change.get('function') or MISSING}"


def _open(entry: Entry) -> tuple[bool, bool]:
    """Whether a CPU or throughput check is open (failed or undecided), and whether an
    rps or latency check is."""
    cpu = moved = False
    for c in checks(entry):
        if c.get("outcome") not in OPEN_OUTCOMES:
            continue
        metric = str(c.get("metric", ""))
        throughput = metric in ALL_METRICS and ALL_METRICS[metric].throughput
        cpu = cpu or metric.startswith("cpu") or throughput
        moved = moved or throughput or metric in LATENCY
    return cpu, moved


COUNTED_PROFILED = frozenset({"instructions_per_req", "allocs_per_req"})


def profile_lines(entry: Entry) -> list[str]:
    """Under a failed or undecided CPU, throughput or latency check: the functions whose
    CPU per request changed most (with the part of the change they explain), or the
    sentence that says why none is named; that the time went elsewhere when the CPU did
    not move; or why there is no profile. Under a counted check, the functions whose
    instructions per request changed (``counts.profile_lines``)."""
    profile = profile_of(entry)
    if profile is not None and profile.get("unit") == "Ir":
        counted = [
            c
            for c in checks(entry)
            if c.get("outcome") in OPEN_OUTCOMES and c.get("metric") in COUNTED_PROFILED
        ]
        return counts.profile_lines(profile, PROFILE_TOP) if counted else []
    cpu, waits = _open(entry)
    if profile is None or not (cpu or waits):
        return []
    elsewhere = profile.get("elsewhere")
    if waits and elsewhere:
        return [f"profile: {elsewhere}"]
    if profile.get("why"):
        return [f"no CPU profile: {profile['why']}"]
    sides = "B - A" if is_ab(entry) else "this run - baseline"
    samples = profile.get("samples")
    per_side = samples if isinstance(samples, Mapping) else {}
    head = (
        f"profile ({sides}, CPU per request; {value(per_side.get('A'))} samples of "
        f"{'A' if is_ab(entry) else 'the baseline'}, {value(per_side.get('B'))} of "
        f"{'B' if is_ab(entry) else 'this run'})"
    )
    changes = profile_changes(entry)
    if not changes:
        why = (
            profile.get("unresolved")
            or f"no function changed credibly ({profile.get('tested', MISSING)} tested)"
        )
        return [f"{head}: {why}"]
    lines = [f"{head}:"] + ["  " + change_line(c) for c in changes[:PROFILE_TOP]]
    explained, total = number(profile.get("explained")), number(profile.get("total_change_us"))
    if isinstance(profile.get("explains"), str):
        lines.append(f"  {profile['explains']}")
    elif explained is not None and total is not None:  # a report written before it had words
        lines.append(f"  the named functions explain {100 * explained:.0f}% of {total:+.1f} µs/req")
    return lines
