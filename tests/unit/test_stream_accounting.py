"""Where a stream run's messages went: ledgers merged across generator processes, lost,
duplicated and out-of-order copies counted, the measured phase's rates, memory per
connection; the load and the result as sent and saved; the metrics that read them and
each mode's default checks."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.gate.decide import default_checks
from pytest_webperf.gate.grammar import DEFAULT_STREAM_CHECKS
from pytest_webperf.gate.metrics import METRICS
from pytest_webperf.longlived.accounting import (
    Tally,
    merge_ledgers,
    per_connection,
    spread,
    tally,
    window_rates,
)
from pytest_webperf.longlived.load import SSE, WEBSOCKET, StreamLoad
from pytest_webperf.measurement.longlived import stream_result, with_losses
from pytest_webperf.models.measurement import Measurement, RunResult
from pytest_webperf.models.samples import Latency, ResourceSample
from pytest_webperf.models.stream import StreamResult
from pytest_webperf.models.workload import Workload
from pytest_webperf.stats.histogram import Histogram
from pytest_webperf.swarm.spec import SwarmSpec


def ledger(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"echo": [0] * 5, "sse": [0] * 5, "published": [], "subscribers": []}
    return {**base, **fields}


def test_an_echo_loses_what_never_came_back() -> None:
    assert tally(ledger(echo=[100, 97, 2, 1, 0])) == Tally(100, 97, 3, 2, 1, 0)


def test_a_fan_out_expects_every_publishers_message_at_every_subscriber() -> None:
    # two publishers (in two processes) sent 60 and 40; three subscribers heard 100, 98, 100
    merged = merge_ledgers(
        [
            ledger(published=[[1, 60]], subscribers=[[0, 100, 0, 0, 0], [0, 98, 1, 3, 0]]),
            ledger(published=[[11, 40]], subscribers=[[0, 100, 0, 0, 0]]),
        ]
    )
    assert tally(merged) == Tally(expected=300, delivered=298, lost=2, duplicates=1, out_of_order=3)


def test_sse_ids_count_from_the_first_seen_to_the_highest() -> None:
    assert tally(ledger(sse=[50, 48, 0, 0, 0])).lost == 2


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=5))
def test_merging_sums_counters_and_keeps_each_process_rolls(sent: list[int]) -> None:
    parts = [
        ledger(sent=n, opens=1, rolls=[[[0.0, 0, 0], [1.0, n, n]]], upgrade=hist(n)) for n in sent
    ]
    merged = merge_ledgers(parts)
    assert merged["sent"] == sum(sent)
    assert merged["opens"] == len(sent)
    assert len(merged["rolls"]) == len(sent)
    assert Histogram.from_dict(merged["upgrade"]).count == len(sent)
    assert window_rates(merged["rolls"], 1.0) == (float(sum(sent)), float(sum(sent)))


def hist(*values: int) -> dict[str, Any]:
    h = Histogram()
    h.record_many(values)
    return h.to_dict()


def test_the_measured_window_starts_at_the_roll_nearest_its_start() -> None:
    rolls = [[[10.0, 0, 0], [11.0, 100, 90], [12.0, 300, 280], [13.0, 600, 570]]]
    assert window_rates(rolls, 2.0) == (250.0, 240.0)  # from 11.0 to 13.0


def test_memory_per_connection() -> None:
    assert per_connection(1000, 2000, 1024) == 1000.0
    assert per_connection(1000, 2000, 0) is None
    assert spread([3.0, 1.0, 2.0]) == (1.0, 2.0, 3.0)
    assert spread([]) is None


@pytest.mark.parametrize(
    ("load", "mode"),
    [
        (StreamLoad(message=b"0" * 40), "echo"),
        (StreamLoad(message=None, ping_s=5), "idle"),
        (StreamLoad(message=b"0" * 40, publishers=2, interval_s=0.1), "fanout"),
        (StreamLoad(kind=SSE, path="/events"), "sse"),
    ],
)
def test_the_load_survives_the_spec_and_knows_its_mode(load: StreamLoad, mode: str) -> None:
    load = replace(load, headers=(("Authorization", "x"),), expect=b"ok", sources=("127.0.0.2",))
    spec = SwarmSpec(host="http://127.0.0.1:1", users=3, duration_s=1, stream=load)
    assert SwarmSpec.from_dict(spec.to_dict()).stream == load
    assert load.mode == mode


def test_publishers_spread_over_the_processes() -> None:
    load = StreamLoad(message=b"0" * 40, publishers=5, interval_s=1)
    assert [load.publishers_of(i, 3) for i in range(3)] == [2, 2, 1]


def test_a_fan_out_needs_a_message_and_a_pace() -> None:
    with pytest.raises(ValueError, match="publishers need"):
        StreamLoad(message=b"0" * 40, publishers=1)


def run(stream: StreamResult, **fields: Any) -> RunResult:
    h = Histogram()
    h.record_many([1000, 2000, 3000])
    return RunResult(
        repetition=1,
        concurrency=2,
        duration_s=2.0,
        requests=3,
        errors=0,
        timeouts=0,
        connect_errors=0,
        bytes=0,
        latency=Latency.of(h),
        series=(),
        histogram=h,
        stream=stream,
        **fields,
    )


STREAM = StreamResult(
    kind=WEBSOCKET,
    mode="echo",
    connections=2,
    open_peak=2,
    open_at_end=2,
    opens=2,
    open_failures=0,
    reconnects=0,
    abnormal=1,
    expected=10,
    delivered=9,
    lost=1,
    upgrade=Latency(1, 1, 1, 1, 1, 1, 1),
    mem_per_conn=4096.0,
)


def test_the_result_round_trips_through_the_saved_dict() -> None:
    saved = run(STREAM)
    assert RunResult.from_dict(saved.to_dict()) == saved


def test_the_metrics_read_a_mode_s_own_figures() -> None:
    echo = run(STREAM)
    assert METRICS["ws_rtt_p99"].per_run(echo) == echo.latency.p99_ms
    assert METRICS["ws_delay_p99"].per_run(echo) is None  # not a fan-out
    assert METRICS["ttfe_p95"].per_run(echo) is None
    assert METRICS["ws_lost"].per_run(echo) == 1.0
    assert METRICS["ws_lost"].exposure(echo) == 10.0
    assert METRICS["ws_abnormal"].per_run(echo) == 1.0
    assert METRICS["mem_per_conn"].per_run(echo) == 4096.0
    assert METRICS["ws_upgrade_p95"].per_run(echo) == 1.0
    fan_out = run(replace(STREAM, mode="fanout"))
    assert METRICS["ws_delay_p99"].per_run(fan_out) == fan_out.latency.p99_ms
    assert METRICS["ws_rtt_p99"].per_run(fan_out) is None


@pytest.mark.parametrize("mode", ["echo", "fanout", "idle", "sse"])
def test_each_mode_has_its_default_checks(mode: str) -> None:
    measurement = Measurement(
        nodeid="t",
        name="n",
        server="s",
        concurrency=2,
        workload=Workload(),
        runs=(run(replace(STREAM, mode=mode)),),
        generator="websocket",
    )
    assert default_checks(measurement) == DEFAULT_STREAM_CHECKS[mode]
    assert all(check.metric in METRICS for check in DEFAULT_STREAM_CHECKS[mode])


def test_lost_messages_are_failed_ones() -> None:
    counted = Tally(expected=100, delivered=98, lost=2, duplicates=0, out_of_order=0)
    result = with_losses(run(STREAM), WEBSOCKET, counted)
    assert (result.requests, result.errors) == (5, 2)
    assert result.error_kinds == {"ws_lost": 2}
    assert "2 of 100 messages never arrived" in result.error_examples["ws_lost"]
    assert with_losses(run(STREAM), SSE, counted).error_kinds == {"sse_lost": 2}


def test_the_result_divides_the_memory_the_open_connections_took() -> None:
    samples = tuple(
        ResourceSample(t=t, part="s", cpu_percent=0, rss_mb=mb, processes=1, threads=1)
        for t, mb in ((-1.0, 10.0), (0.0, 20.0), (1.0, 21.0), (2.0, 20.0))
    )
    data = ledger(
        open_at_end=1024, rss_before_kib=1000, rss_open_kib=2000, connections=1024, opens=1024
    )
    result = stream_result(
        StreamLoad(message=None, ping_s=1),
        data,
        tally(data),
        run(STREAM, resources=samples),
        10.0,
    )
    assert result.server_rss_open_mb == 20.0  # the measured phase's median
    assert result.mem_per_conn == 10 * 1024 * 1024 / 1024
    assert result.gen_mem_per_conn == 1000.0
    assert result.mode == "idle"
