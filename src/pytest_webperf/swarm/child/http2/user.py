"""The lean HTTP/2 user (``--webperf-user=lean`` with ``http2=True``): HTTP/2 in pure
Python with the sans-I/O ``h2`` package, for the pure wheel and regular-expression
expectations (swarm processes only).

Each Locust user is one connection (h2c with prior knowledge, or h2 by ALPN over TLS)
carrying ``workload.streams`` requests at once: one greenlet per stream runs the load
shape (closed, paced, arriving, counted) as the lean HTTP/1.1 user's loops do, and a
reader greenlet per connection feeds what arrives to ``h2`` and wakes the stream it
completes. Failures are named as the native loop names them: ``h2_rst_<CODE>``,
``h2_goaway_<CODE>``, ``grpc_<CODE>``; a GOAWAY with NO_ERROR retires the connection and
the streams it refused are sent again on a new one, keeping their start.

What it costs: measured at 360 µs of generator CPU per request over h2 and 387 µs for
gRPC (10 connections x 10 streams), against 17 and 4.4 µs for the native loop in the
same run (docs/explanation/figures.md): HPACK (Huffman decoding of
every response's headers) and the stream state machines in Python. Fine for a health
check or a low rate; the generator is then the bottleneck long before most servers
are (a run says so: ``generator-bound``).
"""

from __future__ import annotations

import random
import time
from typing import Any, ClassVar

import gevent
import gevent.event
import gevent.lock
from locust import User, constant, task
from locust.user.task import LOCUST_STATE_STOPPING

from pytest_webperf.models.workload import WeightedChoice
from pytest_webperf.swarm.child.arrival import arrivals_for
from pytest_webperf.swarm.child.connection import RequestFailed
from pytest_webperf.swarm.child.http2.link import Link, outcome
from pytest_webperf.swarm.child.lean import TICKETS
from pytest_webperf.swarm.child.locust_stats import recorder_for
from pytest_webperf.swarm.http2 import header_list
from pytest_webperf.swarm.pacing import first_due, timing
from pytest_webperf.swarm.recorder import (
    CONNECT,
    TLS,
)
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.swarm.wire import split_host, uses_tls


class LeanHttp2User(User):
    """One HTTP/2 connection of ``streams`` streams (the swarm's own user class)."""

    abstract = True
    webperf_records_itself: ClassVar[bool] = True
    webperf_quick_stop: ClassVar[bool] = True
    wait_time = constant(0)
    spec: ClassVar[SwarmSpec]
    index: ClassVar[int] = 0  # this generator process among all of them (arrival rate)

    @classmethod
    def webperf_tickets(cls) -> Any:
        return TICKETS

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        workload = self.spec.workload
        recorder = recorder_for(environment)
        recorder.split = recorder.split or bool(workload.mix)
        self.entries = workload.entries()
        self.channels = [recorder.channel(e.method, e.name) for e in self.entries]
        authority = split_host(self.spec.host)[2]
        scheme = "https" if uses_tls(self.spec.host) else "http"
        self.headers = [header_list(e, authority, scheme) for e in self.entries]
        self.choice = WeightedChoice(
            list(range(len(self.entries))), [e.weight for e in self.entries]
        )
        self.link = Link(self.spec, workload.streams, self.channels[0])
        self.workers: list[gevent.Greenlet] = []

    def send(self, intended_ns: int | None = None) -> None:
        """One request of the mix, recorded (from ``intended_ns`` when paced)."""
        index = self.choice.pick()
        entry, channel = self.entries[index], self.channels[index]
        sent = time.perf_counter_ns()
        try:
            stream = self.link.exchange(entry, self.headers[index])
        except RequestFailed as failure:
            channel.current.record_error(failure.kind, example=failure.example)
            if failure.kind in (CONNECT, TLS):
                gevent.sleep(0.01)  # no busy spin on a refused connection
            return
        done = time.perf_counter_ns()
        current = channel.current
        if intended_ns is None:
            latency = (done - sent) // 1000
        else:
            times = timing(intended_ns, sent, done)
            latency = times.latency_us
            current.record_schedule(times.service_us, times.lag_us)
        if stream.headers_at:
            current.record_ttfb((stream.headers_at - sent) // 1000)
        kind, example = outcome(entry, stream)
        if kind is None:
            current.record(latency, len(stream.body))
        else:
            current.record_error(kind, latency, len(stream.body), example)

    @task
    def streams(self) -> None:
        """The user's streams, each a greenlet running the load shape, until stopped."""
        workload = self.spec.workload
        if workload.requests > 0:
            loop = self._counted
        elif workload.arrival_rate > 0:
            loop = self._arriving
        elif workload.interval_s > 0:
            loop = self._paced
        else:
            loop = self._closed
        count, fraction = workload.streams, random.random()
        self.workers = [gevent.spawn(loop, (fraction + k / count) % 1.0) for k in range(1, count)]
        try:
            loop(fraction)
        finally:
            gevent.killall(self.workers, block=False)
            self.link.close()

    def _closed(self, fraction: float) -> None:
        while self._state != LOCUST_STATE_STOPPING:
            self.send()

    def _counted(self, fraction: float) -> None:
        while self._state != LOCUST_STATE_STOPPING:
            ticket = TICKETS.take()
            if ticket is None:
                gevent.sleep(0.002)  # the measured phase has not begun
                continue
            if not ticket:
                break
            try:
                self.send()
            finally:
                TICKETS.completed()
        while self._state != LOCUST_STATE_STOPPING:  # idle (the connection kept) until stopped
            gevent.sleep(0.05)

    def _arriving(self, fraction: float) -> None:
        workload = self.spec.workload
        arrivals = arrivals_for(workload.arrival_rate, self.spec.processes, self.index)
        marker = object()  # each stream a user of the dispatcher
        stopped = lambda: self._state == LOCUST_STATE_STOPPING  # noqa: E731
        while (due := arrivals.take(marker, stopped, self.channels[0])) is not None:
            self.send(due)

    def _paced(self, fraction: float) -> None:
        period = max(1, int(self.spec.workload.interval_s * 1e9))
        intended = first_due(time.perf_counter_ns(), period, fraction)
        while self._state != LOCUST_STATE_STOPPING:
            wait = intended - time.perf_counter_ns()
            if wait > 0:
                gevent.sleep(wait / 1e9)
                continue  # stopped meanwhile?
            self.send(intended)
            intended += period

    def on_stop(self) -> None:
        gevent.killall(self.workers, block=False)
        self.link.close()


def make_user(spec: SwarmSpec, index: int = 0) -> type[LeanHttp2User]:
    """The swarm's lean HTTP/2 user for ``spec.workload`` (``--webperf-user=lean``)."""

    class WebperfLeanHttp2User(LeanHttp2User):
        host = spec.host

    WebperfLeanHttp2User.spec = spec
    WebperfLeanHttp2User.index = index
    return WebperfLeanHttp2User
