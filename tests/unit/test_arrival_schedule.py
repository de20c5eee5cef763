"""The arrival-rate schedule (k6's constant arrival rate): due times are exactly the
rate, spread over the generator processes, no slot skipped or doubled."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pytest_webperf.swarm.pacing import ArrivalSchedule

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
