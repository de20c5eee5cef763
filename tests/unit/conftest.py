"""Unit tests: plain Python. Hypothesis runs without its per-example deadline: on
shared 2-core machines a deadline times the neighbours, not the code (a property that
took 0.2 s under load average 8 failed as "flaky"); speed is measured in benchmarks."""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("webperf", deadline=None)
settings.load_profile("webperf")
