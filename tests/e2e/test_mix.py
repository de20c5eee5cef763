"""Request mixes and response checks through the load path, on the lean and native users:
a 3:1 mix lands on its weights, each entry an endpoint summing to the whole, with every
load shape; a wrong body or status fails as ``unexpected_body``/``unexpected_status``."""

from __future__ import annotations

import json
import re

import pytest
from local_http import LocalServer

from pytest_webperf.models.workload import Request, Workload
from pytest_webperf.swarm.runner import SwarmOutcome, run_swarm
from pytest_webperf.swarm.spec import SwarmSpec

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
    # within 5 % of the 3's share (the 1's deviates by as much: the shares add up to 1)
    assert abs(a["requests"] / run_["requests"] - 0.75) < 0.05 * 0.75
    assert abs(b["requests"] / run_["requests"] - 0.25) < 0.05 * 0.75
    assert_endpoints_sum_to_the_whole(run_)
    assert measurement["workload"]["mix"][0]["weight"] == 3


@USERS
def test_a_mix_counted_paced_rated_and_arriving(pytester: pytest.Pytester, user: str) -> None:
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
def test_rated(webperf):
    target = webperf.process([sys.executable, "server.py"], name="rated")
    dump("rated", webperf.http(target, mix=mix(webperf), rate=150), target)

@pytest.mark.webperf(concurrency=4, duration="2s", warmup="0s", repeat=1)
def test_arriving(webperf):
    target = webperf.process([sys.executable, "server.py"], name="arriving")
    dump("arriving", webperf.http(target, mix=mix(webperf), arrival_rate=200), target)
""",
        f"--webperf-user={user}",
    )
    result.assert_outcomes(passed=4)
    measurement, server = load(pytester, "counted")
    (run_,) = measurement["runs"]
    assert run_["requests"] == 2000 and run_["errors"] == 0
    endpoints = run_["endpoints"]
    assert endpoints["/a"]["requests"] == server["/a"]  # exactly what the server answered
    assert endpoints["/b"]["requests"] == server["/b"]
    assert_endpoints_sum_to_the_whole(run_)
    assert abs(endpoints["/a"]["requests"] / 2000 - 0.75) < 0.05
    for name, offered in (("paced", 4 / 0.02), ("rated", 150), ("arriving", 200)):
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
    assert (
        run_["error_examples"]["unexpected_body"] == "HTTP/1.1 200 OK: b'nope, not what you asked'"
    )
    assert body["verdict"]["status"] == "broken"
    status, _ = load(pytester, "status")
    (run_,) = status["runs"]
    assert set(run_["error_kinds"]) == {"unexpected_status"}
    assert run_["error_examples"]["unexpected_status"] == "HTTP/1.1 418 I'm a teapot"
    teapot, _ = load(pytester, "teapot")
    assert teapot["runs"][0]["errors"] == 0 and teapot["runs"][0]["requests"] > 0


def swarm(url: str, workload: Workload, user: str, workers: int = 1) -> SwarmOutcome:
    spec = SwarmSpec(
        host=url,
        users=6,
        duration_s=1.5,
        warmup_s=0.3,
        timeout_s=5.0,
        user_class=user,
        workload=workload,
        workers=workers,
    )
    return run_swarm(spec)


# "<h1>Hello World</h1>" comes as chunks of 6 bytes, each sent alone: the needle spans three
BODY = b"<h1>Hello World</h1>"
NEEDLES = [(b"Hello World", 0), (b"</h1>", 0), (b"Hello  World", 1), (b"<h1>H", 0)]


@USERS
def test_a_body_substring_is_found_across_chunks_and_reads(user: str) -> None:
    mix = tuple(
        Request(f"/n{i}", expect_body=needle, expect_status=frozenset({200}))
        for i, (needle, _) in enumerate(NEEDLES)
    )
    with LocalServer("chunked", body=BODY) as server:
        outcome = swarm(server.url, Workload(mix=mix), user)
    for i, (_, failing) in enumerate(NEEDLES):
        part = outcome.total.endpoints[("GET", f"/n{i}")]
        assert part.requests > 0
        assert part.errors == (part.requests if failing else 0), (NEEDLES[i], part.error_kinds)
    example = outcome.total.error_examples["unexpected_body"]
    assert example == "HTTP/1.1 200 OK: b'<h1>Hello World</h1>'"


@USERS
def test_two_generator_workers_merge_endpoints_exactly(user: str) -> None:
    mix = (Request("/a", weight=3.0), Request("/b", method="POST", body=b"{}", name="create"))
    with LocalServer("length", body=BODY) as server:
        outcome = swarm(server.url, Workload(mix=mix), user, workers=2)
    total = outcome.total
    assert [g.role for g in outcome.generators if g.role.startswith("worker")] == [
        "worker0",
        "worker1",
    ]
    a, create = total.endpoints[("GET", "/a")], total.endpoints[("POST", "create")]
    assert a.requests > create.requests > 0
    assert a.requests + create.requests == total.requests
    assert a.bytes + create.bytes == total.bytes == total.requests * len(BODY)
    merged = a.histogram.to_dict()
    assert merged != create.histogram.to_dict()
    whole = type(a.histogram)()
    whole += a.histogram
    whole += create.histogram
    assert whole.to_dict() == total.histogram.to_dict()  # exactly: histograms add
    assert outcome.locust_requests == outcome.rolled_requests


def test_a_regex_body_check_runs_on_the_lean_user_said_once(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
import re

@pytest.mark.webperf(concurrency=2, duration="1s", warmup="0s", repeat=1)
def test_regex(webperf):
    target = webperf.process([sys.executable, "server.py"], name="regex")
    checks = {"expect_body": re.compile(r"al+pha")}
    dump("regex", webperf.http(target, mix=mix(webperf, **checks)), target)
""",
        "--webperf-user=native",
    )
    result.assert_outcomes(passed=1)
    measurement, _ = load(pytester, "regex")
    (run_,) = measurement["runs"]
    assert run_["errors"] == 0 and run_["endpoints"]["/a"]["requests"] > 0
    assert any("checked by the lean user" in note for note in run_["notes"]), run_["notes"]
    regex = measurement["workload"]["mix"][0]["expect_body_regex"]
    assert re.compile(regex["pattern"], regex["flags"]).search("allllpha")


def test_request_shape_guesses_are_refused_before_any_load(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
@pytest.mark.parametrize("kw", [
    {"path": ["/a", "/b"]},
    {"path": {"/a": 3, "/b": 1}},
    {"path": "https://127.0.0.1:8443/a"},
    {"mix": ["/a"]},
])
def test_guess(webperf, kw):
    target = webperf.process([sys.executable, "server.py"], name="guessed")
    webperf.http(target, **kw)
""",
    )
    result.assert_outcomes(failed=4)
    out = result.stdout.str()
    for said in (
        "path= is one path, not ['/a', '/b']: for several use mix=[webperf.request(",
        "path= is one path, not {'/a': 3, '/b': 1}",
        "path='https://127.0.0.1:8443/a': a path is a path; the target is the target",
        "mix=: '/a' is not a webperf.request(...)",
    ):
        assert said in out, said
    assert "load generator" not in out
