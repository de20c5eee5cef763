"""HTTP/2 and gRPC end to end, through pytest, as a user writes them: h2 and h2c against
the catalogue's nginx (a 3:1 mix on its weights, the streams reported); a server that
resets streams fails with that kind; a gRPC method answering UNAVAILABLE fails as
``grpc_UNAVAILABLE`` with its message while a healthy one passes; an A/B run of a gRPC
server whose method became slower fails ``p95[Slow]`` naming it; asking a server that
speaks HTTP/1.1 only for HTTP/2 fails in one line, and HTTP/1.1 to a server that speaks
h2c only is refused in one line naming ``http2=True`` before any load. Each repetition's
connections (HPACK, windows) are printed with -v only.

The HTTP/2 test servers are ``h2_server.py`` (the ``h2`` package, server side), started
as ``webperf.process`` targets; the gRPC one is health-checked through gRPC's health
service (``health="grpc"``).
"""

from __future__ import annotations

import json

import pytest
from tests.e2e import h2_server
from tests.e2e.gitrepo import commit_base
from tests.e2e.options import SHORT as LOAD

SHORT = [*LOAD, "--webperf-repeat=1"]

NGINX = """
import pytest


@pytest.mark.parametrize("server", ["nginx-h2", "nginx-h2c"])
def test_mix(webperf, server):
    target = webperf.server(server)
    mix = [webperf.request("/hello", weight=3), webperf.request("/500b", weight=1)]
    webperf.http(target, mix=mix, http2=True, streams=10)
"""


def test_h2_and_h2c_against_nginx_land_a_mix_on_its_weights(
    pytester: pytest.Pytester, engine: None
) -> None:
    pytester.makepyfile(test_inner=NGINX)
    result = pytester.runpytest_subprocess(*SHORT, "--webperf-json=h2.json", timeout=300)
    result.assert_outcomes(passed=2)
    # quiet by default: each repetition's connections, HPACK and windows are in the JSON
    # (and with -v), not in the terminal
    assert "HPACK" not in result.stdout.str() and "in flight" not in result.stdout.str()
    entries = json.loads((pytester.path / "h2.json").read_text())["tests"]
    assert {e["server"] for e in entries} == {"nginx-h2", "nginx-h2c"}
    for entry in entries:
        (rep,) = entry["repetitions"]
        assert rep["errors"] == 0 and rep["requests"] > 1000, (entry["server"], rep["errors"])
        assert rep["http2"]["streams"] == 10 and rep["in_flight"] == 40
        assert rep["http2"]["server_streams"] == 128 and rep["ttfb"]["p99_ms"] > 0
        assert rep["http2"]["request_savings"] > 0.5  # HPACK: the repeated headers indexed
        shares = {row["name"]: row["share"] for row in entry["endpoints"]}
        assert abs(shares["/hello"] - 0.75) < 0.05 * 0.75, shares  # within 5 % of 3:1
        assert abs(shares["/500b"] - 0.25) < 0.05 * 0.75, shares


def test_streams_reset_by_the_server_fail_with_their_error_code(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        h2_server=h2_server.source(),
        test_inner="""
import sys


def test_resets(webperf):
    target = webperf.process([sys.executable, "h2_server.py", "rst"], name="resets")
    webperf.http(target, "/hello", http2=True, streams=4)
""",
    )
    result = pytester.runpytest_subprocess(*SHORT, timeout=120)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*requests failed (3*%; h2_rst_INTERNAL_ERROR: *; e.g. RST_STREAM INTERNAL_ERROR*"]
    )
    assert "Traceback" not in result.stdout.str()


GRPC = """
import sys


def serve(webperf):
    return webperf.process([sys.executable, "h2_server.py", "grpc"], name="grpc", health="grpc")


def test_down(webperf):
    webperf.grpc(serve(webperf), "/test.Svc/Down", message=b"x")


def test_up(webperf):
    webperf.grpc(serve(webperf), "/test.Svc/Echo", message=b"hello", expect_body=b"hello")
"""


