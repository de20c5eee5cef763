"""Every server of the catalogue, loaded in each protocol it speaks (its ``protocols`` in
``server.toml``): HTTP/1.1, HTTP/2 (h2 over TLS, h2c without), unary gRPC, MQTT at QoS 2
(through the broker, or through a server's broker to its store), WebSocket echo and SSE.

Not one of the seed studies but the floor under them: a server that no longer answers in
its own protocols fails here, in one short test per server (one instance of it loaded in
each protocol in turn), before a study's comparison hides it. The
test command runs it at a small scale (``tests/e2e/test_suites.py``); the studies'
suites then load the same servers at their own scale.

A store (``kind = "tcp"``: ``mariadb``) speaks none of these: it is loaded through the
servers that use it (``go-mqtt``, ``node-mqtt``, ``tomcat-mqtt``, in
``test_mqtt_qos2.py``), and is left out here.
"""

import json

import pytest

from pytest_webperf.targets.catalog import Catalog, ServerSpec, default_directories

TELEMETRY = json.dumps({"clientId": 1, "temp": 32.8, "humidity": 12.5, "light": 70.4})
ECHO = ("/webperf.Catalogue/Echo", b"\x0a\x05hello")  # a BytesValue: grpc-go's Echo


def _http_path(spec: ServerSpec) -> str:
    """The lightest route a server serves: /hello where it has it, else its health path."""
    return "/hello" if not spec.routes or "/hello" in spec.routes else spec.health


def _http1(webperf, target, spec):
    return webperf.http(target, path=_http_path(spec))


def _http2(webperf, target, spec):
    return webperf.http(target, path=_http_path(spec), http2=True)


def _grpc(webperf, target, spec):
    method, message = ECHO
    return webperf.grpc(target, method, message=message)


def _mqtt(webperf, target, spec):
    measurement = webperf.mqtt(target, interval="500ms", qos=2)
    for run in measurement.runs:
        assert run.mqtt.published > 0
    return measurement


def _websocket(webperf, target, spec):
    path = spec.extra["streams"]["websocket"]
    return webperf.websocket(target, path, message=64, interval="100ms")


def _sse(webperf, target, spec):
    path = spec.extra["streams"]["events"]
    return webperf.sse(target, f"{path}?rate=10")


LOADS = {
    "http1": _http1,
    "http2": _http2,
    "grpc": _grpc,
    "mqtt": _mqtt,
    "websocket": _websocket,
    "sse": _sse,
}
CATALOG = Catalog(default_directories())


@pytest.mark.parametrize("server", CATALOG.names())
def test_protocols(webperf, server):
    """One instance of the server (and what it depends on), loaded in each of its
    protocols in turn: a measurement per protocol, named by it."""
    spec = CATALOG.get(server)
    if not spec.protocols:
        users = [s.name for s in CATALOG if any(d.server == server for d in s.depends)]
        pytest.skip(
            f"{server} (kind = {spec.kind!r}) speaks no protocol a load is sent in: "
            f"it is loaded through {', '.join(users) or 'the servers that depend on it'}"
        )
    target = webperf.server(server)
    for protocol in spec.protocols:
        measurement = LOADS[protocol](webperf, target, spec)
        assert measurement.runs, f"{server} over {protocol}: nothing was measured"
