"""What a report says a test ran with, from a real run (#13's header and capacity defects).

A marker overrides the command line's settings; the HTML header must show the
marker's values, not the options', and placement as the terminal printed it. A
single-threaded server has the capacity of one core, not of the machine, however
much of that core a busy machine left it.
"""

from __future__ import annotations

import json
import os
import re

import pytest
from tests.e2e.asyncio_server import asyncio_server

pytest_plugins = ["pytester"]

# One thread (asyncio), ~1.5 ms of CPU per request: it saturates one core at a few
# hundred requests per second, while the generator needs little of the other core.
SERVER = asyncio_server(
    """
    def respond():
        digest = b"x"
        for _ in range(6000):
            digest = hashlib.sha256(digest).digest()
        return digest.hex().encode()
    """
)
TEST = """
import sys

import pytest

@pytest.mark.webperf(concurrency=3, duration="2s", repeat=2)
def test_single(webperf):
    target = webperf.process([sys.executable, "server.py"], name="single-thread")
    webperf.http(target, path="/work")
"""


def header_facts(page: str) -> dict[str, str]:
    settings = page.split('<section id="settings">', maxsplit=1)[1]  # the page's last part
    facts = re.findall(r"<dt>([^<]*)</dt><dd>([^<]*)</dd>", settings)
    names = [name for name, _ in facts]
    assert len(names) == len(set(names)), f"a fact said twice: {names}"
    return dict(facts)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs a core beyond the server's one")
def test_the_report_shows_the_marker_settings_and_one_core_of_capacity(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(server=SERVER, test_single=TEST)
    result = pytester.runpytest_subprocess(
        "-p",
        "no:locust",
        "-W",
        "error",
        "-v",
        "--webperf-concurrency=5",
        "--webperf-duration=1s",
        "--webperf-warmup=0.5s",
        "--webperf-repeat=1",
        "--webperf-placement=auto",
        "--webperf-json=out.json",
        "--webperf-html=out.html",
        timeout=180,
    )
    result.assert_outcomes(passed=1)
    out = result.stdout.str()

    # the terminal says which value came from where
    result.stdout.fnmatch_lines(
        ["*repeat=2 (from @pytest.mark.webperf, beats --webperf-repeat=1)*"]
    )

    facts = header_facts((pytester.path / "out.html").read_text())
    assert facts["users"] == "3", facts  # the marker's, not --webperf-concurrency=5
    assert facts["repetitions"] == "2", facts
    assert facts["duration s"] == "2.0", facts
    placement = facts["placement"]
    assert placement != "-" and placement in out, (placement, out[-2000:])

    (entry,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    for rep in entry["repetitions"]:
        assert {s["threads"] for s in rep["resources"] if s["t"] >= 0} == {1}
        assert rep["server_cores"] == 1.0, rep  # one thread: one core, not os.cpu_count()
        assert rep["capacity_rps"] == pytest.approx(1e6 / rep["cpu_per_req_us"], rel=1e-6)
