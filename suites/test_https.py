"""HTTPS: nginx-tls (the nginx entry over TLS 1.2/1.3, a self-signed certificate made at
start) on the static pages, with keep-alive: TLS library, configuration and cipher
changes are classic regressions; and with a new connection per request (a full
handshake each, or a resumed session): handshake cost. The certificate is not verified
(a test target's); ``webperf.http(..., tls_ca=PATH)`` verifies one against its CA."""

import pytest


@pytest.mark.parametrize("path", ["/hello", "/20kb"])
def test_nginx_https_keepalive(webperf, path):
    target = webperf.server("nginx-tls")
    assert target.url.startswith("https://")
    result = webperf.http(target, path=path)
    assert result.requests > 0


@pytest.mark.parametrize("resume", [False, True], ids=["handshake", "resumed"])
def test_nginx_https_new_connection_per_request(webperf, resume):
    target = webperf.server("nginx-tls")
    result = webperf.http(target, path="/hello", keepalive=False, tls_resume=resume)
    assert result.requests > 0
