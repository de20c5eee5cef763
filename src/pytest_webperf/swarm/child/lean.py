"""The lean HTTP user: a Locust ``User`` on raw keep-alive sockets (swarm processes only).

Why it is fast, and what each choice costs per request (generator CPU time,
nginx /hello, 100 connections, this 2-core machine; the whole request is about
12 us, of which the kernel's loopback send is about half):

- raw non-blocking ``_socket`` sockets driven by the gevent hub's own io
  watchers, one started per wait, instead of gevent's socket wrappers: no
  EAGAIN exception before every wait and no ``Waiter`` per read (~8 us per
  request for the whole exchange: send, wait, recv and framing);
- requests encoded once (``PreparedRequest``) and a minimal response framer
  (``wire.ResponseParser``: Content-Length, chunked, read-until-close; its
  case-insensitive header lookup costs ~1.5 us);
- one libev timer per connection re-armed with ``again()`` per request instead of a
  ``gevent.Timeout`` per blocking call (~1.5 us);
- bookkeeping straight into the process's ``Recorder`` channel (~1.2 us for the
  microsecond histogram); Locust's own stats are fed once per interval by
  ``locust_stats.LocustStatsFeed``: one Locust ``request`` event per request
  instead costs ~6 us (82,000 -> 52,000 requests per CPU-second);
- the closed-loop task of ``make_user`` loops inside one task call, skipping
  Locust's per-task ``wait()`` (a hub round trip per request).

Users write their own tasks on ``LeanHttpUser``: ``self.get("/hello")``,
``self.request("POST", "/telemetry", body=b"{}", keep_body=True)`` (README, "The load
generator"; tests/e2e/test_http_user.py has one).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import gevent
from locust import User, constant, task
from locust.user.task import LOCUST_STATE_STOPPING

from pytest_webperf.models.workload import InOrder, Request, WeightedChoice
from pytest_webperf.swarm.child.arrival import Arrivals, arrivals_for
from pytest_webperf.swarm.child.connection import (
    Connection,
    PreparedRequest,
    RequestFailed,
    Response,
    tls_context,
)
from pytest_webperf.swarm.child.locust_stats import recorder_for
from pytest_webperf.swarm.pacing import Tickets, first_due, timing
from pytest_webperf.swarm.recorder import (
    CONNECT,
    TLS,
    UNEXPECTED_BODY,
    UNEXPECTED_STATUS,
    Channel,
)
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.swarm.wire import (
    ResponseParser,
    encode_request,
    split_host,
    unexpected_body,
    uses_tls,
)

TICKETS = Tickets()  # this process's (a swarm child runs one spec)


class LeanHttpUser(User):
    """A Locust user with one persistent HTTP/1.1 connection (http:// or https://: TLS
    with Python's ``ssl``, the certificate not verified unless ``tls_ca`` names a CA).

    Requests are recorded by the user itself into the swarm's recorder, and
    Locust's stats are fed from there once per interval: ``request`` event
    listeners see nothing. A failed request never raises: its ``Response`` has
    ``status == 0`` and ``error`` set (``connect``, ``timeout``, ``reset``,
    ``closed``, ``protocol``, ``tls``, ...); HTTP statuses >= 400 count as errors ``http_NNN``.
    """

    abstract = True
    webperf_records_itself: ClassVar[bool] = True
    webperf_quick_stop: ClassVar[bool] = True  # marked stopping, it ends after this request
    wait_time = constant(0)
    timeout_s: ClassVar[float] = 10.0  # per request, connect included
    connect_backoff_s: ClassVar[float] = 0.01  # pause after a failed connect: no busy spin
    tls_ca: ClassVar[str | None] = None  # https: verify against this CA file (else unverified)
    tls_resume: ClassVar[bool] = False  # https: a new connection resumes the last TLS session

    @classmethod
    def webperf_tickets(cls) -> Tickets:
        """The process's fixed request count (``counted_loop``), opened by the swarm."""
        return TICKETS

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        host = self.host or environment.host
        if not host:
            raise ValueError(
                f"{type(self).__name__} has no host: set its host attribute "
                "or the environment's (locust --host)"
            )
        self._target = split_host(host)
        self._tls = tls_context(self.tls_ca) if uses_tls(host) else None
        self.recorder = recorder_for(environment)
        self._connection: Connection | None = None
        self._prepared: dict[tuple[Any, ...], PreparedRequest] = {}
        self._setup_channel: Channel | None = None  # where connection setup times go

    def prepare(
        self,
        method: str,
        path: str,
        *,
        body: bytes = b"",
        headers: Iterable[tuple[str, str]] | Mapping[str, str] = (),
        name: str | None = None,
        check: Request | None = None,
    ) -> PreparedRequest:
        """Encode a request once (cached per user); ``name`` groups it in the stats;
        ``check``: a mix entry whose expectations apply (``expect_status``, ...)."""
        pairs = tuple(headers.items() if isinstance(headers, Mapping) else headers)
        key = (method, path, body, pairs, name, check)
        prepared = self._prepared.get(key)
        if prepared is None:
            method = method.upper()
            host_header = self._target[2]
            payload = encode_request(method, path, host_header, body=body, headers=pairs)
            label = name or path
            channel = self.recorder.channel(method, label)
            prepared = PreparedRequest(method, label, payload, channel, check)
            self._prepared[key] = prepared
            self._setup_channel = self._setup_channel or prepared.channel
        return prepared

    def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes = b"",
        headers: Iterable[tuple[str, str]] | Mapping[str, str] = (),
        name: str | None = None,
        keep_body: bool = False,
    ) -> Response:
        return self.send(
            self.prepare(method, path, body=body, headers=headers, name=name), keep_body=keep_body
        )

    def get(self, path: str, **kwargs: Any) -> Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, body: bytes = b"", **kwargs: Any) -> Response:
        return self.request("POST", path, body=body, **kwargs)

    def send(self, prepared: PreparedRequest, *, keep_body: bool = False) -> Response:
        """One request and its response, recorded."""
        connection = self._connection or self._open()
        started = time.perf_counter_ns()
        try:
            parser = connection.exchange(
                prepared.payload,
                head_only=prepared.head_only,
                keep_body=keep_body or prepared.keep_body,
                keep_head=prepared.keep_head,
            )
        except RequestFailed as failure:
            self._failed(prepared, failure)
            return Response(0, 0, 0, failure.kind)
        latency = (time.perf_counter_ns() - started) // 1000
        status = parser.status
        pacing = self.recorder.pacing  # a paced subclass: latency from its task's due time
        lag = pacing(latency) if pacing is not None else None
        if lag is not None:
            prepared.channel.current.record_schedule(latency, lag)
            latency += lag
        error = self._record(prepared, parser, latency)
        return Response(
            status, parser.body_bytes, latency, error, parser.body if keep_body else b""
        )

    def closed_loop(self, prepared: PreparedRequest, mix: WeightedChoice | None = None) -> None:
        """Send ``prepared`` back to back until the user is stopped (the swarm's default
        task); ``mix``: each request one of its ``PreparedRequest`` by weight instead."""
        if mix is not None or prepared.check is not None:
            return self._checked_closed_loop(prepared, mix)
        connection = self._connection or self._open()
        exchange = connection.exchange
        channel = prepared.channel
        payload, head_only = prepared.payload, prepared.head_only
        clock = time.perf_counter_ns
        while self._state != LOCUST_STATE_STOPPING:
            started = clock()
            try:
                parser = exchange(payload, head_only=head_only)
            except RequestFailed as failure:
                self._failed(prepared, failure)
                continue
            status = parser.status
            if status < 400:
                channel.current.record((clock() - started) // 1000, parser.body_bytes)
            else:
                self._record(prepared, parser, (clock() - started) // 1000)

    def _checked_closed_loop(self, prepared: PreparedRequest, mix: WeightedChoice | None) -> None:
        """The closed loop of a mix, or of a request whose response is checked."""
        exchange = (self._connection or self._open()).exchange
        clock, record = time.perf_counter_ns, self._record
        pick = mix.pick if mix is not None else lambda: prepared
        while self._state != LOCUST_STATE_STOPPING:
            chosen = pick()
            started = clock()
            try:
                parser = exchange(
                    chosen.payload,
                    head_only=chosen.head_only,
                    keep_body=chosen.keep_body,
                    keep_head=chosen.keep_head,
                )
            except RequestFailed as failure:
                self._failed(chosen, failure)
                continue
            record(chosen, parser, (clock() - started) // 1000)

    def _exchange(self, connection: Connection, prepared: PreparedRequest) -> ResponseParser:
        return connection.exchange(
            prepared.payload,
            head_only=prepared.head_only,
            keep_body=prepared.keep_body,
            keep_head=prepared.keep_head,
        )

    def paced_loop(
        self, prepared: PreparedRequest, interval_s: float, mix: WeightedChoice | None = None
    ) -> None:
        """Send ``prepared`` once every ``interval_s`` until the user is stopped (open
        model per user). Latency counts from each request's intended start, so a server
        that stalls is charged for the requests it delayed (coordinated omission
        corrected, as wrk2 does); the service time (send to response) and how late each
        send was are recorded beside it. A late schedule is never skipped ahead: every
        intended request is sent."""
        connection = self._connection or self._open()
        clock = time.perf_counter_ns
        period = max(1, int(interval_s * 1e9))
        intended = first_due(clock(), period, random.random())
        while self._state != LOCUST_STATE_STOPPING:
            wait = intended - clock()
            if wait > 0:
                gevent.sleep(wait / 1e9)
                if self._state == LOCUST_STATE_STOPPING:
                    break
            if mix is not None:
                prepared = mix.pick()
            sent = clock()
            try:
                parser = self._exchange(connection, prepared)
            except RequestFailed as failure:
                self._failed(prepared, failure)
                intended += period
                continue
            times = timing(intended, sent, clock())
            self._record(prepared, parser, times.latency_us)
            prepared.channel.current.record_schedule(times.service_us, times.lag_us)
            intended += period

    def arrival_loop(
        self, prepared: PreparedRequest, arrivals: Arrivals, mix: WeightedChoice | None = None
    ) -> None:
        """Send ``prepared`` whenever ``arrivals`` hands this user a due request (k6's constant
        arrival rate), recorded as in ``paced_loop``; the connection opens with the first."""
        clock, stopped = time.perf_counter_ns, lambda: self._state == LOCUST_STATE_STOPPING
        while (intended := arrivals.take(self, stopped, prepared.channel)) is not None:
            connection = self._connection or self._open()
            if mix is not None:
                prepared = mix.pick()
            sent = clock()
            try:
                parser = self._exchange(connection, prepared)
            except RequestFailed as failure:
                self._failed(prepared, failure)
                continue
            times = timing(intended, sent, clock())
            self._record(prepared, parser, times.latency_us)
            prepared.channel.current.record_schedule(times.service_us, times.lag_us)

    def counted_loop(
        self, prepared: PreparedRequest, tickets: Tickets, mix: WeightedChoice | None = None
    ) -> None:
        """Send ``prepared`` back to back while ``tickets`` last (ab's ``-n``), then stop."""
        connection = self._connection or self._open()
        clock = time.perf_counter_ns
        while self._state != LOCUST_STATE_STOPPING:
            ticket = tickets.take()
            if ticket is None:
                gevent.sleep(0.002)  # the measured phase has not begun
                continue
            if not ticket:
                break
            if mix is not None:
                prepared = mix.pick()
            started = clock()
            try:
                parser = self._exchange(connection, prepared)
            except RequestFailed as failure:
                self._failed(prepared, failure)
            else:
                self._record(prepared, parser, (clock() - started) // 1000)
            finally:
                tickets.completed()
        while self._state != LOCUST_STATE_STOPPING:  # idle (the connection kept) until stopped
            gevent.sleep(0.05)

    def on_stop(self) -> None:
        if self._connection is not None:
            self._connection.shutdown()
            self._connection = None

    def _open(self) -> Connection:
        host, port, _ = self._target
        self._connection = Connection(host, port, self.timeout_s, self._tls, self.tls_resume)
        self._connection.on_setup = self._record_setup
        return self._connection

    def _record_setup(self, connect_us: int, handshake_us: int | None) -> None:
        """A new connection's setup times (keepalive=False), in the first request's channel."""
        if self._setup_channel is not None:
            self._setup_channel.current.record_setup(connect_us, handshake_us)

    def _record(
        self, prepared: PreparedRequest, parser: ResponseParser, latency_us: int
    ) -> str | None:
        status, nbytes, interval = parser.status, parser.body_bytes, prepared.channel.current
        check = prepared.check
        if check is None:
            if status < 400:
                interval.record(latency_us, nbytes)
                return None
            kind = f"http_{status}"
        elif not check.accepts(status):
            kind = UNEXPECTED_STATUS
        elif check.expect_body is not None and not check.body_matches(parser.body):
            kind = UNEXPECTED_BODY
        else:
            interval.record(latency_us, nbytes)
            return None
        example = None
        if interval.wants_example(kind):
            example = parser.status_line.decode("latin-1")
            if kind == UNEXPECTED_BODY:
                example = unexpected_body(example, parser.body)
        interval.record_error(kind, latency_us, nbytes, example)
        return kind

    def _failed(self, prepared: PreparedRequest, failure: RequestFailed) -> None:
        kind = failure.kind
        prepared.channel.current.record_error(kind, example=failure.example)
        if kind in (CONNECT, TLS):
            gevent.sleep(self.connect_backoff_s)


def make_user(spec: SwarmSpec, index: int = 0) -> type[LeanHttpUser]:
    """The swarm's closed-loop user for ``spec.workload`` (``--webperf-user=lean``)."""
    workload = spec.workload

    class WebperfLeanHttpUser(LeanHttpUser):
        host = spec.host
        timeout_s = spec.timeout_s
        tls_ca = spec.tls_ca
        tls_resume = spec.tls_resume

        @task
        def loop(self) -> None:
            entries = workload.entries()
            checked = [
                e if e.expect_status is not None or e.expect_body is not None else None
                for e in entries
            ]
            prepared_all = [
                self.prepare(e.method, e.path, body=e.body, headers=e.headers, name=e.name, check=c)
                for e, c in zip(entries, checked, strict=True)
            ]
            prepared, mix = prepared_all[0], None
            if workload.mix:
                self.recorder.split = True  # every entry an endpoint, even a mix of one
                mix = (
                    InOrder(prepared_all, workload.sequence(max(1, workload.requests)))
                    if workload.ordered
                    else WeightedChoice(prepared_all, [e.weight for e in entries])
                )
            if workload.requests > 0:
                self.counted_loop(prepared, TICKETS, mix)
            elif workload.arrival_rate > 0:
                self.arrival_loop(
                    prepared, arrivals_for(workload.arrival_rate, spec.processes, index), mix
                )
            elif workload.interval_s > 0:
                self.paced_loop(prepared, workload.interval_s, mix)
            else:
                self.closed_loop(prepared, mix)

    return WebperfLeanHttpUser
