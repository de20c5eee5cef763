"""Paced HTTP: the per-request arithmetic, the recorder's schedule histograms and the
rule that a generator behind its schedule measured itself."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.measurement.punctuality import fell_behind
from pytest_webperf.models.samples import GeneratorSample
from pytest_webperf.models.workload import Workload
from pytest_webperf.stats.histogram import Histogram
from pytest_webperf.swarm.pacing import first_due, kept, timing
from pytest_webperf.swarm.recorder import Interval

NS = st.integers(min_value=0, max_value=10**12)


@given(intended=NS, delay=NS, service=NS)
def test_latency_from_the_intended_start_covers_the_send_delay(
    intended: int, delay: int, service: int
) -> None:
    sent = intended + delay  # the connection was busy, or the generator woke late
    t = timing(intended, sent, sent + service)
    assert t.service_us == service // 1000
    assert t.lag_us == delay // 1000
    assert (delay + service) // 1000 - 1 <= t.latency_us <= (delay + service) // 1000
    assert t.latency_us >= t.service_us and t.latency_us >= t.lag_us


@given(intended=NS, early=NS, service=NS)
def test_a_send_on_time_has_no_lag_and_latency_is_service(
    intended: int, early: int, service: int
) -> None:
    sent = max(0, intended - early)  # a timer may fire a little early: never negative
    t = timing(intended, sent, sent + service)
    assert t.lag_us == 0 and t.latency_us == t.service_us == service // 1000


def test_a_stall_is_charged_to_every_request_it_delayed() -> None:
    """wrk2's example: 10 ms pacing, the server stalls 1 s on one request. Closed-loop
    timing sees one slow request; from the intended start, the ~100 behind it wait too."""
    period, stall = 10_000_000, 1_000_000_000
    intended, free_at, latencies, services = 0, 0, [], []
    for k in range(300):
        sent = max(intended, free_at)
        done = sent + (stall if k == 50 else 100_000)
        t = timing(intended, sent, done)
        latencies.append(t.latency_us)
        services.append(t.service_us)
        free_at, intended = done, intended + period
    slow = [x for x in latencies if x > 100]  # more than the 0.1 ms service time
    assert 95 <= len(slow) <= 101  # every request due during the stall
    assert sorted(services)[-2] == 100  # service time: the stalled request alone
    late = Histogram()
    late.record_many(latencies)
    assert late.percentile(99) >= 900_000


@given(
    users=st.integers(1, 10_000),
    period=st.floats(0.001, 10),
    seconds=st.floats(0.1, 600),
    share=st.floats(0, 2),
)
def test_kept_is_the_share_of_the_offered_rate(
    users: int, period: float, seconds: float, share: float
) -> None:
    requests = round(share * users / period * seconds)
    assert kept(requests, seconds, users, period) == pytest.approx(
        requests / seconds / (users / period)
    )
    assert kept(requests, 0, users, period) == 0.0


def test_bad_timings_are_refused() -> None:
    with pytest.raises(ValueError, match="response before its request"):
        timing(0, 10, 5)
    with pytest.raises(ValueError, match="period"):
        first_due(0, 0, 0.5)
    with pytest.raises(ValueError, match="fraction"):
        first_due(0, 10, 1.0)
    with pytest.raises(ValueError, match="interval"):
        Workload(interval_s=-1)


@given(now=NS, period=st.integers(min_value=1, max_value=10**10), fraction=st.floats(0, 0.999))
def test_users_start_within_one_period(now: int, period: int, fraction: float) -> None:
    assert now <= first_due(now, period, fraction) < now + period


def test_schedule_histograms_merge_and_travel() -> None:
    a, b = Interval(), Interval()
    a.record(5000, 10)
    a.record_schedule(1000, 0)
    b.record(7000, 10)
    b.record_schedule(2000, 3000)
    b.record(1, 1)  # a closed-loop interval has no schedule histograms
    a.merge(b)
    assert a.service is not None and a.lag is not None
    assert a.service.count == 2 and a.lag.count == 2
    again = Interval.from_dict(a.to_dict())
    assert again.service is not None and again.service.to_dict() == a.service.to_dict()
    closed = Interval()
    closed.record(10, 1)
    assert "service" not in closed.to_dict() and Interval.from_dict(closed.to_dict()).lag is None
    assert Workload.from_dict(Workload(interval_s=0.5).to_dict()).interval_s == 0.5
    assert "interval_s" not in Workload().to_dict()  # closed-loop baselines unchanged


def paced(requests: int) -> Interval:
    interval = Interval()
    for _ in range(requests):
        interval.record(1000, 1)
        interval.record_schedule(1000, 50_000)
    return interval


def busy(percent: float) -> list[GeneratorSample]:
    return [GeneratorSample(t=float(t), cpu_percent=percent, processes=1) for t in range(3)]


def test_a_paced_run_that_missed_its_schedule_says_who_is_to_blame() -> None:
    # 10 users at 100 ms: 100 req/s offered; 2 s measured
    def behind(requests: int, generator_cpu: float) -> tuple[str, bool] | None:
        return fell_behind(
            paced(requests),
            0.1,
            users=10,
            seconds=2.0,
            generator=busy(generator_cpu),
            workers=1,
        )

    assert behind(195, 99) is None  # 97.5 % of the pace: kept
    assert fell_behind(Interval(), 0.1, users=10, seconds=2, generator=(), workers=1) is None
    message, flagged = behind(100, 95) or ("", False)  # half the pace, generator saturated
    assert flagged and message.startswith("generator-bound: the paced schedule was not kept")
    assert "50% of the offered 100 req/s" in message and "50.0 ms late" in message
    message, flagged = behind(100, 30) or ("", True)  # half the pace, generator idle
    assert not flagged and "the server did not keep up" in message


def test_the_terminal_puts_a_paced_runs_times_side_by_side() -> None:
    from pytest_webperf.report.table import paced_lines

    rep = {
        "repetition": 1,
        "latency": {"p99_ms": 912.34},
        "service": {"p99_ms": 1.25},
        "schedule_lag": {"p99_ms": 880.0},
        "notes": ["sampler: x", "the paced schedule was not kept: 50% of ..."],
    }
    entry = {"nodeid": "t.py::t", "name": "GET / every 10ms", "repetitions": [rep]}
    assert paced_lines([entry]) == [
        "t.py::t [GET / every 10ms] rep 1: paced: p99 912.3 ms from the intended start, "
        "service p99 1.2 ms, sends p99 880.0 ms late; the paced schedule was not kept: 50% of ..."
    ]
    closed = {"nodeid": "t.py::t", "name": "GET /", "repetitions": [{"latency": {}}]}
    assert paced_lines([closed]) == []


@given(count=st.integers(0, 50), steps=st.lists(st.booleans(), max_size=200))
def test_tickets_hand_out_exactly_the_count(count: int, steps: list[bool]) -> None:
    """Any interleaving of users taking tickets and completing requests: never more
    than ``count`` sent, finished exactly when all of them completed."""
    from pytest_webperf.swarm.pacing import Tickets

    tickets = Tickets()
    assert tickets.take() is None and not tickets.finished  # closed until opened
    tickets.open(count)
    sent = in_flight = 0
    for take in steps:
        if take:
            got = tickets.take()
            assert got is (sent < count)
            if got:
                sent += 1
                in_flight += 1
        elif in_flight:
            tickets.completed()
            in_flight -= 1
        assert tickets.finished == (sent == count and in_flight == 0)
    assert sent <= count


def test_http_arguments_become_a_workload_or_a_clear_error() -> None:
    from pytest_webperf.errors import OptionError
    from pytest_webperf.fixture.http import http_name, http_workload

    def make(**kw: Any) -> Workload:
        args: dict[str, Any] = {
            "method": "get",
            "body": "",
            "headers": None,
            "user_class": "lean",
            "workers": 1,
            "users": 50,
        }
        return http_workload("/x", **{**args, **kw})

    assert make().interval_s == 0 and http_name(make()) == "GET /x"
    assert make(interval="500ms").interval_s == 0.5
    assert http_name(make(interval="500ms")) == "GET /x every 500ms"
    paced = make(rate=1000)  # 50 users sharing 1,000/s: each every 50 ms
    assert paced.interval_s == pytest.approx(0.05)
    assert http_name(paced, 1000) == "GET /x at 1,000/s"
    assert http_name(make(requests=2000)) == "GET /x x2,000"
    for bad, says in [
        ({"interval": "1s", "rate": 5}, "give one"),
        ({"interval": "0s"}, "is > 0"),
        ({"rate": 0}, "a rate is > 0"),
        ({"rate": 5, "user_class": "fast"}, "paces the native and lean users"),
        ({"requests": -1}, ">= 0"),
        ({"requests": 5, "workers": 2}, "one native or lean generator process"),
        ({"requests": 5, "interval": "1s"}, "closed loop"),
    ]:
        with pytest.raises(OptionError, match=says):
            make(**bad)
