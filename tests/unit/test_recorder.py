"""Per-interval bookkeeping of a swarm process: recorder, channels, error kinds."""

from __future__ import annotations

import errno
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.swarm.recorder import (
    CONNECT,
    EXAMPLE_CHARS,
    TIMEOUT,
    USER_EXCEPTION,
    Interval,
    Recorder,
    classify,
    describe_exception,
)

Event = tuple[str, int, int]  # (error kind or "", latency us, bytes)
events = st.lists(
    st.tuples(
        st.sampled_from(["", "", "timeout", "http_500"]),
        st.integers(0, 10**7),
        st.integers(0, 10**6),
    ),
    max_size=60,
)


def replay(interval: Interval, batch: list[Event]) -> None:
    for kind, latency, nbytes in batch:
        if not kind:
            interval.record(latency, nbytes)
        elif kind.startswith("http_"):
            interval.record_error(kind, latency, nbytes)
        else:
            interval.record_error(kind)


@given(st.lists(events, min_size=1, max_size=4))
def test_intervals_merge_exactly_like_one_interval_recording_everything(
    batches: list[list[Event]],
) -> None:
    merged, whole = Interval(), Interval()
    for batch in batches:
        part = Interval()
        replay(part, batch)
        merged.merge(Interval.from_dict(part.to_dict()))  # through the wire, as workers do
        replay(whole, batch)
    assert merged.to_dict() == whole.to_dict()


def test_failures_without_a_response_have_no_latency() -> None:
    interval = Interval()
    interval.record(120, 20)
    interval.record_error(TIMEOUT)
    interval.record_error("http_503", 80, 5)
    assert (interval.requests, interval.errors, interval.bytes) == (3, 2, 25)
    assert interval.histogram.count == 2
    assert interval.error_kinds == {TIMEOUT: 1, "http_503": 1}


def test_roll_folds_channels_in_and_tells_listeners_per_name() -> None:
    recorder = Recorder()
    heard: list[tuple[str, str, int]] = []
    recorder.roll_listeners.append(
        lambda method, name, part: heard.append((method, name, part.requests))
    )
    hello = recorder.channel("GET", "/hello")
    assert recorder.channel("GET", "/hello") is hello
    hello.record(100, 20)
    hello.record(300, 20)
    recorder.channel("POST", "/telemetry").record_error(CONNECT)
    recorder.record(50, 1)  # straight into the recorder, as Locust's request event does

    first = recorder.roll()
    assert (first.requests, first.errors, first.bytes) == (4, 1, 41)
    assert sorted(heard) == [("GET", "/hello", 2), ("POST", "/telemetry", 1)]
    assert first.histogram.count == 3

    heard.clear()
    second = recorder.roll()
    assert second.requests == 0
    assert heard == []  # an idle name is not reported
    assert recorder.rolled_requests == 4


def test_on_request_maps_locust_events() -> None:
    recorder = Recorder()
    recorder.on_request(response_time=1.5, response_length=20)
    recorder.on_request(response_time=2.0, response_length=0, exception=ConnectionRefusedError())
    interval = recorder.roll()
    assert interval.histogram.to_dict()["min"] == 1500
    assert interval.error_kinds == {CONNECT: 1}
    assert interval.histogram.count == 1  # a connect error carries no latency


@pytest.mark.parametrize(
    ("exception", "status", "kind"),
    [
        (None, 404, "http_404"),
        (ConnectionRefusedError(), None, CONNECT),
        (TimeoutError(), None, TIMEOUT),
        (ConnectionResetError(), None, "reset"),
        (BrokenPipeError(), None, "reset"),
        (OSError(errno.EMFILE, "Too many open files"), None, "emfile"),
        (OSError(errno.EHOSTUNREACH, "unreachable"), None, "socket"),
        ("CatchResponseError", None, "failure"),
        (ValueError("x"), None, "ValueError"),
    ],
)
def test_classify(exception: BaseException | str | None, status: int | None, kind: str) -> None:
    assert classify(exception, status) == kind


def test_one_example_per_error_kind_survives_merging_and_the_wire() -> None:
    first, second = Interval(), Interval()
    first.record_error("http_500", 80, 4, "HTTP/1.1 500 Internal Server Error")
    assert not first.wants_example("http_500") and first.wants_example(TIMEOUT)
    first.record_error("http_500", 80, 4, "HTTP/1.1 500 later, not kept")
    second.record_error(TIMEOUT, example="no answer within 1 s")
    second.record_error("http_500", 80, 4, "HTTP/1.1 500 from another worker")
    first.merge(Interval.from_dict(second.to_dict()))
    assert first.error_examples == {
        "http_500": "HTTP/1.1 500 Internal Server Error",
        TIMEOUT: "no answer within 1 s",
    }
    old = {k: v for k, v in first.to_dict().items() if k != "error_examples"}
    assert Interval.from_dict(old).error_examples == {}  # from a worker of an older version


def test_a_locust_error_event_leaves_its_status_and_reason_as_the_example() -> None:
    class Response:
        status_code, reason = 503, "Service Unavailable"

    recorder = Recorder()
    recorder.on_request(
        response_time=1.5, response_length=10, exception=RuntimeError("bad"), response=Response()
    )
    recorder.on_request(
        response_time=1.5, response_length=0, exception=ConnectionResetError(104, "reset by peer")
    )
    assert recorder.roll().error_examples == {
        "http_503": "HTTP 503 Service Unavailable",
        "reset": "ConnectionResetError(104, 'reset by peer')",
    }


