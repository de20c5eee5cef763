"""What a check can look at: one ``Metric`` per measurable figure, read from a ``RunResult``.

The metric table (``registry``) is the one place that says how a figure is read from a
repetition (``readings``), which direction is worse, and how repetitions combine
(``metric``); ``gate/grammar.py`` parses what users write about them, ``gate/decide.py``
decides. Adding a metric is one entry in ``METRICS``.
"""

from __future__ import annotations

from pytest_webperf.gate.metrics.metric import Metric
from pytest_webperf.gate.metrics.readings import (
    COUNTED_ONLY,
    MQTT_ONLY,
    NOT_RECORDED,
    SERVER_WIDE,
    STREAM_METRICS,
    STREAM_ONLY,
    Combine,
    Direction,
    requests_exposure,
)
from pytest_webperf.gate.metrics.registry import (
    BY_SPELLING,
    CONTENDED_CPU_PERCENT,
    METRICS,
    foreign_cpu,
)

__all__ = [
    "BY_SPELLING",
    "CONTENDED_CPU_PERCENT",
    "COUNTED_ONLY",
    "METRICS",
    "MQTT_ONLY",
    "NOT_RECORDED",
    "SERVER_WIDE",
    "STREAM_METRICS",
    "STREAM_ONLY",
    "Combine",
    "Direction",
    "Metric",
    "foreign_cpu",
    "requests_exposure",
]
