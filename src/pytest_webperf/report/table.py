"""The summary table's columns, shared by the terminal, Markdown and HTML reports.

They read the JSON report's dict (not the models), so an older or partial report
still renders, with ``-`` where a figure is missing. Renderers decide nothing:
verdicts come from the report.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_webperf.models.placement import Placement

Entry = Mapping[str, Any]  # one item of the report's "tests"
Column = tuple[str, Callable[[Entry], str]]

MISSING = "-"
SHORT = "short count:"  # a counted repetition's note (results.short_count), shown on its line


def number(value: object) -> float | None:
    """A finite number from the report, or None (missing, null, bool, NaN, text)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def repetitions(entry: Entry) -> list[Mapping[str, Any]]:
    reps = entry.get("repetitions")
    return [r for r in reps if isinstance(r, Mapping)] if isinstance(reps, list) else []


def rep_rps(rep: Mapping[str, Any]) -> float | None:
    rps = number(rep.get("rps"))
    if rps is not None:
        return rps
    requests, duration = number(rep.get("requests")), number(rep.get("duration_s"))
    return requests / duration if requests is not None and duration else None


def rep_latency(rep: Mapping[str, Any], field: str) -> float | None:
    """A latency figure in ms; None when no request completed (a 0 ms latency would lie)."""
    if number(rep.get("requests")) == 0:
        return None
    value = number(rep.get(field))
    latency = rep.get("latency")
    if value is None and isinstance(latency, Mapping):
        value = number(latency.get(field))
    return value


def rep_nested(rep: Mapping[str, Any], key: str, field: str) -> float | None:
    """``rep[key][field]`` (e.g. cpu_percent.mean), None when absent."""
    inner = rep.get(key)
    return number(inner.get(field)) if isinstance(inner, Mapping) else None