def test_locust_request_events_land_in_their_names_channels() -> None:
    recorder = Recorder()
    heard: list[tuple[str, str, int]] = []
    recorder.roll_listeners.append(lambda method, name, part: heard.append((method, name, 0)))
    recorder.on_request(request_type="GET", name="page", response_time=1.0, response_length=5)
    recorder.on_request(request_type="GET", name="page", response_time=3.0, response_length=5)
    recorder.on_request(
        request_type="POST",
        name="cart",
        response_time=2.0,
        response_length=0,
        exception=TimeoutError(),
    )
    assert set(recorder.channels) == {("GET", "page"), ("POST", "cart")}
    assert recorder.channels["GET", "page"].current.requests == 2
    interval = recorder.roll()
    assert (interval.requests, interval.errors, interval.error_kinds) == (3, 1, {TIMEOUT: 1})
    assert heard == []  # Locust's own stats logged these: not fed a second time


def test_a_paced_request_counts_from_its_task_s_intended_start() -> None:
    recorder = Recorder()
    lags = iter([250_000, None])
    recorder.pacing = lambda service_us: next(lags)
    recorder.on_request(request_type="GET", name="/a", response_time=2.0, response_length=1)
    recorder.on_request(request_type="GET", name="/a", response_time=3.0, response_length=1)
    interval = recorder.roll()
    assert interval.histogram.maximum == 252_000  # 2 ms answered 250 ms after it was due
    assert interval.histogram.minimum == 3_000  # not from a paced user: as measured
    assert interval.service is not None and interval.lag is not None
    assert interval.service.count == 1 and interval.service.maximum == 2_000
    assert interval.lag.maximum == 250_000


def test_a_task_exception_is_an_error_with_where_it_was_raised(tmp_path: Path) -> None:
    source = tmp_path / "locustfile.py"
    source.write_text("def task(user):\n    return user.client\n")
    code = compile(source.read_text(), str(source), "exec")
    scope: dict[str, Any] = {}
    exec(code, scope)
    recorder = Recorder()
    recorder.user_files = (str(source),)
    for _ in range(3):
        try:
            scope["task"](object())
        except AttributeError as exc:
            recorder.on_user_error(user_instance=None, exception=exc, tb=exc.__traceback__)
    interval = recorder.roll()
    assert (interval.requests, interval.errors) == (3, 3)
    assert interval.error_kinds == {USER_EXCEPTION: 3}
    assert interval.error_examples == {
        USER_EXCEPTION: "AttributeError: 'object' object has no attribute 'client' "
        "(locustfile.py:2)"
    }


def test_a_long_exception_message_keeps_its_location() -> None:
    try:
        raise ValueError("x" * 500)
    except ValueError as exc:
        described = describe_exception(exc)
    assert len(described) <= EXAMPLE_CHARS
    assert described.startswith("ValueError: xxx")
    assert re.search(r"\.\.\. \(test_recorder\.py:\d+\)$", described), described


@given(st.lists(st.tuples(events, events), min_size=1, max_size=3))
def test_several_channels_roll_their_parts_as_endpoints_that_merge_exactly(
    batches: list[tuple[list[Event], list[Event]]],
) -> None:
    """Each process's roll carries every channel's part; workers' rolls merged through
    the wire (as the distributed master merges them) equal one process recording all."""
    merged, whole = Interval(), Recorder()
    for a_batch, b_batch in batches:
        worker = Recorder()
        for recorder in (worker, whole):
            replay(recorder.channel("GET", "/a").current, a_batch)
            replay(recorder.channel("POST", "create").current, b_batch)
        merged.merge(Interval.from_dict(worker.roll().to_dict()))
    expected = whole.roll()
    assert merged.to_dict() == expected.to_dict()
    parts = list(expected.endpoints.values())
    assert sum(p.requests for p in parts) == expected.requests
    assert sum(p.histogram.count for p in parts) == expected.histogram.count
    assert set(expected.endpoints) <= {("GET", "/a"), ("POST", "create")}


def test_one_channel_has_no_endpoints_unless_split() -> None:
    recorder = Recorder()
    recorder.channel("GET", "/hello").record(100, 1)
    assert recorder.roll().endpoints == {}
    recorder.split = True  # a mix of one entry is still a mix
    recorder.channel("GET", "/hello").record(100, 1)
    assert list(recorder.roll().endpoints) == [("GET", "/hello")]


@given(
    st.lists(
        st.tuples(st.integers(0, 10**7), st.none() | st.integers(0, 10**7)),
        min_size=1,
        max_size=40,
    ),
    st.integers(0, 40),
)
def test_connection_setup_times_merge_exactly_and_travel(
    setups: list[tuple[int, int | None]], cut: int
) -> None:
    whole, first, second = Interval(), Interval(), Interval()
    for i, (connect_us, handshake_us) in enumerate(setups):
        whole.record_setup(connect_us, handshake_us)
        (first if i < cut else second).record_setup(connect_us, handshake_us)
    merged = Interval()
    merged.merge(first)
    merged.merge(second)
    assert merged.connect is not None and whole.connect is not None
    assert merged.connect.counts == whole.connect.counts
    assert merged.connect.count == len(setups)
    handshakes = [h for _, h in setups if h is not None]
    if handshakes:
        assert merged.handshake is not None and whole.handshake is not None
        assert merged.handshake.counts == whole.handshake.counts
        assert merged.handshake.count == len(handshakes)
    else:
        assert merged.handshake is None
    back = Interval.from_dict(merged.to_dict())
    assert back.connect is not None and back.connect.counts == merged.connect.counts
    assert (back.handshake is None) == (merged.handshake is None)
    assert "connect" not in Interval().to_dict()  # keep-alive runs carry no setup times
