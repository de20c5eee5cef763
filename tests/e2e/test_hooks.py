"""The hooks of hookspec.py, implemented in a user's conftest.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest_plugins = ["pytester"]
# No server is started: the report is written all the same, with the machine in it.
ARGS = ["-p", "no:locust", "-W", "error", "--webperf-target-url=http://127.0.0.1:9"]
CONFTEST = """
def pytest_webperf_update_machine_info(config, machine_info):
    machine_info["runner_pool"] = "blue"

def pytest_webperf_update_json(config, report):
    report["ci"] = {"build": 7, "rootdir": str(config.rootpath)}
"""


def run(pytester: pytest.Pytester, out: str) -> dict[str, Any]:
    result = pytester.runpytest_subprocess(*ARGS, f"--webperf-json={out}")
    result.assert_outcomes(passed=1)
    data: dict[str, Any] = json.loads((pytester.path / out).read_text())
    return data


def test_a_conftest_adds_to_the_machine_info_and_the_json(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    plain = run(pytester, "plain.json")
    pytester.makeconftest(CONFTEST)
    extended = run(pytester, "extended.json")

    assert "ci" not in plain and "runner_pool" not in plain["machine"]
    assert extended["ci"] == {"build": 7, "rootdir": str(pytester.path)}
    assert extended["machine"] == {**plain["machine"], "runner_pool": "blue"}
    # a key added to the machine info is part of the fingerprint: another machine id
    assert extended["machine_id"] != plain["machine_id"]
    assert extended["machine_id"].rsplit("-", 1)[0] == plain["machine_id"].rsplit("-", 1)[0]
