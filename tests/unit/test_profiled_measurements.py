"""Which measurements against a stored baseline are profiled, at which rates
(``fixture/measurer.py``): the baseline's rates replayed; ``auto`` never profiles a run
whose figures would then differ from an unprofiled baseline's, unless it saves one."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from test_baseline import make

from pytest_webperf.fixture.measurer import Measurer
from pytest_webperf.measurement.plan import RunPlan
from pytest_webperf.models.measurement import Measurement
from pytest_webperf.models.placement import Placement
from pytest_webperf.profiling import capture
from pytest_webperf.settings.config import RunConfig

PROFILED = {
    "schema": 1,
    "tools": ["perf"],
    "repetitions": [
        {"leaves": {"f": 3}, "rate_hz": {"perf": 1999}},
        {"leaves": {"f": 3}, "rate_hz": {"perf": 499}},
    ],
    "folded": "main;f 6\n",
}


def measurer(stored: Measurement | None, **config: Any) -> Measurer:
    return Measurer(
        nodeid="t.py::test",
        concurrency=1,
        config=RunConfig(**config),
        verdicts=lambda m, **_: m,
        placement=Placement("shared", None, ()),
        stored=lambda m: stored,
    )


def plan(profile: str) -> RunPlan:
    return RunPlan(concurrency=1, duration_s=3.0, warmup_s=0.5, repeat=3, profile=profile)


@pytest.fixture(autouse=True)
def a_profiler_works(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capture, "perf_problem", lambda: None)


def test_a_profiled_baseline_s_rates_are_replayed() -> None:
    profiler, why = measurer(dataclasses.replace(make(1.0), profile=PROFILED))._profiler(
        make(1.0), plan("auto")
    )
    assert profiler is not None and why is None
    assert profiler.rates == {"perf": 1999}
    assert list(profiler.schedule) == [{"perf": 1999}, {"perf": 499}]


def test_auto_profiles_no_run_whose_profile_nothing_would_use() -> None:
    assert measurer(None)._profiler(make(1.0), plan("auto")) == (None, None)
    profiler, why = measurer(make(1.0))._profiler(make(1.0), plan("auto"))  # no profile kept
    assert profiler is None and why is not None and "carries no profile" in why["why"]
    assert measurer(make(1.0))._profiler(make(1.0), plan("off")) == (None, None)


def test_a_saving_run_is_profiled_and_says_when_its_baseline_was_not() -> None:
    profiler, _ = measurer(None, save=True)._profiler(make(1.0), plan("auto"))
    assert profiler is not None and profiler.note is None and not profiler.schedule
    profiler, _ = measurer(make(1.0), save=True)._profiler(make(1.0), plan("auto"))
    assert profiler is not None and "its stored baseline was not" in (profiler.note or "")
    forced, _ = measurer(make(1.0))._profiler(make(1.0), plan("on"))
    assert forced is not None and forced.note is not None
