"""Every HTTP server of the catalogue side by side, on seed 000's three workloads.

Not one of the seed studies but the table they all draw on: the same routes on
every server, measured in one run (``--webperf-concurrency=100 --webperf-duration=3s
--webperf-repeat=1`` for a quick look). Each server is loaded in the HTTP it speaks
(``protocols`` in its ``server.toml``): HTTP/1.1 where it speaks it, else HTTP/2
(``nginx-h2c``: h2c with prior knowledge only). nginx serves /quicksort from a file
(it has no scripting); the MQTT composites are left to ``test_mqtt_qos2.py``, the
WebSocket and SSE servers (a ``[streams]`` table) to ``test_streams.py``, gRPC to
``test_http2.py``; ``test_protocols.py`` loads every server in each of its protocols.
"""

import pytest

from pytest_webperf.targets.catalog import Catalog, default_directories

HTTP_SERVERS = {
    spec.name: "http1" not in spec.protocols
    for spec in Catalog(default_directories())
    if spec.kind == "http" and "mqtt" not in spec.extra and "streams" not in spec.extra
}


@pytest.mark.parametrize("path", ["/hello", "/quicksort", "/file"])
@pytest.mark.parametrize("server", list(HTTP_SERVERS))
def test_catalogue(webperf, server, path):
    result = webperf.http(webperf.server(server), path=path, http2=HTTP_SERVERS[server])
    assert result.requests > 0
