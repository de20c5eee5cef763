"""Seed 000's static I/O and file workloads, and seed 004's static pages, on nginx."""

import pytest


@pytest.mark.parametrize("path", ["/hello", "/500b", "/20kb", "/file"])
def test_nginx_static(webperf, path):
    target = webperf.server("nginx")
    result = webperf.http(target, path=path)
    assert result.requests > 0
