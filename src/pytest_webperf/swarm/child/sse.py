"""The server-sent events user: each Locust user one stream of the native engine,
read from its first event to the end, back with ``Last-Event-ID`` when it ends (swarm
processes only; ``stream.py`` is the user and its ledger)."""

from __future__ import annotations

from locust import User

from pytest_webperf.swarm.child import stream
from pytest_webperf.swarm.engine import NativeEngine
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.swarm.streamloop import STREAM, Sse, request_tail
from pytest_webperf.swarm.wire import split_host


def make_user(spec: SwarmSpec, index: int = 0) -> type[User]:
    """The swarm's SSE user for ``spec.stream`` (http:// or https://)."""
    if spec.stream is None:
        raise ValueError("user_class 'sse' needs SwarmSpec.stream")
    load = spec.stream
    host, port, host_header = split_host(spec.host)
    session = Sse(
        paths={STREAM: load.path},
        tail=request_tail(host_header, load.headers),
        max_connecting=load.max_connecting,
        close_timeout_s=load.close_timeout_s,
        retry_s=load.retry_s,
        reconnect_every=load.reconnect_every,
    )
    loop = NativeEngine(
        host,
        port,
        session,
        timeout_s=spec.timeout_s,
        tls=load.tls,
        tls_ca=load.tls_ca,
        sources=load.sources,
    )
    return stream.make_user(spec, index, loop, ("SSE", load.path))
