"""Request mixes (unit): the weighted choice, what ``webperf.request``/``webperf.http`` refuse
(one line naming the parameter), and the workload's round trip (old JSON still loads)."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_webperf.errors import OptionError
from pytest_webperf.fixture.http import http_name, http_workload, request
from pytest_webperf.models.workload import Request, WeightedChoice, Workload
from pytest_webperf.swarm.wire import ResponseParser


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.floats(0.05, 20), min_size=1, max_size=6),
    st.integers(0, 2**32),
)
def test_the_weighted_choice_lands_near_its_weights(weights: list[float], seed: int) -> None:
    rng = random.Random(seed)
    choice = WeightedChoice(list(range(len(weights))), weights)
    n = 20_000
    counts = [0] * len(weights)
    for _ in range(n):
        counts[choice.pick(rng.random)] += 1
    total = sum(weights)
    for count, weight in zip(counts, weights, strict=True):
        p = weight / total
        sigma = (p * (1 - p) / n) ** 0.5
        assert abs(count / n - p) <= 5 * sigma + 1e-9  # 5 sigma: never by chance


@given(st.lists(st.floats(0.001, 1000), min_size=1, max_size=8), st.floats(0, 1, exclude_max=True))
def test_the_weighted_choice_picks_the_entry_whose_span_holds_the_draw(
    weights: list[float], u: float
) -> None:
    choice = WeightedChoice(list(range(len(weights))), weights)
    index = choice.pick(lambda: u)
    below = sum(weights[:index])
    assert below <= u * choice.total + 1e-9
    assert index == len(weights) - 1 or u * choice.total < below + weights[index] + 1e-9


def test_3_to_1_is_3_to_1() -> None:
    choice = WeightedChoice(["a", "b"], [3, 1])
    rng = random.Random(1)
    picks = [choice.pick(rng.random) for _ in range(40_000)]
    assert picks.count("a") / len(picks) == pytest.approx(0.75, abs=0.01)


def http(**kw: Any) -> Workload:
    args: dict[str, Any] = {
        "path": None,
        "method": None,
        "body": None,
        "headers": None,
        "user_class": "lean",
        "workers": 1,
        "users": 4,
    }
    return http_workload(**{**args, **kw})


def refused(call: Any, *words: str) -> str:
    with pytest.raises(OptionError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message, message
    return message


def test_path_guesses_get_one_line_each() -> None:
    refused(lambda: http(path=["/hello", "/work"]), "path= is one path", "mix=[webperf.request(")
    refused(lambda: http(path={"/hello": 3, "/work": 1}), "path= is one path", "mix=")
    message = refused(lambda: http(path="https://127.0.0.1:8443/hello"), "path=")
    assert "a path is a path; the target is the target" in message and "tls=True" in message
    refused(lambda: http(path="//evil/x"), "the target is the target")
    refused(lambda: http(path="hello"), "path='hello'", "starts with '/'")
    refused(lambda: http(path="/a b"), "no spaces")
    refused(lambda: http(path=3), "path=3", "a str")
    refused(lambda: request("http://x/y"), "webperf.request(path='http://x/y'", "the target")


def test_request_arguments_are_checked() -> None:
    refused(lambda: request("/a", weight=0), "weight=0", "> 0")
    refused(lambda: request("/a", weight=-1), "weight=-1")
    refused(lambda: request("/a", weight=float("nan")), "weight=nan")
    refused(lambda: request("/a", weight=True), "weight=True")
    refused(lambda: request("/a", weight="3"), "weight='3'")  # type: ignore[arg-type]
    refused(lambda: request("/a", method=1), "method=1", "'GET'")  # type: ignore[arg-type]
    refused(lambda: request("/a", method="GE T"), "method='GE T'")
    refused(lambda: request("/a", body=[1]), "body=[1]")  # type: ignore[arg-type]
    refused(lambda: request("/a", headers={"X": 1}), "headers=")  # type: ignore[dict-item]
    refused(lambda: request("/a", headers={"X": "a\r\nB: c"}), "one-line value")
    refused(lambda: request("/a", name=""), "name=''", "non-empty")
    refused(lambda: request("/a", expect_status="200"), "expect_status='200'", "an int")  # type: ignore[arg-type]
    refused(lambda: request("/a", expect_status=True), "expect_status=True")
    refused(lambda: request("/a", expect_status=[200]), "expect_status=[200]")  # type: ignore[arg-type]
    refused(lambda: request("/a", expect_status=range(0)), "at least one")
    refused(lambda: request("/a", expect_status=1000), "100 to 999")
    refused(lambda: request("/a", expect_body=3), "expect_body=3", "re.compile")  # type: ignore[arg-type]
    refused(lambda: request("/a", expect_body=""), "1 to 1024 bytes")
    refused(lambda: request("/a", expect_body="x" * 1025), "1 to 1024 bytes")


def test_mix_arguments_are_checked() -> None:
    a = request("/a")
    refused(lambda: http(mix=[]), "mix=[]", "webperf.request")
    refused(lambda: http(mix="/a"), "mix='/a'")
    refused(lambda: http(mix=["/a"]), "'/a' is not a webperf.request")
    refused(lambda: http(mix=[a, request("/a", method="POST")]), "2 entries named '/a'", "name=")
    refused(lambda: http(mix=[a], path="/b"), "not with path=")
    refused(lambda: http(mix=[a], headers={}), "not with headers=")
    refused(lambda: http(mix=[a], user_class="fast"), "mix= is the native and lean users'")
    refused(lambda: http(expect_status=200, user_class="app:User"), "expect_status= is the")


def test_a_mix_workload_names_weights_and_checks() -> None:
    workload = http(
        mix=[request("/a", weight=3), request("/b", method="post", name="create", body="{}")],
        expect_status=range(200, 300),
        expect_body="ok",
    )
    assert http_name(workload) == "mix of 2 (GET /a 3, POST create 1)"
    assert workload.weights() == {("GET", "/a"): 0.75, ("POST", "create"): 0.25}
    a, create = workload.entries()
    assert a.expect_status == frozenset(range(200, 300)) and a.expect_body == b"ok"
    assert (create.method, create.path, create.body) == ("POST", "/b", b"{}")
    own = http(mix=[request("/a", expect_status=201)], expect_status=200)
    assert own.entries()[0].expect_status == frozenset({201})  # its own check wins
    assert http(path="/x", expect_status={200, 204}).entries()[0].expect_status == {200, 204}
    assert http(path="/x").weights() == {}


@pytest.mark.parametrize(
    "workload",
    [
        Workload(),
        Workload(path="/x", expect_status=frozenset({200}), expect_body=b"\xffok"),
        Workload(path="/x", expect_body=re.compile(r"a+b", re.I)),
        Workload(path="/x", expect_body=re.compile(rb"\x00+b")),
        Workload(
            mix=(
                Request("/a", weight=3.0, expect_body=b"alpha"),
                Request("/b", "POST", b"{}", (("X-A", "1"),), 1.0, "create", frozenset({201})),
            ),
            interval_s=0.5,
        ),
    ],
)
def test_a_workload_round_trips(workload: Workload) -> None:
    assert Workload.from_dict(workload.to_dict()) == workload


def test_a_single_shape_is_as_it_was_on_the_wire_and_old_json_loads() -> None:
    old = {"path": "/hello", "method": "GET", "body": "", "headers": [], "interval_s": 0.5}
    assert Workload(interval_s=0.5).to_dict() == old
    loaded = Workload.from_dict(old)
    assert loaded == Workload(interval_s=0.5) and loaded.mix == ()
    (entry,) = loaded.entries()
    assert (entry.name, entry.weight, entry.expect_status) == ("/hello", 1.0, None)


def test_checks_accept_statuses_and_bodies() -> None:
    plain = Request("/a")
    assert plain.accepts(302) and not plain.accepts(404) and plain.body_matches(b"")
    teapot = Request("/a", expect_status=frozenset({418}))
    assert teapot.accepts(418) and not teapot.accepts(200)
    assert Request("/a", expect_body=b"ok").body_matches(b"all ok")
    assert not Request("/a", expect_body=b"ok").body_matches(b"nope")
    assert Request("/a", expect_body=re.compile("é+")).body_matches("café".encode())
    assert Request("/a", expect_body=re.compile(rb"^\d+$")).body_matches(b"123")


def test_the_parser_keeps_the_status_line_when_a_check_asks() -> None:
    parser = ResponseParser()
    parser.begin(keep_head=True)
    assert parser.feed(b"HTTP/1.1 302 Found\r\nContent-Length: 0\r\n\r\n")
    assert parser.status_line == b"HTTP/1.1 302 Found"
    parser.begin()
    assert parser.feed(b"HTTP/1.1 302 Found\r\nContent-Length: 0\r\n\r\n")
    assert parser.status_line == b""  # not asked: not kept (a success's hot path)


def test_the_native_loops_unexpected_responses_are_named_as_the_lean_users() -> None:
    from pytest_webperf.swarm import hotloop
    from pytest_webperf.swarm.engine import K_UNEXPECTED_BODY, K_UNEXPECTED_STATUS

    data = {
        "ok": 1,
        "bytes": 30,
        "fails": [
            (K_UNEXPECTED_STATUS, 0, 2, 0, 0, b"HTTP/1.1 302 Found"),
            (K_UNEXPECTED_BODY, 0, 1, 15, 0, b"HTTP/1.1 200 OKnope"),
        ],
        "latency": (4, 400, 100, 100, [(100, 4)]),
    }
    interval = hotloop.interval_from(data, timeout_s=10)
    assert (interval.requests, interval.errors) == (4, 3)
    assert interval.error_kinds == {"unexpected_status": 2, "unexpected_body": 1}
    assert interval.error_examples == {
        "unexpected_status": "HTTP/1.1 302 Found",
        "unexpected_body": "HTTP/1.1 200 OK: b'nope'",
    }


def test_a_long_bodys_example_is_cut_alike_on_both_users() -> None:
    from pytest_webperf.swarm import hotloop
    from pytest_webperf.swarm.engine import K_UNEXPECTED_BODY
    from pytest_webperf.swarm.recorder import EXAMPLE_CHARS, Interval
    from pytest_webperf.swarm.wire import unexpected_body

    line, body = "HTTP/1.1 200 OK", b"z" * 300
    lean = Interval()
    lean.record_error("unexpected_body", 10, 300, unexpected_body(line, body))
    data = {
        "ok": 0,
        "bytes": 0,
        "fails": [(K_UNEXPECTED_BODY, 0, 1, len(line), 0, line.encode() + body[:100])],
        "latency": (1, 10, 10, 10, [(10, 1)]),
    }
    native = hotloop.interval_from(data, timeout_s=10)
    assert native.error_examples == lean.error_examples
    assert len(lean.error_examples["unexpected_body"]) == EXAMPLE_CHARS
