"""The WebSocket user: each Locust user one WebSocket connection of the native engine, echoing
(round trips), publishing or subscribing through a relay (fan-out), or idle (a ping now
and then) (swarm processes only; ``stream.py`` is the user and its ledger)."""

from __future__ import annotations

from locust import User

from pytest_webperf.swarm.child import stream
from pytest_webperf.swarm.engine import NativeEngine
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.swarm.streamloop import (
    ECHO,
    IDLE,
    PUBLISHER,
    SUBSCRIBER,
    WebSocket,
    request_tail,
)
from pytest_webperf.swarm.wire import split_host


def make_user(spec: SwarmSpec, index: int = 0) -> type[User]:
    """The swarm's WebSocket user for ``spec.stream`` (ws:// or wss://)."""
    if spec.stream is None:
        raise ValueError("user_class 'websocket' needs SwarmSpec.stream")
    load = spec.stream
    host, port, host_header = split_host(spec.host)
    session = WebSocket(
        paths={
            ECHO: load.path,
            IDLE: load.path,
            SUBSCRIBER: load.subscribe_path or load.path,
            PUBLISHER: load.publish_path or load.path,
        },
        tail=request_tail(host_header, load.headers),
        max_connecting=load.max_connecting,
        close_timeout_s=load.close_timeout_s,
        message=load.message,
        binary=load.binary,
        interval_s=load.interval_s,
        ping_s=load.ping_s,
        expect=load.expect,
        subscribe=load.subscribe,
        order=load.order,
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
    path = load.subscribe_path or load.path if load.mode == "fanout" else load.path
    return stream.make_user(spec, index, loop, (f"WS-{load.mode.upper()}", path))
