"""A study's ordering judged end to end: two local servers of known relative speed.

The servers are ``tests/servers/costly`` compiled on the host and started as local
commands (no engine): its CPU cost per request is set by COST_US (deterministic work,
never a sleep), so a server told to do twice the work per request serves about half
the requests. Named as seed 001's servers, in a test file and function named as its
suite's, they are compared as the study's line compares nginx-cache and varnish: twice
the work must give ``holds`` with an interval above 1, the same work ``not separated``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

COSTLY = Path(__file__).resolve().parents[1] / "servers" / "costly" / "server.c"
COST_US = 1000  # ~1,000 req/s on one core: far from what the generator can send

SUITE = """
import os

import pytest


@pytest.mark.parametrize("server", ["nginx-cache", "varnish"])
def test_proxy_cache(webperf, server):
    cost = os.environ["COST_FIRST" if server == "nginx-cache" else "COST_SECOND"]
    target = webperf.process([os.environ["COSTLY_BIN"]], name=server, env={"COST_US": cost})
    webperf.http(target, path="/work")
"""
RUN = [
    "-p",
    "no:locust",
    "-W",
    "error",
    "--webperf-concurrency=4",
    "--webperf-duration=1.5s",
    "--webperf-warmup=0.5s",
    "--webperf-repeat=3",
    "--webperf-restart-every=1",
    "--webperf-json=out.json",
]


@pytest.fixture(scope="module")
def costly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The costly server, compiled as its Dockerfile compiles it."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.fail("no C compiler: the costly server is built with gcc", pytrace=False)
    binary = tmp_path_factory.mktemp("costly") / "costly"
    subprocess.run([gcc, "-O2", "-o", str(binary), str(COSTLY)], check=True, timeout=120)
    return binary


def study(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, costly: Path, second: int
) -> tuple[dict, list[str]]:
    pytester.makepyfile(test_seed001_proxy_cache=SUITE)
    monkeypatch.setenv("COSTLY_BIN", str(costly))
    monkeypatch.setenv("COST_FIRST", str(COST_US))
    monkeypatch.setenv("COST_SECOND", str(second))
    result = pytester.runpytest_subprocess(*RUN)
    result.assert_outcomes(passed=2)
    (line,) = json.loads((pytester.path / "out.json").read_text())["studies"]
    return line, result.stdout.lines


def test_twice_the_work_per_request_holds_with_its_interval(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, costly: Path
) -> None:
    line, out = study(pytester, monkeypatch, costly, second=2 * COST_US)
    (pair,) = line["pairs"]
    assert (pair["first"], pair["second"], pair["status"]) == ("nginx-cache", "varnish", "holds")
    assert 1 < pair["low"] <= pair["ratio"] <= pair["high"]
    assert 1.3 < pair["ratio"] < 4, pair  # twice the work: about half the throughput
    assert line["status"] == "holds" and line["holds"] is True
    if (os.cpu_count() or 1) < 4:  # placement auto leaves 2-3 cores shared
        assert line["notes"][-1].startswith("server and generator shared the machine's")
    assert any(
        "nginx-cache/varnish " in text and ", 95% CI " in text and ": holds" in text for text in out
    ), out


def test_the_same_work_per_request_is_not_separated(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, costly: Path
) -> None:
    line, out = study(pytester, monkeypatch, costly, second=COST_US)
    (pair,) = line["pairs"]
    assert pair["status"] == "not separated", pair
    # within the margin that orders servers (ordering.MARGIN): the interval need not hold 1
    assert pair["low"] < 1.05 and pair["high"] > 1 / 1.05 and 0.5 < pair["ratio"] < 2
    assert line["status"] == "not separated" and line["holds"] is None
    assert any("the study's nginx-cache > varnish: not separated" in text for text in out), out
