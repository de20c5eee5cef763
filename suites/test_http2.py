"""HTTP/1.1 against HTTP/2 on the same nginx routes (nginx-h2: nginx 1.22 with `listen ...
ssl http2`, h2 and HTTP/1.1 on one TLS port by ALPN): keep-alive connections against
streams. At each concurrency C, the same server instance is loaded over C HTTP/1.1
connections (C requests in flight), C HTTP/2 connections of one stream each (the same C
in flight: the protocols compared), and C HTTP/2 connections of ten streams each (10 C in
flight: what multiplexing buys). A change to nginx's HTTP/2 settings, its TLS or its
flow-control windows is a classic regression; the HTTP/2 line of each measurement says
connections x streams, time to first byte, HPACK's savings and GOAWAY rotations.

And gRPC: the catalogue's grpc-go, a unary echo and the /quicksort work as a method."""

import pytest

ROUTES = ["/hello", "/quicksort", "/500b", "/20kb", "/file"]


@pytest.mark.parametrize("path", ROUTES)
def test_nginx_keepalive_against_streams(webperf, path):
    target = webperf.server("nginx-h2")
    http1 = webperf.http(target, path=path)
    one = webperf.http(target, path=path, http2=True)
    ten = webperf.http(target, path=path, http2=True, streams=10)
    assert min(http1.requests, one.requests, ten.requests) > 0


def test_nginx_h2c(webperf):
    target = webperf.server("nginx-h2c")
    assert webperf.http(target, path="/hello", http2=True, streams=10).requests > 0


def test_grpc_unary(webperf):
    target = webperf.server("grpc-go")
    result = webperf.grpc(
        target,
        mix=[
            webperf.grpc_request("/webperf.Catalogue/Echo", message=b"\x0a\x05hello", weight=3),
            webperf.grpc_request("/webperf.Catalogue/Quicksort", weight=1),
        ],
        streams=10,
    )
    assert result.requests > 0
