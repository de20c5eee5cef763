import dataclasses
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.errors import OptionError
from pytest_webperf.settings.config import SETTINGS, RunConfig, explain, resolve
from pytest_webperf.values import parse_concurrency, parse_duration, parse_positive_duration

UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "": 1.0}


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(sorted(UNITS)))
def test_duration_units(number, unit):
    assert math.isclose(parse_duration(f"{number}{unit}"), number * UNITS[unit])


@given(st.lists(st.integers(min_value=1, max_value=100_000), min_size=1, max_size=8))
def test_concurrency_round_trip(values):
    parsed = parse_concurrency(",".join(map(str, values)))
    assert parsed == tuple(dict.fromkeys(values))


@pytest.mark.parametrize("text", ["abc", "0", "-5", "", "10,,20", "1.5", "10,x"])
def test_bad_concurrency(text):
    with pytest.raises(ValueError):
        parse_concurrency(text)


@pytest.mark.parametrize("text", ["xyz", "0s", "-1s", "5 minutes", ""])
def test_bad_positive_duration(text):
    with pytest.raises(ValueError):
        parse_positive_duration(text)


def test_precedence_cli_env_ini_default():
    config = resolve(
        cli={"duration": 3.0},
        env={"WEBPERF_DURATION": "4s", "WEBPERF_REPEAT": "7"},
        ini={"duration": "5s", "repeat": "9", "warmup": "1s"},
    )
    assert (config.duration, config.repeat, config.warmup) == (3.0, 7, 1.0)
    assert config.concurrency == RunConfig().concurrency
    assert config.sources == {
        "duration": "--webperf-duration",
        "repeat": "WEBPERF_REPEAT",
        "warmup": "webperf_warmup",
    }


def test_bad_env_names_its_source():
    with pytest.raises(OptionError, match="WEBPERF_CONCURRENCY='abc'"):
        resolve({}, {"WEBPERF_CONCURRENCY": "abc"}, {})


def test_bad_ini_names_its_source():
    with pytest.raises(OptionError, match="webperf_repeat"):
        resolve({}, {}, {"repeat": "lots"})


def test_marker_overrides_are_parsed():
    config = RunConfig().with_overrides({"duration": "5s", "concurrency": [10, 20]}, "marker")
    assert config.duration == 5.0 and config.concurrency == (10, 20)
    with pytest.raises(OptionError, match="unknown setting 'duraton'"):
        RunConfig().with_overrides({"duraton": "5s"}, "marker")


def test_multiple_values_from_ini_lines():
    config = resolve({}, {}, {"servers": ["a", "b"]})
    assert config.servers == (Path("a"), Path("b"))


def test_every_setting_is_a_field():
    fields = set(RunConfig.__dataclass_fields__)
    assert {s.name for s in SETTINGS} <= fields


def test_min_repeat_raises_markers_and_the_command_line():
    run = resolve({"repeat": 2, "min_repeat": 4}, {}, {})
    assert run.repeat == 4
    assert run.sources["repeat"] == "--webperf-min-repeat, over --webperf-repeat's 2"
    marked = resolve({"min_repeat": 6}, {}, {}).with_overrides(
        {"repeat": 3}, "t: @pytest.mark.webperf"
    )
    assert marked.repeat == 6
    assert resolve({"min_repeat": 2}, {}, {}).with_overrides({"repeat": 9}, "m").repeat == 9


def test_min_repeat_from_the_environment_and_ini():
    assert resolve({}, {"WEBPERF_MIN_REPEAT": "8"}, {}).repeat == 8
    assert resolve({}, {}, {"min_repeat": "7", "repeat": "3"}).repeat == 7
    assert resolve({}, {}, {}).repeat == RunConfig().repeat  # the default minimum is 1


def test_explain_says_where_each_setting_came_from():
    run = resolve({"repeat": 5, "duration": 1.0}, {"WEBPERF_WARMUP": "0.5s"}, {})
    test = run.with_overrides({"repeat": 3}, "test_a.py::test_x[c5]: @pytest.mark.webperf")
    assert explain(test, run, concurrency=5) == (
        "concurrency=5 (default) duration=1s warmup=0.5s (from WEBPERF_WARMUP) "
        "repeat=3 (from @pytest.mark.webperf, beats --webperf-repeat=5)"
    )
    assert explain(run, run) == (
        "concurrency=100 (default) duration=1s warmup=0.5s (from WEBPERF_WARMUP) repeat=5"
    )


def test_explain_says_when_min_repeat_raised_a_marker():
    run = resolve({"min_repeat": 4}, {}, {"concurrency": "5,20"})
    test = run.with_overrides({"repeat": 2}, "t.py::t: @pytest.mark.webperf")
    assert explain(test, run) == (
        "concurrency=5,20 (from webperf_concurrency) duration=20s (default) warmup=2s (default) "
        "repeat=4 (from --webperf-min-repeat, over @pytest.mark.webperf's 2)"
    )


def test_every_setting_is_a_run_config_field_with_its_default() -> None:
    """One place for every default: a setting's is its RunConfig field's."""
    fields = {f.name for f in dataclasses.fields(RunConfig)} - {"sources"}
    assert {s.name for s in SETTINGS} == fields
    assert SETTINGS[0].default == RunConfig().concurrency == (100,)
    assert next(s for s in SETTINGS if s.name == "generator_cpus").default == ()
