"""A generator process's crash, said in one line: the exception and where it came from."""

from __future__ import annotations

import json

from pytest_webperf.swarm.userspec import user_failure


def _raise_here() -> None:
    json.loads("{not json")  # raises inside the standard library


def test_the_place_is_the_users_code_not_the_librarys() -> None:
    try:
        _raise_here()
    except ValueError as exc:
        line = user_failure("starting a user of 'm:C'", exc)
    assert line.startswith("starting a user of 'm:C' failed: JSONDecodeError: Expecting")
    assert "\n" not in line
    assert line.endswith(f"test_swarm_failure.py:{_raise_here.__code__.co_firstlineno + 1})")


def test_a_crash_in_webperf_itself_names_its_deepest_frame_when_asked() -> None:
    exc = RuntimeError("first line\nsecond line")
    line = user_failure("the load generator", exc, anywhere=True)
    assert line == "the load generator failed: RuntimeError: first line"
