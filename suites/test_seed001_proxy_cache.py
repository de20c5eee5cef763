"""Seed 001: a caching reverse proxy in front of Apache: nginx proxy_cache vs Varnish.

The seed ran ApacheBench at concurrency 200 against the proxy, which served
Apache's page from its cache. Re-run it with ``--webperf-concurrency=200``.
"""

import pytest


@pytest.mark.parametrize("path", ["/hello", "/file"])
@pytest.mark.parametrize("server", ["nginx-cache", "varnish"])
def test_proxy_cache(webperf, server, path):
    result = webperf.http(webperf.server(server), path=path)
    assert result.requests > 0
