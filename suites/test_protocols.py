"""Every server of the catalogue, loaded in each protocol it speaks (its ``protocols`` in
``server.toml``): HTTP/1.1, HTTP/2 (h2 over TLS, h2c without), unary gRPC, MQTT at QoS 2
(through the broker, or through a server's broker to its store), WebSocket echo and SSE.

Not one of the seed studies but the floor under them: a server that no longer answers in
its own protocol fails here, in one short test, before a study's comparison hides it. The
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


def _http1(webperf, spec):
    return webperf.http(webperf.server(spec.name), path=_http_path(spec))


def _http2(webperf, spec):
    return webperf.http(webperf.server(spec.name), path=_http_path(spec), http2=True)


def _grpc(webperf, spec):
    method, message = ECHO
    return webperf.grpc(webperf.server(spec.name), method, message=message)


def _mqtt(webperf, spec):
    measurement = webperf.mqtt(webperf.server(spec.name), interval="500ms", qos=2)
    for run in measurement.runs:
        assert run.mqtt.published > 0
    return measurement


def _websocket(webperf, spec):
    path = spec.extra["streams"]["websocket"]
    return webperf.websocket(webperf.server(spec.name), path, message=64, interval="100ms")


def _sse(webperf, spec):
    path = spec.extra["streams"]["events"]
    return webperf.sse(webperf.server(spec.name), f"{path}?rate=10")


LOADS = {
    "http1": _http1,
    "http2": _http2,
    "grpc": _grpc,
    "mqtt": _mqtt,
    "websocket": _websocket,
    "sse": _sse,
}
CATALOG = Catalog(default_directories())
PAIRS = [(spec.name, protocol) for spec in CATALOG for protocol in spec.protocols or ["none"]]


@pytest.mark.parametrize(("server", "protocol"), PAIRS, ids=[f"{s}-{p}" for s, p in PAIRS])
def test_protocol(webperf, server, protocol):
    spec = CATALOG.get(server)
    if protocol == "none":
        users = [s.name for s in CATALOG if any(d.server == server for d in s.depends)]
        pytest.skip(
            f"{server} (kind = {spec.kind!r}) speaks no protocol a load is sent in: "
            f"it is loaded through {', '.join(users) or 'the servers that depend on it'}"
        )
    measurement = LOADS[protocol](webperf, spec)
    assert measurement.runs, f"{server} over {protocol}: nothing was measured"
