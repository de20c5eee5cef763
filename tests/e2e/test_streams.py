"""WebSocket and server-sent events through pytest, against the asyncio stream server
(``streams_server.py``, started with ``webperf.process``): an echo at 0 errors with its
round trips reported; a server closing with 1011 fails, the code named, one message lost
per close; a relay dropping every 50th message fails with the loss counted exactly;
2,000 idle connections held, the server's memory per connection reported (the full
10,000 are the suite's and the docs' figure: CI's time is short); answers of the
server's own matched in turn (``correlate="order"``) and checked (``expect=``); both
protocols over TLS, the certificate verified; an SSE server whose first event comes
200 ms later fails ``ttfe_p95`` against its base (A/B).

All but the last share one pytest run (one test each), read back from its terminal and
its JSON report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.gitrepo import commit_base, git
from tests.e2e.options import SHORT
from tests.e2e.shared import once
from tests.e2e.streams_server import streams_server
from tests.e2e.tls_certs import make_ca, make_server_cert

from pytest_webperf.swarm import streamloop

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(streamloop.unavailable() is not None, reason="stream loop not built"),
]
IDLE = 2000  # idle connections held here; 10,000 in the suite (suites/test_streams.py)
TESTS = """
import sys

import pytest

SERVER = [sys.executable, "server.py"]
CERTS = {{"TLS_CERT": "server.pem", "TLS_KEY": "server.key"}}
CA = "ca.pem"


def test_echo(webperf):
    target = webperf.process(SERVER, name="streams")
    result = webperf.websocket(target, "/ws", message=b"hello", concurrency=4)
    assert result.errors == 0


def test_close_1011(webperf):
    target = webperf.process(SERVER, name="streams")
    webperf.websocket(target, "/ws?close=1011&after=10", concurrency=4)


def test_relay_drops(webperf):
    target = webperf.process(SERVER, name="streams")
    webperf.websocket(
        target,
        "/relay",
        subscribe_path="/relay?role=sub&drop=50",
        publish_path="/relay?role=pub",
        message=b"tick",
        interval="20ms",
        subscribers=10,
        publishers=2,
    )


def test_idle(webperf):
    target = webperf.process(SERVER, name="streams")
    result = webperf.websocket(target, "/ws", message=None, concurrency={idle}, ping="1s")
    assert result.errors == 0


@pytest.mark.webperf(workers=2)
def test_fan_out_across_workers(webperf):
    target = webperf.process(SERVER, name="streams")
    result = webperf.websocket(
        target,
        "/relay",
        subscribe_path="/relay?role=sub",
        publish_path="/relay?role=pub",
        message=b"tick",
        interval="20ms",
        subscribers=10,
        publishers=3,
    )
    assert result.errors == 0


def test_events_resume(webperf):
    target = webperf.process(SERVER, name="streams")
    result = webperf.sse(target, "/events?rate=100", concurrency=4, reconnect_every=5)
    assert result.errors == 0


def test_answers_in_turn(webperf):
    target = webperf.process(SERVER, name="streams")
    result = webperf.websocket(
        target, "/ws?answer=ack", concurrency=4, correlate="order", expect="ack", interval="5ms"
    )
    assert result.errors == 0


def test_over_tls(webperf):
    target = webperf.process(SERVER, name="streams", tls=True, env=CERTS)
    result = webperf.websocket(target, "/ws", concurrency=4, tls_ca=CA)
    assert result.errors == 0
    events = webperf.sse(target, "/events?rate=50", concurrency=4, tls_ca=CA)
    assert events.errors == 0
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[pytest.LineMatcher, dict[str, Any]]:
    """The inner tests, run once per session (all workers): their terminal output, and
    their JSON report by name."""
    work = once(tmp_path_factory, "streams", run_inner_tests)
    lines = pytest.LineMatcher((work / "output.txt").read_text().splitlines())
    tests = json.loads((work / "report.json").read_text())["tests"]
    found: dict[str, Any] = {}
    for entry in tests:  # by test, and by test/measurement for a test with several
        test = entry["nodeid"].split("::")[1].split("[")[0]
        found.setdefault(test, entry)
        found[f"{test}/{entry['name']}"] = entry
    return lines, found