def test_a_grpc_method_answering_unavailable_fails_as_that_kind_and_a_healthy_one_passes(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(h2_server=h2_server.source(), test_inner=GRPC)
    result = pytester.runpytest_subprocess(*SHORT, "-v", "--webperf-json=grpc.json", timeout=180)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*test_down*: broken: * (100.0%; grpc_UNAVAILABLE: *; e.g. back soon)*"]
    )
    # -v: each repetition's connections (and HPACK's savings)
    result.stdout.fnmatch_lines(
        ["*test_up*rep 1: HTTP/2: 4 connections x 1 stream = 4 in flight*HPACK saved *"]
    )
    result.stdout.fnmatch_lines(["*  - gRPC Echo 100.0%*"])  # a method, not a POST
    assert "Traceback" not in result.stdout.str()
    entries = {
        e["nodeid"]: e for e in json.loads((pytester.path / "grpc.json").read_text())["tests"]
    }
    (up,) = [e for nodeid, e in entries.items() if "test_up" in nodeid]
    assert up["name"] == "gRPC /test.Svc/Echo" and up["repetitions"][0]["errors"] == 0
    assert {row["name"] for row in up["endpoints"]} == {"Echo"}  # a method is an endpoint


AB = """
import sys


def test_methods(webperf):
    target = webperf.process([sys.executable, "h2_server.py", "grpc"], name="grpc", health="grpc")
    mix = [
        webperf.grpc_request("/test.Svc/Echo", message=b"a"),
        webperf.grpc_request("/test.Svc/Slow", message=b"b"),
    ]
    webperf.grpc(target, mix=mix)
"""


def test_an_ab_run_of_a_slower_grpc_method_fails_its_check_naming_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(h2_server=h2_server.source(slow_ms=2), test_methods=AB)
    commit_base(pytester.path)
    (pytester.path / "h2_server.py").write_text(h2_server.source(slow_ms=100))  # the change
    result = pytester.runpytest_subprocess(
        *LOAD,
        "--webperf-repeat=3",
        "--webperf-compare-fail=p95[Slow]:10%,p95[Echo]:200%",
        "--webperf-against=HEAD",
        "--webperf-against-budget=1s",  # the minimum pairs only
        "--webperf-json=ab.json",
        timeout=300,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*p95[[]Slow[]] * -> * (+*%, *% CI +*%..+*%) beyond +10%*"])
    assert "Traceback" not in result.stdout.str()
    (entry,) = json.loads((pytester.path / "ab.json").read_text())["tests"]
    checks = {c["check"]: c for c in entry["verdict"]["checks"]}
    assert checks["p95[Slow]:10%"]["outcome"] == "fail"
    assert checks["p95[Slow]:10%"]["current"] > 2 * checks["p95[Slow]:10%"]["baseline"]
    assert checks["p95[Slow]:10%"]["current"] >= 100  # each call sleeps 100 ms in B
    assert all("Echo" not in reason for reason in entry["verdict"]["reasons"])


def test_http2_from_a_server_that_speaks_http1_only_fails_in_one_line(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        server="""
import http.server, os

class Hello(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass

http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Hello).serve_forever()
""",
        test_inner="""
import sys


def test_h2(webperf):
    target = webperf.process([sys.executable, "server.py"], name="plain")
    webperf.http(target, "/health", http2=True)
""",
    )
    result = pytester.runpytest_subprocess(*SHORT, timeout=120)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ProtocolError: webperf.http(http2=True): http://127.0.0.1:* does not speak "
            "HTTP/2*; serve HTTP/2 there (nginx: listen ... http2), or drop http2=True"
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert "requests failed" not in result.stdout.str()  # refused, never counted


def test_http1_to_a_server_that_speaks_h2c_only_is_refused_in_one_line_naming_http2(
    pytester: pytest.Pytester, engine: None
) -> None:
    pytester.makepyfile(
        test_inner="""
def test_h1(webperf):
    webperf.http(webperf.server("nginx-h2c"), "/hello")
"""
    )
    result = pytester.runpytest_subprocess(*SHORT, "--webperf-duration=30s", timeout=120)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ProtocolError: webperf.http: http://127.0.0.1:* speaks HTTP/2 only (h2c, prior "
            "knowledge): it answered the first byte of an HTTP/1.1 request with a SETTINGS "
            "frame; load it over HTTP/2: webperf.http(target, http2=True)"
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert "requests failed" not in result.stdout.str()  # refused before any load
    assert result.duration < 30  # refused, not loaded for the 30 s asked
