"""``stages=`` parsed: (duration, level) pairs, users whole, rates any positive number;
anything else one line naming ``stages=``."""

from __future__ import annotations

import pytest

from pytest_webperf.errors import OptionError
from pytest_webperf.measurement.stages import Stage, parse_stages


def test_stages_are_durations_and_levels() -> None:
    assert parse_stages([("30s", 100), (2.5, 500)], arrival=False) == (
        Stage(30.0, 100.0),
        Stage(2.5, 500.0),
    )
    assert parse_stages([("1m", 12.5)], arrival=True) == (Stage(60.0, 12.5),)
    assert Stage(30, 100).label(0, 2, False) == "stage 1/2: 100 users, 30s"
    assert Stage(1.5, 12.5).label(1, 2, True) == "stage 2/2: 12.5/s, 1.5s"


@pytest.mark.parametrize(
    ("stages", "arrival"),
    [
        ([], False),
        ("30s", False),
        ([("30s",)], False),
        ([("30s", 0)], False),
        ([("30s", 2.5)], False),  # users are whole
        ([("0s", 10)], True),
        ([("soon", 10)], True),
        ([("1s", True)], True),
        ([("1s", float("inf"))], True),
        ([("1s", 1)] * 51, False),
    ],
)
def test_bad_stages_are_one_line_naming_stages(stages: object, arrival: bool) -> None:
    with pytest.raises(OptionError) as caught:
        parse_stages(stages, arrival=arrival)
    assert str(caught.value).startswith("stages=") and "\n" not in str(caught.value)
