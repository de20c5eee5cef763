"""Where messages went: pure arithmetic over what was published and what each consumer got.

Messages are identified by (clientId, seq); client c published seqs 0..n-1. A consumer's
copies are compared with that set: first copies are deliveries, further copies duplicates,
copies of pairs never published ``unexpected``. A message acknowledged to its publisher
(PUBCOMP at QoS 2) and not delivered by the cutoff is ``missing``; it is ``backlog`` when
the consumer was still receiving at the cutoff, else ``lost``. Messages never acknowledged
are not counted missing: the broker never took responsibility for them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_webperf.models.mqtt import DelayPoint, Delivery
from pytest_webperf.models.samples import Latency
from pytest_webperf.stats.histogram import Histogram


@dataclass(frozen=True)
class Published:
    """The publishers' side: per client how many were sent, and which were never acked."""

    counts: Mapping[int, int]
    unacked: Mapping[int, frozenset[int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def unacked_total(self) -> int:
        return sum(len(v) for v in self.unacked.values())

    def was_published(self, client: int, seq: int) -> bool:
        return 0 <= seq < self.counts.get(client, 0)

    def acked(self, client: int, seq: int) -> bool:
        return seq not in self.unacked.get(client, frozenset())


def account(
    consumer: str,
    published: Published,
    copies: Iterable[tuple[int, int]],
    *,
    still_arriving: bool,
    latency: Histogram | None = None,
) -> Delivery:
    """One consumer's ``Delivery`` from its (clientId, seq) copies, in any order."""
    seen: Counter[tuple[int, int]] = Counter(copies)
    received = sum(seen.values())
    delivered = duplicates = unexpected = 0
    for (client, seq), n in seen.items():
        if published.was_published(client, seq):
            delivered += 1
            duplicates += n - 1
        else:
            unexpected += n
    missing = sum(
        1
        for client, count in published.counts.items()
        for seq in range(count)
        if published.acked(client, seq) and (client, seq) not in seen
    )
    return Delivery(
        consumer=consumer,
        received=received,
        delivered=delivered,
        duplicates=duplicates,
        missing=missing,
        lost=0 if still_arriving else missing,
        backlog=missing if still_arriving else 0,
        unexpected=unexpected,
        latency=Latency.of(latency) if latency is not None and latency.count else None,
    )


def delay_series(
    sent_and_stored: Iterable[tuple[float, float]], first_sent: float
) -> tuple[DelayPoint, ...]:
    """Each second's publish-to-store delay, from (sent_at, stored_at) pairs: the
    messages grouped by the second they were sent in, counted from ``first_sent``; a
    second nothing sent in was stored in is left out."""
    by_second: dict[int, Histogram] = {}
    for sent, stored in sent_and_stored:
        second = max(0, int(sent - first_sent))
        by_second.setdefault(second, Histogram()).record(max(0, int((stored - sent) * 1e6)))
    return tuple(
        DelayPoint(
            t_s=second,
            count=h.count,
            p50_ms=h.percentile(50) / 1000,
            p99_ms=h.percentile(99) / 1000,
            max_ms=h.max() / 1000,
        )
        for second, h in sorted(by_second.items())
    )


def seed_tps(stored: int, first_sent: float, last_stored: float) -> float | None:
    """Seed 002's throughput: messages the server processed / total test duration."""
    span = last_stored - first_sent
    return stored / span if stored and span > 0 else None


def merge_reports(ledgers: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The publishers' ledgers of several generator processes as one report (their
    client ids are disjoint ranges: ``SwarmSpec.client_ids``)."""
    reports = list(ledgers)
    lag = Histogram()
    for report in reports:
        lag += Histogram.from_dict(report["pace_lag"])
    sent = [r["first_sent"] for r in reports if r["first_sent"]]
    merged: dict[str, Any] = {
        "clients": sorted(c for r in reports for c in r["clients"]),
        "pace_lag": lag.to_dict(),
        "first_sent": min(sent) if sent else 0.0,
        "stopped_at": max((r["stopped_at"] for r in reports), default=time.time()),
    }
    for key in ("late", "connect_failures", "disconnects", "publish_errors"):
        merged[key] = sum(int(r[key]) for r in reports)
    return merged