def run_inner_tests(work: Path) -> None:
    (work / "server.py").write_text(streams_server())
    (work / "test_streams.py").write_text(TESTS.format(idle=IDLE))
    ca = make_ca(work, "ca")
    make_server_cert(work, ca, "server")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *SHORT,
            "--webperf-duration=2s",
            "--webperf-repeat=1",
            f"--webperf-json={work / 'report.json'}",
            "-p",
            "no:cacheprovider",
            "-rA",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    (work / "output.txt").write_text(done.stdout + done.stderr)


def stream(entry: dict[str, Any]) -> dict[str, Any]:
    (repetition,) = entry["repetitions"]
    return dict(repetition["stream"])


def test_an_echo_server_answers_every_message_and_its_round_trips_are_reported(
    run: tuple[pytest.LineMatcher, dict[str, Any]],
) -> None:
    lines, tests = run
    lines.fnmatch_lines(["PASSED test_streams.py::test_echo*"])
    echo = tests["test_echo"]
    (repetition,) = echo["repetitions"]
    assert repetition["errors"] == 0 and repetition["requests"] > 100
    assert 0 < repetition["p50_ms"] <= repetition["p99_ms"]  # each message's round trip
    figures = stream(echo)
    assert figures["lost"] == figures["duplicates"] == figures["abnormal"] == 0
    assert figures["delivered"] == figures["expected"] == figures["sent"] > 0
    assert figures["open_at_end"] == 4 and figures["upgrade"]["p50_ms"] > 0


def test_a_server_that_closes_with_1011_fails_naming_the_code(
    run: tuple[pytest.LineMatcher, dict[str, Any]],
) -> None:
    lines, tests = run
    lines.fnmatch_lines(
        [
            "*[[]WS echo /ws?close=1011&after=10 on streams[]]*ws_close_1011: *",
            "FAILED test_streams.py::test_close_1011*",
        ]
    )
    entry = tests["test_close_1011"]
    assert entry["verdict"]["status"] == "regression"
    figures = stream(entry)
    # a closed loop sends its next message on the 10th echo, before the close arrives:
    # one message lost per close; but a connection whose 10th echo came after the end of
    # the sending sent none, and its close loses nothing (at most one per connection)
    assert figures["abnormal"] > 0
    assert figures["lost"] <= figures["abnormal"] <= figures["lost"] + 4
    (repetition,) = entry["repetitions"]
    assert repetition["error_kinds"]["ws_close_1011"] > 0
    assert "internal error" in repetition["error_examples"]["ws_close_1011"]


