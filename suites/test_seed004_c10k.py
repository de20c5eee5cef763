"""Seed 004: event-driven servers at C10K: nginx, Node.js, and a libuv Python server.

The seed ran ``ab -n 80000 -c 10000`` on a 500-byte and a 20 KB page, 5 runs with
the server restarted before each, and reported mean req/s, mean latency and the
server's peak memory. Here too: each repetition sends 80,000 requests, or what lasts
at least 5 s on the machine at hand if that is more (a short probe times it), unless
``--webperf-requests`` gives the count, to a freshly started server (the default
``--webperf-restart-every=1``), and reports each repetition's peak memory (``rss``).
Re-run it with ``--webperf-concurrency=10000``.
"""

import pytest

SEED_REQUESTS = 80_000
MIN_SECONDS = 5.0  # each counted repetition lasts at least this long


# 10,000 connections at once: some connects may fail or time out on a small machine (the
# study reported means only). Up to 5 % failed requests are measured, not a failure.
@pytest.mark.webperf(max_error_rate="5%")
@pytest.mark.parametrize("path", ["/500b", "/20kb"])
@pytest.mark.parametrize("server", ["nginx", "node", "python-uv"])
def test_c10k(webperf, server, path):
    target = webperf.server(server)
    seconds = min(MIN_SECONDS, webperf.config.duration / 2)  # the time limit: never cut
    requests = webperf.config.requests or max(
        SEED_REQUESTS, webperf.requests_lasting(target, seconds, path)
    )
    result = webperf.http(target, path=path, requests=requests)
    assert result.requests > 0


# The rate each sustains with p99 under 100 ms (an open model: the study's ab -c 10000 is
# a closed loop); a generator that cannot offer it says generator-bound, not a capacity.
@pytest.mark.parametrize("path", ["/500b", "/20kb"])
@pytest.mark.parametrize("server", ["nginx", "node", "python-uv"])
def test_c10k_capacity(webperf, server, path):
    found = webperf.capacity(
        webperf.server(server), path, slo="p99<100ms,error_rate<1%", start=500, limit=100_000
    )
    assert found.probes
