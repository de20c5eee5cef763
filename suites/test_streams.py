"""Long-lived connections: the catalogue's WebSocket and SSE servers side by side (Node.js
with ws, Go with gorilla/websocket: the entries with a ``[streams]`` table, the same
routes on each), per-message round trip and memory per open connection at 1,000 and
10,000 connections.

- ``test_round_trip``: every connection sends a 64-byte message a second and times its
  echo (``ws_rtt_p99``), every message accounted (``ws_lost:0``); the server's resident
  memory per open connection is measured in the same run (``mem_per_conn``).
- ``test_idle``: the connections hold, a ping every 5 s: what an open connection costs.
- ``test_streams``: as many SSE streams, an event a second each: time to first event,
  the gaps, memory per stream.

A generator process holds up to its open-files limit less about 100 (here: 20,000 hard,
so 10,000 fit one process); above it, ``--webperf-workers``. Run by hand, not in CI
(10,000 connections take a few seconds to open on 2 cores)::

    ./scripts/suites.sh -k test_streams --webperf-duration=10s --webperf-repeat=3
"""

import pytest

from pytest_webperf.targets.catalog import Catalog, default_directories

SERVERS = [spec.name for spec in Catalog(default_directories()) if "streams" in spec.extra]
CONNECTIONS = [1_000, 10_000]


@pytest.mark.parametrize("connections", CONNECTIONS)
@pytest.mark.parametrize("server", SERVERS)
def test_round_trip(webperf, server, connections):
    result = webperf.websocket(
        webperf.server(server), "/ws", message=64, concurrency=connections, interval="1s"
    )
    for run in result.runs:  # a server that cannot open them all shows it in the gate
        assert run.stream.lost == 0


@pytest.mark.parametrize("connections", CONNECTIONS)
@pytest.mark.parametrize("server", SERVERS)
def test_idle(webperf, server, connections):
    result = webperf.websocket(webperf.server(server), "/ws", message=None, concurrency=connections)
    for run in result.runs:
        assert run.stream.open_at_end == connections
        assert run.stream.mem_per_conn is not None


@pytest.mark.parametrize("connections", CONNECTIONS)
@pytest.mark.parametrize("server", SERVERS)
def test_streams(webperf, server, connections):
    result = webperf.sse(webperf.server(server), "/events?rate=1", concurrency=connections)
    for run in result.runs:
        assert run.stream.open_at_end == connections
