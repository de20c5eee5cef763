"""Request mixes and response checks through the load path, on the lean and native users:
a 3:1 mix lands on its weights, each entry an endpoint summing to the whole, with every
load shape; a wrong body or status fails as ``unexpected_body``/``unexpected_status``."""

from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]

# answers by path, and counts what it answered per path (GET /counts: the counts so far)
SERVER = r"""
import asyncio, json, os

BODIES = {"/a": b"alpha", "/b": b"bravo", "/wrong": b"nope, not what you asked"}
counts = {}

async def handle(reader, writer):
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            break
        path = head.split(b" ", 2)[1].decode()
        length = 0
        for line in head.split(b"\r\n")[1:]:
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        if length:
            await reader.readexactly(length)
        status = b"200 OK"
        if path == "/counts":
            body = json.dumps(counts).encode()
        else:
            counts[path] = counts.get(path, 0) + 1
            body = BODIES.get(path, b"ok")
            if path == "/teapot":
                status = b"418 I'm a teapot"
        writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()
    writer.close()

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", int(os.environ["PORT"]))
    async with server:
        await server.serve_forever()

asyncio.run(main())
"""

HEADER = """
import json, sys, urllib.request

import pytest


def dump(name, measurement, target):
    counts = json.loads(urllib.request.urlopen(target.url + "/counts").read())
    with open(name + ".json", "w") as f:
        json.dump({"measurement": measurement.to_dict(), "server": counts}, f)


def mix(webperf, **checks):
    return [webperf.request("/a", weight=3, **checks), webperf.request("/b", weight=1)]
"""


def run(pytester: pytest.Pytester, body: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(server=SERVER, test_inner=HEADER + body)
    return pytester.runpytest_subprocess("-p", "no:locust", "-W", "error", *args, timeout=240)


def load(pytester: pytest.Pytester, name: str) -> tuple[dict, dict]:
    data = json.loads((pytester.path / f"{name}.json").read_text())
    return data["measurement"], data["server"]


def assert_endpoints_sum_to_the_whole(run_: dict) -> None:
    parts = run_["endpoints"].values()
    for field in ("requests", "errors", "bytes"):
        assert sum(p[field] for p in parts) == run_[field], field
    assert sum(p["histogram"]["count"] for p in parts) == run_["histogram"]["count"]


USERS = pytest.mark.parametrize("user", ["lean", "native"])


@USERS
def test_a_3_to_1_mix_lands_on_its_weights(pytester: pytest.Pytester, user: str) -> None:
    result = run(
        pytester,
        """
@pytest.mark.webperf(concurrency=4, duration="2s", warmup="0s", repeat=1)
def test_mix(webperf):
    target = webperf.process([sys.executable, "server.py"], name="mixed")
    measurement = webperf.http(target, mix=mix(webperf), expect_status=200)
    assert measurement.name == "mix of 2 (GET /a 3, GET /b 1)"
    dump("closed", measurement, target)
""",
        f"--webperf-user={user}",
    )
    result.assert_outcomes(passed=1)
    measurement, _ = load(pytester, "closed")
    (run_,) = measurement["runs"]
    assert run_["errors"] == 0 and run_["requests"] > 1000, run_["requests"]
    a, b = run_["endpoints"]["/a"], run_["endpoints"]["/b"]
    assert (a["weight"], b["weight"]) == (0.75, 0.25)
    assert abs(a["requests"] / run_["requests"] - 0.75) < 0.05
    assert abs(b["requests"] / run_["requests"] - 0.25) < 0.05
    assert_endpoints_sum_to_the_whole(run_)
    assert measurement["workload"]["mix"][0]["weight"] == 3


@USERS
def test_a_mix_counted_paced_and_arriving(pytester: pytest.Pytester, user: str) -> None:
    result = run(
        pytester,
        """
@pytest.mark.webperf(concurrency=4, duration="2s", warmup="0s", repeat=1)
def test_counted(webperf):
    target = webperf.process([sys.executable, "server.py"], name="counted")
    dump("counted", webperf.http(target, mix=mix(webperf), requests=2000), target)

@pytest.mark.webperf(concurrency=4, duration="2s", warmup="0s", repeat=1)
def test_paced(webperf):
    target = webperf.process([sys.executable, "server.py"], name="paced")
    dump("paced", webperf.http(target, mix=mix(webperf), interval="20ms"), target)

@pytest.mark.webperf(concurrency=4, duration="2s", warmup="0s", repeat=1)
def test_arriving(webperf):
    target = webperf.process([sys.executable, "server.py"], name="arriving")
    dump("arriving", webperf.http(target, mix=mix(webperf), arrival_rate=200), target)
""",
        f"--webperf-user={user}",
    )
    result.assert_outcomes(passed=3)
    measurement, server = load(pytester, "counted")
    (run_,) = measurement["runs"]
    assert run_["requests"] == 2000 and run_["errors"] == 0
    endpoints = run_["endpoints"]
    assert endpoints["/a"]["requests"] == server["/a"]  # exactly what the server answered
    assert endpoints["/b"]["requests"] == server["/b"]
    assert_endpoints_sum_to_the_whole(run_)
    assert abs(endpoints["/a"]["requests"] / 2000 - 0.75) < 0.05
    for name, offered in (("paced", 4 / 0.02), ("arriving", 200)):
        measurement, _ = load(pytester, name)
        (run_,) = measurement["runs"]
        assert run_["errors"] == 0
        assert offered * 2 * 0.6 < run_["requests"] < offered * 2 * 1.4, (name, run_["requests"])
        assert run_["endpoints"]["/a"]["requests"] > run_["endpoints"]["/b"]["requests"] > 0
        assert "service" in run_  # paced: latency from the intended start, service beside
        assert_endpoints_sum_to_the_whole(run_)


@USERS
def test_a_wrong_body_and_an_unexpected_status_fail_with_their_examples(
    pytester: pytest.Pytester, user: str
) -> None:
    result = run(
        pytester,
        """
@pytest.mark.webperf(concurrency=2, duration="1s", warmup="0s", repeat=1)
def test_body(webperf):
    target = webperf.process([sys.executable, "server.py"], name="body")
    dump("body", webperf.http(target, path="/wrong", expect_body="alpha"), target)

@pytest.mark.webperf(concurrency=2, duration="1s", warmup="0s", repeat=1)
def test_status(webperf):
    target = webperf.process([sys.executable, "server.py"], name="status")
    dump("status", webperf.http(target, path="/teapot", expect_status={200, 204}), target)

@pytest.mark.webperf(concurrency=2, duration="1s", warmup="0s", repeat=1)
def test_expected_teapot(webperf):
    target = webperf.process([sys.executable, "server.py"], name="teapot")
    dump("teapot", webperf.http(target, path="/teapot", expect_status=418), target)
""",
        f"--webperf-user={user}",
    )
    result.assert_outcomes(passed=1, failed=2)
    body, _ = load(pytester, "body")
    (run_,) = body["runs"]
    assert run_["errors"] == run_["requests"] > 0
    assert set(run_["error_kinds"]) == {"unexpected_body"}
    assert run_["error_examples"]["unexpected_body"] == "HTTP/1.1 200 OK: b'nope, not what you asked'"
    assert body["verdict"]["status"] == "broken"
    status, _ = load(pytester, "status")
    (run_,) = status["runs"]
    assert set(run_["error_kinds"]) == {"unexpected_status"}
    assert run_["error_examples"]["unexpected_status"] == "HTTP/1.1 418 I'm a teapot"
    teapot, _ = load(pytester, "teapot")
    assert teapot["runs"][0]["errors"] == 0 and teapot["runs"][0]["requests"] > 0