def test_a_relay_dropping_every_50th_message_fails_with_the_loss_counted_exactly(
    run: tuple[pytest.LineMatcher, dict[str, Any]],
) -> None:
    lines, tests = run
    lines.fnmatch_lines(
        [
            "*[[]WS fan-out /relay?role=sub&drop=50 on streams[]] ws_lost * breaks the limit*",
            "FAILED test_streams.py::test_relay_drops*",
        ]
    )
    figures = stream(tests["test_relay_drops"])
    assert figures["subscribers"] == 10 and figures["published"] > 50
    # every subscriber heard every message the relay had, less each 50th
    assert figures["lost"] == 10 * (figures["published"] // 50)
    assert figures["expected"] == 10 * figures["published"]
    assert figures["duplicates"] == 0


def test_idle_connections_are_held_and_their_memory_reported(
    run: tuple[pytest.LineMatcher, dict[str, Any]],
) -> None:
    lines, tests = run
    lines.fnmatch_lines(["PASSED test_streams.py::test_idle*"])
    figures = stream(tests["test_idle"])
    assert figures["open_at_end"] == figures["open_peak"] == IDLE
    assert figures["abnormal"] == 0
    assert figures["mem_per_conn"] > 0  # the server's bytes per open connection
    assert figures["server_rss_open_mb"] > figures["server_rss_before_mb"]
    assert figures["gen_mem_per_conn"] > 0


def test_a_fan_out_across_generator_processes_accounts_every_copy(
    run: tuple[pytest.LineMatcher, dict[str, Any]],
) -> None:
    lines, tests = run
    lines.fnmatch_lines(["PASSED test_streams.py::test_fan_out_across_workers*"])
    entry = tests["test_fan_out_across_workers"]
    (repetition,) = entry["repetitions"]
    roles = {p["role"] for p in repetition["generator_processes"]}
    assert roles == {"master", "worker0", "worker1"}
    figures = stream(entry)
    # the publishers waited for every subscriber of both workers: every copy owed arrived
    assert figures["subscribers"] == 10 and figures["published"] > 0
    assert figures["delivered"] == figures["expected"] == 10 * figures["published"]


def test_sse_streams_resume_after_last_event_id_with_nothing_lost(
    run: tuple[pytest.LineMatcher, dict[str, Any]],
) -> None:
    lines, tests = run
    lines.fnmatch_lines(["PASSED test_streams.py::test_events_resume*"])
    figures = stream(tests["test_events_resume"])
    assert figures["reconnects"] >= 4 * 5  # every 5 events, each stream, for seconds
    assert figures["lost"] == figures["duplicates"] == 0  # the ids run on across them
    assert figures["delivered"] == figures["expected"] > 100
    assert figures["ttfe"]["p50_ms"] > 0 and figures["events_per_s_min"] > 0


def test_answers_are_matched_in_turn_and_checked(
    run: tuple[pytest.LineMatcher, dict[str, Any]],
) -> None:
    lines, tests = run
    lines.fnmatch_lines(["PASSED test_streams.py::test_answers_in_turn*"])
    figures = stream(tests["test_answers_in_turn"])
    assert figures["delivered"] == figures["expected"] > 0 and figures["lost"] == 0


def test_both_protocols_speak_tls_with_the_certificate_verified(
    run: tuple[pytest.LineMatcher, dict[str, Any]],
) -> None:
    lines, tests = run
    lines.fnmatch_lines(["PASSED test_streams.py::test_over_tls*"])
    for name in ("WS echo /ws", "SSE /events?rate=50"):
        figures = stream(tests[f"test_over_tls/{name}"])
        assert figures["tls"] is True and figures["upgrade"]["p50_ms"] > 0
        assert figures["delivered"] == figures["expected"] > 0


SSE_TEST = """
import sys


def test_events(webperf):
    target = webperf.process([sys.executable, "server.py"], name="events")
    webperf.sse(target, "/events?rate=50", concurrency=8, reconnect_every=5)
"""


def test_an_sse_server_whose_first_event_comes_200ms_later_fails_ttfe_in_ab(
    pytester: pytest.Pytester,
) -> None:
    (pytester.path / "server.py").write_text(streams_server(first_delay_ms=0))
    pytester.makepyfile(test_events=SSE_TEST)
    repo = commit_base(pytester.path)
    (repo / "server.py").write_text(streams_server(first_delay_ms=200))
    git(repo, "commit", "-q", "-am", "the first event 200 ms later")
    result = pytester.runpytest_subprocess(
        *SHORT,
        "--webperf-duration=1.5s",
        "--webperf-repeat=3",
        "--webperf-against=HEAD~1",
        "--webperf-against-budget=40s",
        "--webperf-profile=off",
        f"--webperf-json={repo / 'ab.json'}",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*[[]SSE /events?rate=50 on events[]]*ttfe_p95 * -> * beyond*"])
    (entry,) = json.loads(Path(repo / "ab.json").read_text())["tests"]
    assert entry["verdict"]["status"] == "regression"
    change = next(c for c in entry["verdict"]["checks"] if c["metric"] == "ttfe_p95")
    assert change["outcome"] == "fail"
    assert change["current"] >= 200  # side B: the first event at least 200 ms after connect
    assert change["baseline"] < 100  # side A: at once
