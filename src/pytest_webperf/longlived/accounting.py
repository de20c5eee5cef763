"""Where a stream run's messages went: arithmetic over the ledgers of its generator
processes (``swarm/child/stream.py`` writes one each; a distributed swarm's master merges
them here, as MQTT's are merged).

Every message carries its sender's id and sequence, so each (receiver, sender) stream is
accounted by the C loop: first copies, duplicates, copies out of order. What is expected:

- echo: every message a connection sent comes back once (lost = sent - first copies);
- fan-out: every subscriber gets every message of every publisher, and the publishers
  start only once every subscriber of the run is open (lost per subscriber = published
  - its first copies, whichever process published them);
- SSE: numeric ids count from the first a stream saw to the highest, across reconnects
  (a server that resumes after ``Last-Event-ID`` loses nothing).

Counted over the whole run (warm-up and the drain included): a message lost in warm-up
is still lost. A copy more than 256 sequences behind the highest seen cannot be told
from a duplicate: it counts as a first copy out of order, and as ``beyond_window``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

from pytest_webperf.stats.histogram import Histogram

COUNTERS = (
    "opens",
    "open_failures",
    "reconnects",
    "server_closes",
    "closes_clean",
    "close_timeouts",
    "abnormal",
    "pings",
    "pongs",
    "streams_ended",
    "sent",
    "received",
    "open_peak",
    "open_at_end",
    "rss_before_kib",
    "rss_open_kib",
    "connections",
)
ACCOUNTS = ("echo", "sse")  # [expected, first copies, duplicates, out of order, beyond window]


@dataclass(frozen=True)
class Tally:
    """Where the messages of a run went (echo, fan-out or SSE ids)."""

    expected: int  # copies the run should have received
    delivered: int  # first copies
    lost: int  # expected and never received by the end of the drain
    duplicates: int
    out_of_order: int
    beyond_window: int = 0


def merge_ledgers(ledgers: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The ledgers of several generator processes as one: counters summed, histograms
    added, publishers and subscribers listed together (publisher ids are disjoint:
    ``SwarmSpec.client_ids``), each process's rolls kept apart."""
    reports = list(ledgers)
    merged: dict[str, Any] = {k: sum(int(r.get(k, 0)) for r in reports) for k in COUNTERS}
    merged["processes"] = sum(int(r.get("processes", 1)) for r in reports)
    for name in ("upgrade", "ttfe"):
        total = Histogram()
        for report in reports:
            total += Histogram.from_dict(report.get(name, {}))
        merged[name] = total.to_dict()
    for name in ACCOUNTS:
        rows = [r.get(name) or [0] * 5 for r in reports]
        merged[name] = [sum(int(row[i]) for row in rows) for i in range(5)]
    for name in ("published", "subscribers", "rates", "rolls"):
        merged[name] = [item for r in reports for item in r.get(name, ())]
    merged["drain_s"] = max((float(r.get("drain_s", 0.0)) for r in reports), default=0.0)
    failures: dict[str, int] = {}
    for report in reports:
        for name, n in report.get("failures", {}).items():
            failures[name] = failures.get(name, 0) + int(n)
    merged["failures"] = failures
    return merged


def tally(ledger: Mapping[str, Any]) -> Tally:
    """Where the run's messages went, from its (merged) ledger."""
    expected = delivered = lost = duplicates = reordered = beyond = 0
    for name in ACCOUNTS:  # echo: what was sent; SSE: the ids' range
        want, got, dup, order, far = (int(x) for x in ledger.get(name) or [0] * 5)
        expected += want
        delivered += got
        lost += max(0, want - got)
        duplicates += dup
        reordered += order
        beyond += far
    published = sum(int(n) for _, n in ledger.get("published", ()))
    for _, got, dup, order, far in ledger.get("subscribers", ()):
        expected += published
        delivered += int(got)
        lost += max(0, published - int(got))
        duplicates += int(dup)
        reordered += int(order)
        beyond += int(far)
    return Tally(expected, delivered, lost, duplicates, reordered, beyond)


def window_rates(
    rolls: Sequence[Sequence[Sequence[float]]], duration_s: float
) -> tuple[float, float]:
    """Messages sent and answered per second over the measured phase: in each process's
    rolls ``(monotonic time, sent, answered)``, from the one nearest ``duration_s``
    before the last (the measured phase ends with a roll) to the last."""
    sent = answered = 0.0
    for process in rolls:
        if len(process) < 2 or duration_s <= 0:
            continue
        last = process[-1]
        first = min(process[:-1], key=lambda roll: abs(roll[0] - (last[0] - duration_s)))
        sent += last[1] - first[1]
        answered += last[2] - first[2]
    return (sent / duration_s, answered / duration_s) if duration_s > 0 else (0.0, 0.0)


def spread(rates: Sequence[float]) -> tuple[float, float, float] | None:
    """(min, median, max) of the streams' events per second; None without a stream."""
    return (min(rates), float(median(rates)), max(rates)) if rates else None


def per_connection(before_kib: float, open_kib: float, connections: int) -> float | None:
    """Bytes of memory each open connection took: what was resident with them open less
    what was before, over how many were open; None without a connection."""
    if connections <= 0 or before_kib <= 0 or open_kib <= 0:
        return None
    return (open_kib - before_kib) * 1024 / connections
