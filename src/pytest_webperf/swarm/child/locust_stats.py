"""Locust's own statistics fed from our intervals, once per interval and request name.

Users that record themselves (``webperf_records_itself``) skip Locust's per-request
``request`` event: firing it costs more than the request itself at loopback speed.
Locust's stats (console, web UI, CSV, the master's aggregate in distributed mode)
are kept whole by adding each interval's figures to the same ``StatsEntry`` fields
``RequestStats.log_request``/``log_error`` would have touched, request by request.
Listeners of the ``request`` event do not see these requests.
"""

from __future__ import annotations

import time
from typing import Any

import gevent
from locust.stats import RequestStats, StatsEntry, StatsError, bucket_response_time

from pytest_webperf.stats.histogram import bucket_bounds
from pytest_webperf.swarm.recorder import Interval, Recorder


class LocustStatsFeed:
    """A roll listener adding each request name's interval to ``environment.stats``.

    The stats object is looked up at every roll: a worker runner replaces it."""

    def __init__(self, environment: Any) -> None:
        self.environment = environment

    def __call__(self, method: str, name: str, part: Interval) -> None:
        now = time.time()
        stats: RequestStats = self.environment.stats
        entry = stats.entries[(name, method)]  # created on first use
        for target in (stats.total, entry):
            log_interval(target, part, now)
        for kind, n in part.error_kinds.items():
            key = StatsError.create_key(method, name, kind)
            error = stats.errors.get(key)
            if error is None:
                error = stats.errors[key] = StatsError(method, name, kind, first_seen=now)
            error.occurrences += n
            error.last_seen = now


def log_interval(entry: StatsEntry, part: Interval, now: float) -> None:
    """``entry.log`` and ``entry.log_error`` for every request of ``part`` at once.

    Times are float milliseconds, as FastHttpUser reports them (Locust annotates int)."""
    row: Any = entry
    second = int(now)
    last = row.last_request_timestamp
    if row.use_response_times_cache and last and second > int(last):
        row._cache_response_times(second - 1)  # what entry.log does on a new second
    row.num_requests += part.requests
    row.num_reqs_per_sec[second] += part.requests
    row.last_request_timestamp = now
    row.total_content_length += part.bytes
    histogram = part.histogram
    row.num_none_requests += part.requests - histogram.count  # failures without a response
    if histogram.count:
        row.total_response_time += histogram.total / 1000
        low_ms, high_ms = histogram.minimum / 1000, histogram.maximum / 1000
        row.min_response_time = (
            low_ms if row.min_response_time is None else min(row.min_response_time, low_ms)
        )
        row.max_response_time = max(row.max_response_time, high_ms)
        times = row.response_times
        for index, n in histogram.counts.items():
            low, high = bucket_bounds(index)
            times[bucket_response_time((low + high) / 2000)] += n
    if part.errors:
        row.num_failures += part.errors
        row.num_fail_per_sec[second] += part.errors


def attach(environment: Any, recorder: Recorder) -> None:
    """Feed ``environment.stats`` from ``recorder`` at every roll."""
    recorder.roll_listeners.append(LocustStatsFeed(environment))


def recorder_for(environment: Any) -> Recorder:
    """The process's recorder; outside a webperf swarm (plain ``locust -f``) one that
    rolls itself every second so that Locust's stats stay fed."""
    recorder: Recorder | None = getattr(environment, "webperf_recorder", None)
    if recorder is None:
        recorder = environment.webperf_recorder = Recorder()
        attach(environment, recorder)
        gevent.spawn(_roll_forever, recorder)
        environment.events.test_stop.add_listener(lambda **_: recorder.roll())  # the last bit
    return recorder


def _roll_forever(recorder: Recorder) -> None:
    while True:
        gevent.sleep(1.0)
        recorder.roll()
