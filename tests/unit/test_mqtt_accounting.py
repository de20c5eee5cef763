"""Accounting of MQTT runs: every published message is delivered, duplicated, lost or late."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.models.mqtt import Delivery
from pytest_webperf.mqtt.accounting import Published, account, delay_series, seed_tps
from pytest_webperf.mqtt.store import parse_rows
from pytest_webperf.stats.histogram import Histogram

counts = st.dictionaries(st.integers(1, 50), st.integers(0, 30), max_size=8)


def test_exactly_once_delivery_is_clean() -> None:
    published = Published({1: 3, 2: 2})
    copies = [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1)]
    d = account("store", published, reversed(copies), still_arriving=False)
    assert (d.received, d.delivered, d.duplicates, d.missing, d.lost, d.backlog) == (
        5,
        5,
        0,
        0,
        0,
        0,
    )


def test_duplicates_missing_and_unexpected_are_told_apart() -> None:
    published = Published({1: 3})
    d = account(
        "observer",
        published,
        [(1, 0), (1, 0), (1, 0), (1, 2), (9, 0), (1, 7)],
        still_arriving=False,
    )
    assert d.delivered == 2
    assert d.duplicates == 2
    assert d.missing == d.lost == 1
    assert d.unexpected == 2
    assert d.received == 6


def test_missing_is_backlog_while_messages_still_arrive() -> None:
    d = account("store", Published({1: 4}), [(1, 0)], still_arriving=True)
    assert (d.missing, d.backlog, d.lost) == (3, 3, 0)


def test_unacknowledged_messages_are_not_missing() -> None:
    published = Published({1: 4}, {1: frozenset({2, 3})})
    d = account("store", published, [(1, 0), (1, 1), (1, 3)], still_arriving=False)
    assert d.missing == 0
    assert d.delivered == 3  # an unacknowledged message that arrived is still delivered


def test_latency_is_reported_only_when_there_is_one() -> None:
    h = Histogram()
    assert account("o", Published({}), [], still_arriving=False, latency=h).latency is None
    h.record(2000)
    latency = account("o", Published({}), [], still_arriving=False, latency=h).latency
    assert latency is not None and 1.9 < latency.p50_ms < 2.1


@given(counts, st.data())
def test_every_copy_is_counted_exactly_once(
    published_counts: dict[int, int], data: st.DataObject
) -> None:
    published = Published(published_counts)
    universe = [(c, s) for c, n in published_counts.items() for s in range(n + 2)]
    copies = data.draw(st.lists(st.sampled_from(universe), max_size=60)) if universe else []
    d = account("x", published, copies, still_arriving=data.draw(st.booleans()))
    assert d.received == len(copies)
    assert d.delivered + d.duplicates + d.unexpected == d.received
    assert d.delivered + d.missing == published.total
    assert d.lost + d.backlog == d.missing
    assert 0 in (d.lost, d.backlog)


def test_seed_tps_is_stored_over_the_whole_span() -> None:
    assert seed_tps(1000, 100.0, 110.0) == 100.0
    assert seed_tps(0, 100.0, 110.0) is None
    assert seed_tps(5, 100.0, 100.0) is None


def test_store_rows_parse_and_skip_rows_without_bookkeeping() -> None:
    rows = parse_rows("1\t0\t100.5\t100.75\n2\tNULL\tNULL\t101.0\n\n3\t4\t1.0\t2.0\n")
    assert [(r.client, r.seq) for r in rows] == [(1, 0), (3, 4)]
    assert rows[0].received_at - rows[0].sent_at == 0.25


def test_the_ledgers_of_several_generator_processes_merge_into_one_report() -> None:
    from pytest_webperf.measurement.mqtt import published_from
    from pytest_webperf.mqtt.accounting import merge_reports
    from pytest_webperf.stats.histogram import Histogram

    def ledger(clients: list[list[object]], lag_us: int, first: float, **counts: int) -> dict:
        lag = Histogram()
        lag.record(lag_us)
        base = {"late": 0, "connect_failures": 0, "disconnects": 0, "publish_errors": 0}
        return {
            "clients": clients,
            "pace_lag": lag.to_dict(),
            "first_sent": first,
            "stopped_at": first + 10,
            **base,
            **counts,
        }

    merged = merge_reports(
        iter(
            [
                ledger([[1, 5, []], [2, 4, [3]]], 100, 50.0, late=1),
                ledger([[41, 6, []]], 300, 49.5, disconnects=2),
                ledger([], 0, 0.0),  # a process that got no users
            ]
        )
    )
    published = published_from(merged)
    assert published.counts == {1: 5, 2: 4, 41: 6}
    assert published.unacked == {2: frozenset({3})}
    assert (merged["late"], merged["disconnects"], merged["first_sent"]) == (1, 2, 49.5)
    assert merged["stopped_at"] == 60.0
    assert Histogram.from_dict(merged["pace_lag"]).count == 3


@given(
    st.lists(
        st.tuples(st.floats(0, 30), st.floats(0, 10)),  # (seconds after the first send, delay)
        min_size=1,
        max_size=200,
    )
)
def test_the_delay_series_groups_every_stored_message_by_the_second_it_was_sent(
    messages: list[tuple[float, float]],
) -> None:
    first = 1_700_000_000.0
    series = delay_series(((first + t, first + t + d) for t, d in messages), first)
    assert sum(p.count for p in series) == len(messages)
    assert [p.t_s for p in series] == sorted({int((first + t) - first) for t, _ in messages})
    for point in series:
        assert 0 <= point.p50_ms <= point.p99_ms <= point.max_ms + 1e-6
    worst = max(d for _, d in messages) * 1000
    assert max(p.max_ms for p in series) <= worst * 1.01 + 1e-3  # the histogram's bucket


def test_a_store_falling_behind_reads_as_a_growing_series_and_round_trips() -> None:
    first = 100.0
    rows = [(first + t / 10, first + t / 10 + t / 10) for t in range(50)]  # delay = age
    series = delay_series(rows, first)
    assert [p.t_s for p in series] == [0, 1, 2, 3, 4]
    assert series[-1].p50_ms > series[0].p50_ms + 3000
    delivery = Delivery("store", 50, 50, 0, 0, 0, 0, delay=series)
    assert Delivery.from_dict(delivery.to_dict()) == delivery
    assert Delivery.from_dict({**delivery.to_dict(), "delay": []}).delay == ()
