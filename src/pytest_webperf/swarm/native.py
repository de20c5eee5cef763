"""The native HTTP user: Locust users whose requests the C loop sends (swarm processes only).

Locust stays the engine: users are spawned, counted, stopped and distributed to
workers by Locust as any other; each user *is* one keep-alive connection of its
process's ``hotloop.NativeLoop``, added when Locust starts the user and removed
when Locust stops it. The loop's thread sends, frames and times every request
outside the GIL (``_hotloop.c``); what it completed joins the process's recorder
once per interval through the request name's channel, so the interval histograms,
Locust's own stats and everything downstream are the lean user's.

The workload's pacing (``interval_s``), arrival rate (``arrival_rate``: due requests
handed to the first-joined idle connection, connections opened as needed) and fixed
count (``requests``) run in the loop too: latency counts from each intended start, as
the lean user's.
"""

from __future__ import annotations

import atexit
import random
import sys
from typing import Any, ClassVar

from gevent.event import Event
from locust import User, constant, task

from pytest_webperf.swarm.hotloop import NativeLoop, tls_built
from pytest_webperf.swarm.locust_stats import recorder_for
from pytest_webperf.swarm.pacing import ArrivalSchedule
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.swarm.wire import encode_request, says_close, split_host, uses_tls


class NativeHttpUser(User):
    """One connection of the process's native loop (the swarm's own user class)."""

    abstract = True
    webperf_records_itself: ClassVar[bool] = True
    webperf_quick_stop: ClassVar[bool] = True
    wait_time = constant(0)
    loop: ClassVar[NativeLoop]
    stopping: ClassVar[Event]
    method: ClassVar[str]
    name: ClassVar[str]
    attached: ClassVar[bool] = False

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        cls = type(self)
        if not cls.attached:  # the loop's figures join the recorder at every roll
            recorder_for(environment).channel(cls.method, cls.name).sources.append(cls.loop.take)
            cls.attached = True

    @classmethod
    def webperf_stop_sending(cls) -> None:
        """Synchronous: the loop starts no request after this (those in flight complete)."""
        cls.loop.stop_sending()
        cls.stopping.set()

    @classmethod
    def webperf_tickets(cls) -> NativeLoop:
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
    if uses_tls(spec.host) and not tls_built():
        from pytest_webperf.swarm import lean  # (only then: it imports gevent sockets)

        print(
            f"webperf: the native loop here is built without TLS: the lean user loads {spec.host}",
            file=sys.stderr,
        )
        return lean.make_user(spec, index)
    workload = spec.workload
    host, port, host_header = split_host(spec.host)
    method = workload.method.upper()
    payload = encode_request(
        method, workload.path, host_header, body=workload.body, headers=workload.headers
    )
    arrivals = None
    if workload.arrival_rate > 0:  # this process's share: as the lean user's (arrival.py)
        arrivals = ArrivalSchedule(workload.arrival_rate, spec.processes, index)
    loop = NativeLoop(
        host,
        port,
        payload,
        head_only=method == "HEAD",
        timeout_s=spec.timeout_s,
        interval_s=workload.interval_s,
        counted=workload.requests > 0,
        arrivals=arrivals,
    )
    if says_close(workload.headers):  # keepalive=False
        loop.close_each()
    if uses_tls(spec.host):  # the C loop's own OpenSSL client (hotloop.user_for_url)
        loop.use_tls(host, spec.tls_ca, spec.tls_resume)
    atexit.register(loop.close)

    class WebperfNativeHttpUser(NativeHttpUser):
        pass

    WebperfNativeHttpUser.host = spec.host
    WebperfNativeHttpUser.loop = loop
    WebperfNativeHttpUser.stopping = Event()
    WebperfNativeHttpUser.method = method
    WebperfNativeHttpUser.name = workload.path
    return WebperfNativeHttpUser
