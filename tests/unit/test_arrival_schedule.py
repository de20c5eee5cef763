"""The arrival rate (k6's constant arrival rate): due times are exactly the rate, spread
over the generator processes, no slot skipped or doubled; the option, the users it
needed, and the rule for a rate not kept."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pytest_webperf.models.measurement import RunResult
from pytest_webperf.models.samples import GeneratorSample, Latency
from pytest_webperf.swarm.pacing import ArrivalSchedule
from pytest_webperf.swarm.recorder import Interval

SECOND = 1_000_000_000
NOW = st.integers(min_value=0, max_value=10**16)  # ns since boot: up to ~4 months
RATES = st.integers(min_value=1, max_value=20_000)
PROCESSES = st.integers(min_value=1, max_value=8)


def slots_of(schedule: ArrivalSchedule, start: int, end: int) -> list[int]:
    """The process's slots due in [start, end)."""
    slots, slot = [], schedule.first(start)
    while schedule.due(slot) < end:
        slots.append(slot)
        slot = schedule.next(slot)
    return slots


@settings(deadline=None)
@given(rate=RATES, start=NOW)
def test_exactly_rate_requests_are_due_in_any_second(rate: int, start: int) -> None:
    schedule = ArrivalSchedule(rate)
    slots = slots_of(schedule, start, start + SECOND)
    assert len(slots) == rate
    assert slots == list(range(slots[0], slots[0] + rate))  # none skipped, none twice
    dues = [schedule.due(s) for s in slots]
    assert dues == sorted(set(dues)) or rate > SECOND  # strictly increasing
    assert schedule.due(slots[0]) >= start and schedule.due(slots[0] - 1) < start


@settings(deadline=None)
@given(
    rate=st.floats(min_value=0.01, max_value=50_000, allow_nan=False),
    start=NOW,
    seconds=st.integers(min_value=1, max_value=100),
)
def test_a_fractional_rate_is_kept_over_any_window(rate: float, start: int, seconds: int) -> None:
    assume(rate * seconds < 200_000)  # slots listed one by one
    schedule = ArrivalSchedule(rate)
    got = len(slots_of(schedule, start, start + seconds * SECOND))
    exact = rate * seconds  # the rate as held (a fraction) is within 1e-6 of it
    assert math.floor(exact * (1 - 1e-6)) <= got <= math.ceil(exact * (1 + 1e-6))