def present(values: Sequence[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def fmt(value: float | None, decimals: int = 0) -> str:
    return MISSING if value is None else f"{value:,.{decimals}f}"


def mean(values: Sequence[float | None]) -> float | None:
    got = present(values)
    return statistics.fmean(got) if got else None


def mean_sd(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (None for fewer than two values)."""
    got = present(values)
    if not got:
        return None, None
    return statistics.fmean(got), (statistics.stdev(got) if len(got) > 1 else None)


def spread(values: Sequence[float | None]) -> str:
    """Mean ± sample standard deviation (the mean alone for one repetition)."""
    centre, sd = mean_sd(values)
    if sd is None:
        return fmt(centre)
    return f"{centre:,.0f} ±{sd:,.0f}"


def _total(entry: Entry, field: str) -> str:
    values = present([number(r.get(field)) for r in repetitions(entry)])
    return fmt(sum(values)) if values else MISSING


def _latency(field: str) -> Callable[[Entry], str]:
    return lambda e: fmt(mean([rep_latency(r, field) for r in repetitions(e)]), 2)


def _cpu(entry: Entry) -> str:
    return fmt(mean([rep_nested(r, "cpu_percent", "mean") for r in repetitions(entry)]))


def _rss(entry: Entry) -> str:
    values = present([rep_nested(r, "rss_mb", "max") for r in repetitions(entry)])
    return fmt(max(values)) if values else MISSING


def _cpu_per_req(entry: Entry) -> str:
    return fmt(mean([number(r.get("cpu_per_req_us")) for r in repetitions(entry)]))


def _capacity(entry: Entry) -> str:
    """Estimated req/s the server's CPUs could serve (utilization law), beside the measured;
    for a ``webperf.capacity`` search, what it measured instead: its bracket (``400-418``,
    ``>=20,000`` at its limit, ``<50`` below its start) or why it has none."""
    search = entry.get("capacity")
    if isinstance(search, Mapping):
        low, high = number(search.get("low")), number(search.get("high"))
        status = search.get("status")
        if status == "found" and low is not None and high is not None:
            return f"{fmt(low)}-{fmt(high)}"
        if status == "at-limit" and low is not None:
            return f">={fmt(low)}"
        if status == "below-start" and high is not None:
            return f"<{fmt(high)}"
        return str(status or MISSING)
    return fmt(mean([number(r.get("capacity_rps")) for r in repetitions(entry)]))


def short_sha(commit: object) -> str:
    return str(commit)[:10] if commit else MISSING


def code(entry: Entry) -> str:
    """What code was measured: a container's image (each part's), a process target's
    commit (``+dirty`` when its tree had changes), ``no git repository`` for a process
    outside one; ``-`` when the report does not say (an external URL, an older report)."""
    target = entry.get("target")
    if not isinstance(target, Mapping):
        return MISSING
    if "git" in target:
        git = target["git"]
        if not isinstance(git, Mapping) or not git.get("commit"):
            return "no git repository"
        return f"commit {short_sha(git['commit'])}" + ("+dirty" if git.get("dirty") else "")
    if target.get("image"):
        return f"image {target['image']}"
    parts = target.get("parts")
    images = [
        f"{name} {part['image']}"
        for name, part in (parts.items() if isinstance(parts, Mapping) else ())
        if isinstance(part, Mapping) and part.get("image")
    ]
    return ("images " + ", ".join(images)) if images else MISSING


def short_test(entry: Entry) -> str:
    """The test's own part of the node id (what a user recognises in a long table)."""
    return str(entry.get("nodeid", MISSING)).split("::")[-1]


# Every verdict status a report can hold, in order of severity for a reader.
STATUSES = (
    "regression",
    "broken",
    "undecided",
    "generator-bound",
    "pass",
    "unchanged",
    "no-baseline",
)


def status(entry: Entry) -> str | None:
    verdict = entry.get("verdict")
    return str(verdict.get("status")) if isinstance(verdict, Mapping) else None


def verdict_texts(entry: Entry, key: str) -> list[str]:
    """The verdict's ``reasons`` or ``notes``."""
    verdict = entry.get("verdict")
    texts = verdict.get(key) if isinstance(verdict, Mapping) else None
    return [str(t) for t in texts] if isinstance(texts, list) else []


COLUMNS: tuple[Column, ...] = (
    ("test", short_test),
    ("workload", lambda e: str(e.get("name", MISSING))),
    ("server", lambda e: str(e.get("server", MISSING))),
    ("users", lambda e: fmt(number(e.get("concurrency")))),
    ("req/s", lambda e: spread([rep_rps(r) for r in repetitions(e)])),
    ("requests", lambda e: _total(e, "requests")),
    ("errors", lambda e: _total(e, "errors")),
    ("timeouts", lambda e: _total(e, "timeouts")),
    ("p50 ms", _latency("p50_ms")),
    ("p95 ms", _latency("p95_ms")),
    ("p99 ms", _latency("p99_ms")),
    ("cpu %", _cpu),
    ("rss MB", _rss),
    ("cpu/req us", _cpu_per_req),
    ("capacity~", _capacity),  # ~: an estimate (the utilization law's), not measured
)
NUMERIC = frozenset(name for name, _ in COLUMNS[3:])

# ---------------------------------------------------------------- a request mix's endpoints

Row = Mapping[str, Any]  # one item of an entry's "endpoints"


def endpoints(entry: Entry, key: str = "endpoints") -> list[Row]:
    """The entry's endpoint rows (``base_endpoints``: side A's), [] for a single shape."""
    rows = entry.get(key)
    return [r for r in rows if isinstance(r, Mapping)] if isinstance(rows, list) else []


def _percent(value: object) -> str:
    n = number(value)
    return MISSING if n is None else f"{100 * n:.1f}%"


def share(row: Row) -> str:
    """Its share of the requests, the share asked beside it: ``24.8% (asked 25.0%)``."""
    asked = number(row.get("weight"))
    return _percent(row.get("share")) + ("" if asked is None else f" (asked {_percent(asked)})")


def endpoint_label(row: Row) -> str:
    """``POST create``: the method and the endpoint's name."""
    return f"{row.get('method') or MISSING} {row.get('name', MISSING)}"


def _row_latency(field: str) -> Callable[[Row], str]:
    return lambda r: fmt(number(r.get(field)), 2)


# The summary table's cells of an endpoint row, by column (the rest stay empty): the
# row sits indented under its measurement, its share of the mix in the workload cell.
ENDPOINT_CELLS: Mapping[str, Callable[[Row], str]] = {
    "workload": lambda r: f"{endpoint_label(r)} {share(r)}",
    "req/s": lambda r: fmt(number(r.get("rps"))),
    "requests": lambda r: fmt(number(r.get("requests"))),
    "errors": lambda r: fmt(number(r.get("errors"))),
    "p50 ms": _row_latency("p50_ms"),
    "p95 ms": _row_latency("p95_ms"),
    "p99 ms": _row_latency("p99_ms"),
}


def endpoint_cells(row: Row, columns: Sequence[str], indent: str = "  - ") -> list[str]:
    """An endpoint's row under its measurement, for the given summary columns (the
    workload cell indented)."""
    cells = [ENDPOINT_CELLS[name](row) if name in ENDPOINT_CELLS else "" for name in columns]
    return [indent + c if name == "workload" else c for name, c in zip(columns, cells, strict=True)]


# A measurement's own endpoint table (the HTML report's section): every figure.
ENDPOINT_COLUMNS: tuple[tuple[str, Callable[[Row], str]], ...] = (
    ("endpoint", lambda r: str(r.get("name", MISSING))),
    ("method", lambda r: str(r.get("method") or MISSING)),
    ("requests", lambda r: fmt(number(r.get("requests")))),
    ("req/s", lambda r: fmt(number(r.get("rps")))),
    ("share", lambda r: _percent(r.get("share"))),
    ("asked", lambda r: _percent(r.get("weight"))),
    ("errors", lambda r: fmt(number(r.get("errors")))),
    ("error rate", lambda r: _percent(r.get("error_rate"))),
    ("p50 ms", _row_latency("p50_ms")),
    ("p95 ms", _row_latency("p95_ms")),
    ("p99 ms", _row_latency("p99_ms")),
)


def tests(report: Mapping[str, Any]) -> list[Entry]:
    entries = report.get("tests")
    return [e for e in entries if isinstance(e, Mapping)] if isinstance(entries, list) else []


def status_counts(entries: Sequence[Entry]) -> list[tuple[str, int]]:
    """How many measurements have each verdict status, in report order of first sight."""
    counts = Counter(status(e) or "no verdict" for e in entries)
    return list(counts.items())


def delivery(data: object, label: str) -> str | None:
    """Where one consumer's messages went (observer or store); None when it did not run."""
    if not isinstance(data, Mapping):
        return None
    text = (
        f"{label} {fmt(number(data.get('delivered')))} (lost {fmt(number(data.get('lost')))}, "
        f"dup {fmt(number(data.get('duplicates')))}, backlog {fmt(number(data.get('backlog')))}"
        f", unexpected {fmt(number(data.get('unexpected')))})"
    )
    latency = data.get("latency")
    if isinstance(latency, Mapping):
        text += (
            f" p50/p99 {fmt(number(latency.get('p50_ms')), 1)}/"
            f"{fmt(number(latency.get('p99_ms')), 1)} ms"
        )
    return text


def mqtt_lines(entries: Sequence[Entry]) -> list[str]:
    """Where every MQTT message went, one line per repetition of an MQTT measurement."""
    lines = []
    for entry in entries:
        for rep in repetitions(entry):
            mqtt = rep.get("mqtt")
            if not isinstance(mqtt, Mapping):
                continue
            parts = [
                f"{entry.get('nodeid')} [{entry.get('name')}] rep {rep.get('repetition')}: "
                f"{fmt(number(mqtt.get('users')))} users qos {mqtt.get('qos')}: published "
                f"{fmt(number(mqtt.get('published')))}, acked {fmt(number(mqtt.get('acked')))}",
                delivery(mqtt.get("observer"), "observer got"),
                delivery(mqtt.get("store"), "stored"),
                f"tps {fmt(number(mqtt.get('tps')))}",
            ]
            lines.append("; ".join(p for p in parts if p))
    return lines


def stream_text(stream: Mapping[str, Any]) -> str:
    """A WebSocket or SSE repetition's own figures in a line: connections, messages both
    ways, where every message went, the handshakes, time to first event, memory."""
    n = {k: number(v) for k, v in stream.items() if not isinstance(v, Mapping)}
    failed = stream.get("failures")
    kinds = ", ".join(f"{k}: {fmt(number(v))}" for k, v in failed.items()) if failed else ""
    parts = [
        f"{fmt(n.get('open_at_end'))} of {fmt(n.get('connections'))} open "
        f"({fmt(n.get('open_failures'))} failed opens, {fmt(n.get('reconnects'))} reconnects, "
        f"{fmt(n.get('abnormal'))} abnormal closes{'; the run: ' + kinds if kinds else ''})"
    ]
    if n.get("sent_per_s") is not None:
        parts.append(f"{fmt(n['sent_per_s'])}/s sent, {fmt(n.get('received_per_s'))}/s received")
    if n.get("expected"):
        parts.append(
            f"{fmt(n.get('delivered'))} of {fmt(n['expected'])} delivered (lost "
            f"{fmt(n.get('lost'))}, dup {fmt(n.get('duplicates'))}, out of order "
            f"{fmt(n.get('out_of_order'))})"
        )
    for name, label in (("upgrade", "upgrade"), ("ttfe", "first event")):
        if isinstance(latency := stream.get(name), Mapping):
            p50, p95 = number(latency.get("p50_ms")), number(latency.get("p95_ms"))
            parts.append(f"{label} p50/p95 {fmt(p50, 1)}/{fmt(p95, 1)} ms")
    if n.get("events_per_s_min") is not None:
        low, high = n["events_per_s_min"], n.get("events_per_s_max")
        parts.append(f"events/s per stream {fmt(low, 1)}...{fmt(high, 1)}")
    mem = [n.get(k) for k in ("mem_per_conn", "gen_mem_per_conn")]
    kb = [MISSING if m is None else f"{fmt(m / 1024, 1)} KB/conn" for m in mem]
    parts.append(f"server {kb[0]}, generator {kb[1]}")
    return "; ".join(parts)


def stream_lines(entries: Sequence[Entry]) -> list[str]:
    """A WebSocket or SSE measurement's own figures, one line per repetition."""
    return [
        f"{entry.get('nodeid')} [{entry.get('name')}] rep {rep.get('repetition')}: "
        + stream_text(stream)
        for entry in entries
        for rep in repetitions(entry)
        if isinstance(stream := rep.get("stream"), Mapping)
    ]


def paced_lines(entries: Sequence[Entry]) -> list[str]:
    """A paced HTTP measurement's times side by side, one line per repetition: p99 from
    the intended start (the table's latency), of the service time, and of the send lag;
    with an arrival rate, the users it needed."""
    lines = []
    for entry in entries:
        for rep in repetitions(entry):
            service, lag, latency = rep.get("service"), rep.get("schedule_lag"), rep.get("latency")
            if not isinstance(service, Mapping) or not isinstance(lag, Mapping):
                continue
            p99 = number(latency.get("p99_ms")) if isinstance(latency, Mapping) else None
            missed = [str(n) for n in rep.get("notes") or () if "schedule was not kept" in str(n)]
            lines.append(
                f"{entry.get('nodeid')} [{entry.get('name')}] rep {rep.get('repetition')}: "
                f"paced: p99 {fmt(p99, 1)} ms from the intended start, service p99 "
                f"{fmt(number(service.get('p99_ms')), 1)} ms, sends p99 "
                f"{fmt(number(lag.get('p99_ms')), 1)} ms late"
                + users_used(rep)
                + "".join(f"; {note}" for note in missed)
            )
    return lines


def users_used(rep: Mapping[str, Any]) -> str:
    """An arrival-rate run's users: the most busy at once, how many were ever opened
    (over HTTP/2 the busy ones are streams)."""
    peak = number(rep.get("users_peak"))
    if peak is None:
        return ""
    if isinstance(rep.get("http2"), Mapping):
        return f"; streams: {fmt(peak)} busy at most of {fmt(number(rep.get('in_flight')))}"
    return (
        f"; users: {fmt(peak)} busy at most, {fmt(number(rep.get('users_opened')))} opened "
        f"of {fmt(number(rep.get('concurrency')))}"
    )


def http2_lines(entries: Sequence[Entry]) -> list[str]:
    """An HTTP/2 measurement's connections, one line per repetition: connections x
    streams = in flight (what the server allowed), time to first byte beside latency,
    HPACK's savings, GOAWAY rotations, and request bodies that waited for window."""
    lines = []
    for entry in entries:
        for rep in repetitions(entry):
            h2 = rep.get("http2")
            if not isinstance(h2, Mapping):
                continue
            streams = number(h2.get("streams"))
            server = number(h2.get("server_streams"))
            allowed = (
                f" (the server allowed {fmt(server)})"
                if server is not None and streams is not None and 0 < server < streams
                else ""
            )
            ttfb, latency = rep.get("ttfb"), rep.get("latency")
            parts = [
                f"{entry.get('nodeid')} [{entry.get('name')}] rep {rep.get('repetition')}: "
                f"HTTP/2: {fmt(number(rep.get('concurrency')))} connections x {fmt(streams)} "
                f"stream{'' if streams == 1 else 's'} = "
                f"{fmt(number(rep.get('in_flight')))} in flight{allowed}"
            ]
            if isinstance(ttfb, Mapping) and isinstance(latency, Mapping):
                parts.append(
                    f"time to first byte p99 {fmt(number(ttfb.get('p99_ms')), 2)} ms "
                    f"(whole response {fmt(number(latency.get('p99_ms')), 2)} ms)"
                )
            saved = [number(h2.get("request_savings")), number(h2.get("response_savings"))]
            if saved[0] is not None or saved[1] is not None:
                parts.append(
                    f"HPACK saved {_percent(saved[0])} of request headers, "
                    f"{_percent(saved[1])} of response headers"
                )
            parts.append(
                f"{fmt(number(h2.get('opened')))} connections opened while measuring, "
                f"{fmt(number(h2.get('rotations')))} retired by GOAWAY "
                f"({fmt(number(h2.get('retried')))} streams re-sent)"
            )
            stalled = number(h2.get("stalled"))
            if stalled:
                stall = rep.get("body_stall")
                p99 = number(stall.get("p99_ms")) if isinstance(stall, Mapping) else None
                parts.append(
                    f"{fmt(stalled)} request bodies waited for the server's window "
                    f"(p99 {fmt(p99, 2)} ms)"
                )
            near = number(h2.get("near_closed"))
            if near:
                parts.append(f"{fmt(near)} DATA frames left the server's window below a frame")
            lines.append("; ".join(parts))
    return lines


def counted_lines(entries: Sequence[Entry]) -> list[str]:
    """A fixed-count measurement (ab's ``-n``) in ab's terms, one line per repetition."""
    lines = []
    for entry in entries:
        for rep in repetitions(entry):
            asked = number(rep.get("requests_asked"))
            if asked is None:
                continue
            lines.append(
                f"{entry.get('nodeid')} [{entry.get('name')}] rep {rep.get('repetition')}: "
                f"{fmt(number(rep.get('requests')))} of {fmt(asked)} requests in "
                f"{fmt(number(rep.get('time_taken_s')), 3)} s; time per request "
                f"{fmt(number(rep.get('time_per_request_ms')), 3)} ms (mean), "
                f"{fmt(number(rep.get('time_per_request_all_ms')), 3)} ms (mean, across all "
                f"concurrent requests); transfer rate {fmt(number(rep.get('transfer_kb_s')), 2)} "
                "KB/s"
                + "".join(
                    f"; {note}" for note in rep.get("notes") or () if str(note).startswith(SHORT)
                )
            )
    return lines


def placement_text(placement: object) -> str:
    """The report's ``placement`` in the terminal's words (``Placement.describe``)."""
    if not isinstance(placement, Mapping):
        return MISSING
    generator = placement.get("generator_cpus")
    target = placement.get("target_cpuset")
    return Placement(
        mode=str(placement.get("mode", MISSING)),
        target_cpuset=str(target) if target else None,
        generator_cpus=tuple(int(c) for c in generator if isinstance(c, int))
        if isinstance(generator, list)
        else (),
    ).describe()


def durations(entry: Entry) -> str:
    """The measured seconds of an entry's repetitions: ``10`` or ``9.5-10.2``."""
    got = present([number(r.get("duration_s")) for r in repetitions(entry)])
    if not got:
        return MISSING
    low, high = min(got), max(got)
    return fmt(low, 1) if high - low < 0.05 else f"{fmt(low, 1)}-{fmt(high, 1)}"
