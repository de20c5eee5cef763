"""The lines under the summary table, by what a run did: MQTT
deliveries, streams, pacing, HTTP/2, counted windows, placement and durations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_webperf.models.placement import Placement
from pytest_webperf.report.table.endpoints import _percent
from pytest_webperf.report.table.figures import (
    MISSING,
    SHORT,
    Entry,
    fmt,
    number,
    present,
    repetitions,
)


def tests(report: Mapping[str, Any]) -> list[Entry]:
    entries = report.get("tests")
    return [e for e in entries if isinstance(e, Mapping)] if isinstance(entries, list) else []


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
    series = delay_points(data.get("delay"))
    if series:
        text += "; p99 delay by second sent: " + ", ".join(
            f"{fmt(number(p.get('t_s')))} s {fmt(number(p.get('p99_ms')), 1)} ms" for p in series
        )
    return text


SHOWN_POINTS = 6  # of a delay series, on one line: the first, the last, evenly between


def delay_points(series: object) -> list[Mapping[str, Any]]:
    """At most ``SHOWN_POINTS`` of a store's publish-to-store delay series, evenly picked
    (the first and the last among them): enough to see it stay flat or grow."""
    points = [p for p in series if isinstance(p, Mapping)] if isinstance(series, list) else []
    if len(points) <= SHOWN_POINTS:
        return points
    step = (len(points) - 1) / (SHOWN_POINTS - 1)
    return [points[round(i * step)] for i in range(SHOWN_POINTS)]


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


def http2_notes(entries: Sequence[Entry]) -> list[str]:
    """What the terminal says of HTTP/2 by default: a line per measurement where the
    connections did not carry the load asked (the server allowed fewer streams, request
    bodies waited for its window); the per-repetition details are ``http2_lines``'s."""
    lines = []
    for entry in entries:
        said: dict[str, None] = {}
        for rep in repetitions(entry):
            h2 = rep.get("http2")
            if not isinstance(h2, Mapping):
                continue
            streams, server = number(h2.get("streams")), number(h2.get("server_streams"))
            if server is not None and streams is not None and 0 < server < streams:
                said[f"the server allowed {fmt(server)} of the {fmt(streams)} streams asked"] = None
            if number(h2.get("stalled")):
                said["request bodies waited for the server's window"] = None
        if said:
            lines.append(
                f"{entry.get('nodeid')} [{entry.get('name')}]: HTTP/2: {'; '.join(said)} "
                "(-v: each repetition's connections)"
            )
    return lines


def http2_lines(entries: Sequence[Entry]) -> list[str]:
    """An HTTP/2 measurement's connections, one line per repetition (with -v): connections
    x streams = in flight (what the server allowed), time to first byte beside latency,
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