@settings(deadline=None)  # lists every slot of a second: slow on a busy machine
@given(rate=RATES, processes=PROCESSES, start=NOW, offsets=st.data())
def test_processes_share_the_slots_each_once(
    rate: int, processes: int, start: int, offsets: st.DataObject
) -> None:
    """Processes starting at different times (spawning takes a while) still take every
    slot after the last of them started exactly once between them, interleaved."""
    schedules = [ArrivalSchedule(rate, processes, i) for i in range(processes)]
    starts = [start + offsets.draw(st.integers(0, SECOND // 10)) for _ in schedules]
    end = max(starts) + SECOND
    taken = [slots_of(s, begin, end) for s, begin in zip(schedules, starts, strict=True)]
    common = sorted(
        slot for slots in taken for slot in slots if schedules[0].due(slot) >= max(starts)
    )
    assert common == list(range(common[0], common[0] + len(common)))  # none skipped or twice
    assert len(common) == rate
    for index, slots in enumerate(taken):
        assert all(slot % processes == index for slot in slots)
        assert all(b - a == processes for a, b in itertools.pairwise(slots))
        # each process's share of any second, within one request
        share = [s for s in slots if schedules[0].due(s) >= max(starts)]
        assert abs(len(share) - rate / processes) <= 1


@given(rate=RATES, processes=PROCESSES, now=NOW)
def test_the_first_slot_is_the_next_one_due(rate: int, processes: int, now: int) -> None:
    for index in range(processes):
        schedule = ArrivalSchedule(rate, processes, index)
        first = schedule.first(now)
        assert first % processes == index
        assert schedule.due(first) >= now
        assert schedule.due(first - processes) < now  # no earlier slot of its own was due


@pytest.mark.parametrize(
    ("rate", "processes", "index"), [(0, 1, 0), (-1.0, 1, 0), (10, 0, 0), (10, 2, 2)]
)
def test_a_schedule_that_cannot_be_is_refused(rate: float, processes: int, index: int) -> None:
    with pytest.raises(ValueError):
        ArrivalSchedule(rate, processes, index)


def test_arrival_rate_is_a_workload_or_a_clear_error() -> None:
    from pytest_webperf.errors import OptionError
    from pytest_webperf.fixture.http import http_name, http_workload
    from pytest_webperf.models.workload import Workload

    def make(**kw: Any) -> Workload:
        args: dict[str, Any] = {"method": "get", "body": "", "headers": None}
        args.update(user_class="lean", workers=1, users=50)
        return http_workload("/x", **{**args, **kw})

    arriving = make(arrival_rate=200)
    assert arriving.arrival_rate == 200 and arriving.interval_s == 0
    assert http_name(arriving) == "GET /x arriving 200/s"
    assert Workload.from_dict(arriving.to_dict()) == arriving
    assert "arrival_rate" not in make().to_dict()
    for bad, says in [
        ({"arrival_rate": 10, "interval": "1s"}, "interval= too: give one of"),
        ({"arrival_rate": 10, "rate": 5}, "rate= too"),
        ({"arrival_rate": 10, "requests": 5}, "requests= too"),
        ({"arrival_rate": 0}, "a rate is > 0"),
        ({"arrival_rate": -3.0}, "a rate is > 0"),
        ({"arrival_rate": "200"}, "a rate is > 0"),
        ({"arrival_rate": True}, "a rate is > 0"),
        ({"arrival_rate": 10, "user_class": "fast"}, "the native and lean users', not 'fast'"),
    ]:
        with pytest.raises(OptionError, match=says):
            make(**bad)


def arriving(requests: int, busy: dict[str, int]) -> Interval:
    interval = Interval(requests=requests)
    interval.record_schedule(1_000, 50_000)
    for process, n in busy.items():
        interval.note_users(process, n, n + 1)
    return interval


def test_users_busy_and_opened_merge_per_process_by_maximum() -> None:
    """Intervals of one process (over time) keep its peak; processes add up."""
    a, b = arriving(10, {"1": 3}), arriving(10, {"1": 5, "2": 2})
    a.merge(b)
    a.merge(arriving(0, {"1": 4}))
    assert a.users_busy == {"1": 5, "2": 2} and a.users_opened == {"1": 6, "2": 3}
    assert Interval.from_dict(a.to_dict()).users_busy == a.users_busy
    assert "users_busy" not in Interval().to_dict()


def test_a_recorder_keeps_users_noted_in_an_interval_without_completions() -> None:
    from pytest_webperf.swarm.recorder import Recorder

    recorder = Recorder()
    channel = recorder.channel("GET", "/x")
    channel.current.note_users("7", 40, 41)  # a stall: requests sent, none answered yet
    rolled = recorder.roll()
    assert rolled.requests == 0 and rolled.users_busy == {"7": 40}


def test_an_arrival_rate_missed_says_whether_the_cap_limited_it() -> None:
    from pytest_webperf.measurement.punctuality import fell_behind

    def behind(requests: int, busy: int, cpu: float = 20) -> tuple[str, bool] | None:
        return fell_behind(
            arriving(requests, {"1": busy}),
            0.0,
            users=2,
            seconds=2.0,
            generator=busy_cpu(cpu),
            workers=1,
            arrival_rate=200,
        )

    assert behind(390, 2) is None  # 97.5 %: kept
    message, flagged = behind(80, 2) or ("", True)  # 20 %, both users busy at once
    assert not flagged and message.startswith("the arrival schedule was not kept: 20% of")
    assert "all 2 users were busy at once: the cap (concurrency) limited the rate" in message
    message, flagged = behind(80, 1) or ("", True)  # the cap was not reached
    assert not flagged and "the server did not keep up" in message
    message, flagged = behind(80, 2, cpu=99) or ("", False)
    assert flagged and message.startswith("generator-bound: the arrival schedule")


def busy_cpu(percent: float) -> list[GeneratorSample]:
    return [GeneratorSample(t=float(t), cpu_percent=percent, processes=1) for t in range(3)]


def arrival_run(repetition: int, users: int | None) -> RunResult:
    """A repetition of 200 requests at 50 users that needed ``users`` of them."""
    return RunResult(
        repetition=repetition,
        concurrency=50,
        duration_s=1.0,
        requests=200,
        errors=0,
        timeouts=0,
        connect_errors=0,
        bytes=0,
        latency=Latency.of(Interval().histogram),
        series=(),
        users_peak=users,
        users_opened=users,
    )


def test_an_arrival_rate_runs_users_are_in_its_result_line_and_metric() -> None:
    from pytest_webperf.gate.metrics import BY_SPELLING
    from pytest_webperf.report.table import paced_lines

    rep = {
        "repetition": 1,
        "concurrency": 50,
        "latency": {"p99_ms": 3.0},
        "service": {"p99_ms": 1.25},
        "schedule_lag": {"p99_ms": 0.5},
        "users_peak": 3,
        "users_opened": 4,
        "notes": [],
    }
    entry = {"nodeid": "t.py::t", "name": "GET / arriving 200/s", "repetitions": [rep]}
    (line,) = paced_lines([entry])
    assert line.endswith("sends p99 0.5 ms late; users: 3 busy at most, 4 opened of 50")
    run = replace(arrival_run(1, 3), users_opened=4)
    again = RunResult.from_dict(run.to_dict())
    assert (again.users_peak, again.users_opened) == (3, 4)
    assert BY_SPELLING["users_used"].per_run(run) == 3
    assert BY_SPELLING["users_used"].per_run(replace(run, users_peak=None)) is None


def test_the_gate_checks_the_users_an_arrival_rate_needed() -> None:
    from pytest_webperf.gate.decide import evaluate
    from pytest_webperf.gate.grammar import parse_checks
    from pytest_webperf.models.measurement import Measurement
    from pytest_webperf.models.workload import Workload

    def measured(*peaks: int | None) -> Measurement:
        runs = tuple(arrival_run(i, peak) for i, peak in enumerate(peaks, 1))
        return Measurement("t.py::t", "GET /x arriving 200/s", "s", 50, Workload(), runs)

    (check,) = parse_checks("users_used<20")
    (result,) = evaluate(measured(3, 12), None, (check,))
    assert result.outcome == "pass" and result.current == 12  # the most any repetition used
    (result,) = evaluate(measured(3, 25), None, (check,))
    assert result.outcome == "fail" and "users_peak 25 breaks the limit" in result.message
    (result,) = evaluate(measured(None), None, (check,))
    assert result.outcome != "fail"  # not an arrival-rate run: not measured, not judged
