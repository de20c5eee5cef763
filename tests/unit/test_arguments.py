"""The arguments of webperf.http/process/server/mqtt: refused at the call, in one line
naming the parameter and what it accepts, before anything starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.errors import OptionError
from pytest_webperf.fixture import arguments
from pytest_webperf.fixture.handle import Webperf
from pytest_webperf.settings.config import RunConfig


def _nothing(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("started something before checking its arguments")


class _Target:
    name = "t"
    url = "http://127.0.0.1:1"

    def describe(self) -> dict[str, Any]:
        return {}


def handle() -> Webperf:
    return Webperf(
        nodeid="t.py::test",
        concurrency=1,
        config=RunConfig(),
        catalog=_nothing,
        verdicts=_nothing,
        monitor_factory=_nothing,
    )


HTTP_REFUSED = [
    ("name", ""),
    ("name", 3),
    ("concurrency", 0),
    ("concurrency", [10, 50]),
    ("concurrency", "50"),
    ("concurrency", 2.5),
    ("concurrency", True),
    ("duration", "5 seconds"),
    ("duration", 0),
    ("duration", -1),
    ("duration", [5]),
    ("warmup", "soon"),
    ("warmup", -1),
    ("repeat", 0),
    ("repeat", "3"),
    ("repeat", 1.5),
    ("user", "turbo"),
    ("user", 3),
    ("interval", "fast"),
    ("interval", 0),
    ("rate", "100"),
    ("rate", 0),
    ("rate", float("inf")),
    ("requests", -1),
    ("requests", "100"),
    ("requests", 1.5),
    ("arrival_rate", "100/s"),
    ("arrival_rate", 0),
]


@pytest.mark.parametrize(("parameter", "value"), HTTP_REFUSED)
def test_http_refuses_at_the_call(parameter: str, value: Any) -> None:
    with pytest.raises(OptionError) as caught:
        handle().http(_Target(), **{parameter: value})  # type: ignore[arg-type]
    message = str(caught.value)
    assert message.startswith(f"webperf.http({parameter}=")
    assert f": {parameter} is " in message
    assert "\n" not in message


PROCESS_REFUSED = [
    ("command", ""),
    ("command", []),
    ("command", "python -c 'unclosed"),
    ("command", 42),
    ("command", ["python", 3]),
    ("name", ""),
    ("port_env", "MY-PORT"),
    ("port_env", ""),
    ("health", "http://127.0.0.1:8080/health"),
    ("health", "health"),
    ("health", None),
    ("startup_timeout", "30s"),
    ("startup_timeout", 0),
    ("env", {"WORKERS": 4}),
    ("env", {"A=B": "1"}),
    ("env", {3: "1"}),
    ("env", ["A=1"]),
    ("cwd", "/no/such/directory/here"),
    ("cwd", 3),
]


@pytest.mark.parametrize(("parameter", "value"), PROCESS_REFUSED)
def test_process_refuses_at_the_call(parameter: str, value: Any) -> None:
    given_args: dict[str, Any] = {"command": "python -m http.server", parameter: value}
    command = given_args.pop("command")
    with pytest.raises(OptionError) as caught:
        handle().process(command, **given_args)
    message = str(caught.value)
    assert message.startswith(f"webperf.process({parameter}=")
    assert "\n" not in message


SERVER_REFUSED = [
    ("name", ""),
    ("name", None),
    ("cpus", 0),
    ("cpus", "1.5"),
    ("cpus", -1),
    ("memory", "lots"),
    ("memory", 512),
    ("cpuset", "1-0"),
    ("cpuset", "all"),
    ("cpuset", 1),
    ("env", {"A": True}),
    ("env", {"": "1"}),
    ("env", "A=1"),
]


@pytest.mark.parametrize(("parameter", "value"), SERVER_REFUSED)
def test_server_refuses_at_the_call(parameter: str, value: Any) -> None:
    given_args: dict[str, Any] = {"name": "nginx", parameter: value}
    name = given_args.pop("name")
    with pytest.raises(OptionError) as caught:
        handle().server(name, **given_args)
    assert str(caught.value).startswith(f"webperf.server({parameter}=")


MQTT_REFUSED = [
    ("users", 0),
    ("users", [10]),
    ("interval", "often"),
    ("interval", -1),
    ("qos", 3),
    ("qos", "2"),
    ("duration", 0),
    ("warmup", "x"),
    ("repeat", 0),
    ("drain", "forever"),
    ("quiet", 0),
    ("spawn_rate", -1),
    ("spawn_rate", "10"),
    ("observe", "yes"),
    ("topic", "telemetry/#"),
    ("topic", ""),
    ("protocol", 3),
    ("protocol", "5"),
    ("name", ""),
]


@pytest.mark.parametrize(("parameter", "value"), MQTT_REFUSED)
def test_mqtt_refuses_at_the_call(parameter: str, value: Any) -> None:
    with pytest.raises(OptionError) as caught:
        handle().mqtt(_Target(), **{parameter: value})  # type: ignore[arg-type]
    assert str(caught.value).startswith(f"webperf.mqtt({parameter}=")


def test_every_parameter_checked_is_one_the_call_has() -> None:
    """A table entry for a parameter the method does not have would check nothing."""
    import inspect

    for call, table in arguments.CALLS.items():
        parameters = inspect.signature(getattr(Webperf, call)).parameters
        assert set(table) <= set(parameters), call


def test_accepted_values_pass(tmp_path: Path) -> None:
    arguments.check(
        "http",
        {
            "name": "warm",
            "concurrency": 5,
            "duration": "2s",
            "warmup": 0,
            "repeat": 1,
            "user": "tests.users:Mine",
            "interval": "500ms",
            "rate": 10.5,
            "requests": 0,
            "arrival_rate": 100,
        },
    )
    arguments.check(
        "process",
        {
            "command": ["python", Path("app.py")],
            "name": None,
            "port_env": "APP_PORT",
            "health": "tcp",
            "startup_timeout": 5,
            "env": {"A": "1", "BASH_FUNC_f%%": "() { :; }"},
            "cwd": tmp_path,
        },
    )
    arguments.check("server", {"name": "nginx", "cpus": 1, "memory": "1g", "cpuset": "0-1"})
    arguments.check("server", {"name": "go-mqtt", "env": {"mosquitto.MAX": "20", "N": 4}})
    arguments.check("mqtt", {"interval": 0, "qos": 0, "drain": "0s", "quiet": "1s"})


@given(st.integers(min_value=1, max_value=10**6))
def test_any_positive_whole_number_of_users_passes(n: int) -> None:
    assert arguments.users(n) is None
    assert arguments.repetitions(n) is None


@given(st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8))
def test_durations_are_accepted_exactly_when_they_parse_finite(value: Any) -> None:
    """Whatever is accepted as a duration > 0 is one that parse_duration gives > 0."""
    from pytest_webperf.settings.config import parse_duration

    if arguments.duration(value) is None:
        seconds = parse_duration(value)
        assert 0 < seconds < float("inf")
