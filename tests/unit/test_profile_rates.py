"""Sampling rates sized to the run (``profiling/rates.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.profiling.rates import (
    FIRST_GUESS_CORES,
    LADDER,
    PY_SPY_CAP,
    Plan,
    first_rates,
    perf_cap,
    plan,
    short_note,
)


def test_the_light_python_server_of_the_report_gets_the_cap() -> None:
    # 18 % of a core, 3 pairs of 3 s: 1.62 CPU-s per side; 2000 / 1.62 = 1235 Hz > 997
    chosen = plan("py-spy", 0.18, 3.0, 3)
    assert chosen.rate == PY_SPY_CAP and chosen.expected == pytest.approx(997 * 1.62)
    assert chosen.needed_duration_s == pytest.approx(2000 / (997 * 0.18 * 3))
    assert plan("perf", 0.18, 3.0, 3, cap=1999) == Plan(
        "perf", 1999, pytest.approx(1999 * 1.62), None
    )


def test_a_busy_server_stays_at_a_low_rate() -> None:
    assert plan("perf", 2.0, 20.0, 5, cap=1999).rate == 99  # 200 CPU-s: 99 Hz is plenty


def test_samples_already_taken_count_and_only_the_repetitions_left_are_planned() -> None:
    # the first pair gave 1,900 samples: the two left need 100 more, the lowest rate does
    assert plan("perf", 0.18, 3.0, 3, have=1900, done=1, cap=1999).rate == 99
    # it gave 200: 1,800 over 2 x 3 s x 0.18 cores = 1667 Hz
    assert plan("perf", 0.18, 3.0, 3, have=200, done=1, cap=1999).rate == 1999


def test_dispersion_raises_the_target() -> None:
    chosen = plan("perf", 0.5, 3.0, 3, cap=1999, dispersion=5.0)
    assert chosen.rate == 1999  # 10,000 wanted: 2222 Hz would be needed
    assert plan("perf", 0.5, 3.0, 3, cap=1999, dispersion=0.5) == plan(
        "perf", 0.5, 3.0, 3, cap=1999
    )


def test_the_first_repetition_guesses_a_quarter_of_a_core() -> None:
    rates = first_rates(3.0, 3)
    assert rates["py-spy"] == plan("py-spy", FIRST_GUESS_CORES, 3.0, 3).rate == 997
    assert first_rates(20.0, 5)["perf"] == 99  # 25 CPU-s expected: 99 Hz gives 2,475


def test_perf_cap_reads_the_kernel_limit(tmp_path: Path) -> None:
    limit = tmp_path / "rate"
    limit.write_text("1500\n")
    assert perf_cap(limit) == 1500
    limit.write_text("100000\n")
    assert perf_cap(limit) == 1999
    assert perf_cap(tmp_path / "missing") == 1000


def test_a_short_side_at_the_cap_says_what_duration_would_do() -> None:
    note = short_note("py-spy", 997, 800, 0.1, 3)
    assert note is not None and "--webperf-duration=7s" in note and "800 samples" in note
    assert short_note("py-spy", 499, 800, 0.1, 3) is None  # not at the cap: the plan chose it
    assert short_note("py-spy", 997, 2500, 0.1, 3) is None


@given(st.floats(0.001, 8), st.floats(1, 120), st.integers(1, 20))
def test_the_rate_is_on_the_ladder_off_the_beat_and_the_lowest_that_reaches(
    cores: float, duration: float, pairs: int
) -> None:
    chosen = plan("perf", cores, duration, pairs, cap=1999)
    assert chosen.rate in LADDER and chosen.rate % 100 != 0 and chosen.rate % 250 != 0
    lower = [r for r in LADDER if r < chosen.rate]
    if lower:
        assert lower[-1] * cores * duration * pairs < 2000
    if chosen.needed_duration_s is None:
        assert chosen.expected >= 2000 * 0.95
