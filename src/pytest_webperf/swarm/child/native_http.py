"""The native HTTP user: Locust users whose requests the C loop sends (swarm processes only).

Locust stays the engine: users are spawned, counted, stopped and distributed to
workers by Locust as any other; each user *is* one keep-alive connection of its
process's ``engine.NativeEngine`` speaking HTTP (``hotloop.Http1``), added when Locust
starts the user and removed when Locust stops it. The engine's thread sends, frames and
times every request outside the GIL (``native/http1.c``); what it completed joins the
process's recorder
once per interval through the request name's channel, so the interval histograms,
Locust's own stats and everything downstream are the lean user's.

The workload's pacing (``interval_s``), arrival rate (``arrival_rate``: due requests
handed to the first-joined idle connection, connections opened as needed) and fixed
count (``requests``) run in the loop too: latency counts from each intended start, as
the lean user's.

Over HTTP/2 (``workload.http2``) each user is one connection with ``workload.streams``
requests in flight (``native/h2.c``); a unary gRPC call is such a request.
"""

from __future__ import annotations

import atexit
import random
import sys
from typing import Any, ClassVar

from gevent.event import Event
from locust import User, constant, task

from pytest_webperf.swarm.child.locust_stats import recorder_for
from pytest_webperf.swarm.engine import NativeEngine
from pytest_webperf.swarm.hotloop import EntryParts, engine_for, h2_unavailable, tls_built
from pytest_webperf.swarm.pacing import ArrivalSchedule
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.swarm.wire import uses_tls


class NativeHttpUser(User):
    """One connection of the process's native loop (the swarm's own user class)."""

    abstract = True
    webperf_records_itself: ClassVar[bool] = True
    webperf_quick_stop: ClassVar[bool] = True
    wait_time = constant(0)
    loop: ClassVar[NativeEngine]
    stopping: ClassVar[Event]
    endpoints: ClassVar[tuple[tuple[str, str], ...]]  # each entry's (method, name)
    mix: ClassVar[bool] = False  # a request mix: every entry an endpoint, even one
    attached: ClassVar[bool] = False

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        cls = type(self)
        if not cls.attached:  # the loop's figures join the recorder at every roll
            recorder = recorder_for(environment)
            recorder.split = recorder.split or cls.mix
            parts = EntryParts(cls.loop.take)
            for index, (method, name) in enumerate(cls.endpoints):
                recorder.channel(method, name).sources.append(parts.source(index))
            cls.attached = True

    @classmethod
    def webperf_stop_sending(cls) -> None:
        """Synchronous: the loop starts no request after this (those in flight complete)."""
        cls.loop.stop_sending()
        cls.stopping.set()

    @classmethod
    def webperf_tickets(cls) -> NativeEngine:
        return cls.loop

    @task
    def hold(self) -> None:
        handle = self.loop.add(random.random())
        try:
            self.stopping.wait()
        finally:  # stopped or killed by Locust: the connection goes with the user
            self.loop.remove(handle)


def make_user(spec: SwarmSpec, index: int = 0) -> type[User]:
    """The swarm's user for ``spec.workload`` (``--webperf-user=native``, or ``auto``);
    https where this process's native loop has no TLS (a remote worker built without
    OpenSSL): the lean user's, said on stderr."""
    if spec.workload.http2 and (why := h2_unavailable()) is not None:
        raise RuntimeError(f"http2=True: {why}")  # a remote worker built without it
    if uses_tls(spec.host) and not tls_built():
        from pytest_webperf.swarm.child import lean

        print(
            f"webperf: the native loop here is built without TLS: the lean user loads {spec.host}",
            file=sys.stderr,
        )
        return lean.make_user(spec, index)
    workload = spec.workload
    entries = workload.entries()
    arrivals = None
    if workload.arrival_rate > 0:  # this process's share: as the lean user's (arrival.py)
        arrivals = ArrivalSchedule(workload.arrival_rate, spec.processes, index)
    loop = engine_for(
        workload,
        spec.host,
        timeout_s=spec.timeout_s,
        tls_ca=spec.tls_ca,
        tls_resume=spec.tls_resume,
        arrivals=arrivals,
    )
    atexit.register(loop.close)

    class WebperfNativeHttpUser(NativeHttpUser):
        pass

    WebperfNativeHttpUser.host = spec.host
    WebperfNativeHttpUser.loop = loop
    WebperfNativeHttpUser.stopping = Event()
    WebperfNativeHttpUser.endpoints = tuple((e.method, e.name) for e in entries)
    WebperfNativeHttpUser.mix = bool(workload.mix)
    return WebperfNativeHttpUser
