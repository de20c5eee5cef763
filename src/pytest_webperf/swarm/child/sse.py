"""The server-sent events user: each Locust user one stream of the native stream loop,
read from its first event to the end, back with ``Last-Event-ID`` when it ends (swarm
processes only; ``stream.py`` is the user and its ledger)."""

from __future__ import annotations

from locust import User

from pytest_webperf.swarm.child import stream
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.swarm.streamloop import SSE, STREAM, StreamLoop
from pytest_webperf.swarm.wire import split_host


def make_user(spec: SwarmSpec, index: int = 0) -> type[User]:
    """The swarm's SSE user for ``spec.stream`` (http:// or https://)."""
    if spec.stream is None:
        raise ValueError("user_class 'sse' needs SwarmSpec.stream")
    load = spec.stream
    host, port, host_header = split_host(spec.host)
    loop = StreamLoop(
        host,
        port,
        kind=SSE,
        paths={STREAM: load.path},
        host_header=host_header,
        headers=load.headers,
        timeout_s=spec.timeout_s,
        close_timeout_s=load.close_timeout_s,
        retry_s=load.retry_s,
        reconnect_every=load.reconnect_every,
        max_connecting=load.max_connecting,
        tls=load.tls,
        tls_ca=load.tls_ca,
        sources=load.sources,
    )
    return stream.make_user(spec, index, loop, ("SSE", load.path))
