"""Seed 001: a caching reverse proxy in front of Apache: nginx proxy_cache vs Varnish.

The seed ran ApacheBench at concurrency 200 against the proxy, which served Apache's
page from its cache: 200, 2,000 and 20,000 requests, reporting time taken, time per
request and transfer rate. Each repetition here sends a fixed count too (2,000 unless
``--webperf-requests`` says otherwise), ab's figures beside the table. Re-run it with
``--webperf-concurrency=200 --webperf-requests=20000``.
"""

import pytest

SEED_REQUESTS = 2000  # the seed's middle count; its last was 20,000


@pytest.mark.parametrize("path", ["/hello", "/file"])
@pytest.mark.parametrize("server", ["nginx-cache", "varnish"])
def test_proxy_cache(webperf, server, path):
    result = webperf.http(
        webperf.server(server), path=path, requests=webperf.config.requests or SEED_REQUESTS
    )
    assert all(run.requests == run.requests_asked for run in result.runs), (
        "the time limit cut a fixed count: raise --webperf-duration"
    )
