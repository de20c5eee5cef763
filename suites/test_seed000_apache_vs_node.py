"""Seed 000: Apache httpd (prefork + PHP) vs Node.js under concurrent connections.

The seed ran wrk at 100/500/1000 connections for 20 s, 5 times, on three
workloads (static hello, quicksort of 100 integers, a 534 KB PNG read per
request), and watched server CPU and memory every second. Re-run it with
``--webperf-concurrency=100,500,1000 --webperf-duration=20s --webperf-repeat=5``.
"""

import pytest

SERVERS = ["apache-php", "node"]
WORKLOADS = ["/hello", "/quicksort", "/file"]


# Overload on purpose: at 500 and 1,000 connections the study's Apache timed out on 1-2 %
# of its requests (92 of 9k at 100, ~490 of 24k at 1,000). Up to 5 % failed requests are
# part of what is measured here; more is a broken run.
@pytest.mark.webperf(max_error_rate="5%")
@pytest.mark.parametrize("path", WORKLOADS)
@pytest.mark.parametrize("server", SERVERS)
def test_apache_vs_node(webperf, server, path):
    result = webperf.http(webperf.server(server), path=path)
    assert result.requests > 0


# The question behind the study ("which one falls over first, and where?"): the highest
# arrival rate each server sustains with p99 under 100 ms and under 1 % failed.
@pytest.mark.parametrize("path", WORKLOADS)
@pytest.mark.parametrize("server", SERVERS)
def test_apache_vs_node_capacity(webperf, server, path):
    found = webperf.capacity(webperf.server(server), path, slo="p99<100ms,error_rate<1%")
    assert found.probes
