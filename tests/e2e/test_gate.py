"""The regression gate end to end: save, compare, fail, through pytest in a subprocess.

The target is ``tests/servers/costly``, whose CPU cost per request is set per run
(``COST_US``, deterministic work, never a sleep): a "slower release" is the same
server told to do more work per request, so the gate must see it in ``cpu_per_req``
whatever else the machine is doing. Throughput on these 2 shared cores moves with
the other processes' load, so tests that need a quiet verdict ("unchanged passes",
"faster is a note") gate on ``cpu_per_req`` alone; the slowed server is judged with
the default checks, as a user's run is.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.interrupt import take_sigint
from tests.e2e.options import assert_not_failed

from pytest_webperf.gate.baseline import HISTORY_LIMIT, SCHEMA, file_name

pytest_plugins = ["pytester"]

SERVERS = Path(__file__).resolve().parents[1] / "servers"
MACHINE = "gate-e2e"
NODEID = "test_target.py::test_work[c4]"
NAME = "GET /work"
COST_US = 400  # the baseline's cost; x2 is a regression no noise can hide
COST_ENV = "COSTLY_COST_US"
RUN = [
    "-p",
    "no:locust",
    "-W",
    "error",
    f"--webperf-servers={SERVERS}",
    "--webperf-concurrency=4",
    "--webperf-duration=1s",
    "--webperf-warmup=0.5s",
    "--webperf-repeat=3",
    f"--webperf-machine-id={MACHINE}",
]
QUIET_CHECKS = "--webperf-compare-fail=cpu_per_req:5%,errors:50%"

TARGET = f"""
import os


def test_work(webperf):
    target = webperf.server("costly", env={{"COST_US": os.environ["{COST_ENV}"]}})
    webperf.http(target, path="/work")
"""


def baseline_path(base: Path, nodeid: str = NODEID) -> Path:
    return base / MACHINE / file_name(nodeid)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def verdict(report: Path) -> Any:
    tests = read_json(report)["tests"]
    assert len(tests) == 1, tests
    return tests[0]["verdict"]


@pytest.fixture(scope="module")
def saved_baseline(tmp_path_factory: pytest.TempPathFactory, engine: None) -> Path:
    """One baseline at COST_US, saved once through pytest and copied by the tests."""
    work = tmp_path_factory.mktemp("gate-baseline")
    (work / "test_target.py").write_text(TARGET)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *RUN,
            f"--webperf-baseline-dir={work / 'bl'}",
            "--webperf-save",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, COST_ENV: str(COST_US)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return work / "bl"


@pytest.fixture
def gate(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A pytester dir holding the target test; yields its baseline dir (empty)."""
    pytester.makepyfile(test_target=TARGET)
    monkeypatch.setenv(COST_ENV, str(COST_US))
    yield pytester.path / "bl"


def run_gate(pytester: pytest.Pytester, *args: str, cost: int = COST_US) -> pytest.RunResult:
    os.environ[COST_ENV] = str(cost)  # restored by the gate fixture's monkeypatch
    return pytester.runpytest_subprocess(
        *RUN, f"--webperf-baseline-dir={pytester.path / 'bl'}", *args
    )


def test_no_baseline_passes_save_writes_one_and_history_is_kept(
    pytester: pytest.Pytester, gate: Path, engine: None
) -> None:
    first = run_gate(pytester, "--webperf-json=first.json")
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(
        ["*test_work[[]c4[]] [[]GET /work[]]: no baseline (run with --webperf-save)*"]
    )
    assert verdict(pytester.path / "first.json")["status"] == "no-baseline"
    assert not gate.exists(), "a run without --webperf-save wrote a baseline"

    saved = run_gate(pytester, "--webperf-save")  # no baseline yet: nothing to compare
    saved.assert_outcomes(passed=1)
    path = baseline_path(gate)
    saved.stdout.fnmatch_lines(
        [f"webperf: saved 1 baseline(s) in 1 file(s) under {gate / MACHINE}"]
    )
    assert sorted(p.name for p in (gate / MACHINE).iterdir()) == [path.name]
    data = read_json(path)
    assert (data["schema"], data["nodeid"], data["machine_id"]) == (SCHEMA, NODEID, MACHINE)
    record = data["measurements"][NAME]
    runs = record["latest"]["measurement"]["runs"]
    assert len(runs) == 3 and all(r["requests"] > 0 for r in runs)
    assert any(r["cpu_per_req_us"] for r in runs), "the cgroup CPU was never read"
    assert record["latest"]["measurement"]["verdict"] is None  # a baseline has no verdict
    assert len(record["history"]) == 1

    again = run_gate(pytester, "--webperf-save", QUIET_CHECKS)
    assert_not_failed(again, 1)  # compared with the first save: maybe too noisy to check
    second = read_json(path)["measurements"][NAME]
    assert len(second["history"]) == 2 <= HISTORY_LIMIT
    assert second["history"][0] == record["history"][0]  # appended, never rewritten
    latest = second["latest"]["measurement"]["runs"]
    assert latest != runs  # latest replaced by the second save, which history describes
    assert second["history"][-1]["summary"]["rps"] == [r["rps"] for r in latest]


def test_an_unchanged_server_compares_and_passes(
    pytester: pytest.Pytester, gate: Path, saved_baseline: Path
) -> None:
    shutil.copytree(saved_baseline, gate)
    result = run_gate(pytester, QUIET_CHECKS, "--webperf-json=out.json")
    assert_not_failed(result, 1)
    assert result.ret == pytest.ExitCode.OK
    # 3 x 1 s on a shared machine: a pass, or undecided when it could not have seen 5 %
    result.stdout.fnmatch_lines(["*test_work[[]c4[]] * GET /work * costly * 4 * [pu][an]*"])
    judged = verdict(pytester.path / "out.json")
    assert judged["status"] in ("pass", "undecided"), judged
    cpu = next(c for c in judged["checks"] if c["metric"] == "cpu_per_req")
    assert cpu["outcome"] in ("pass", "undecided") and cpu["detectable"] > 0
    if cpu["outcome"] == "undecided":
        assert "too noisy to judge 5%" in " ".join(judged["notes"])
    assert "no baseline" not in result.stdout.str()


def test_a_slower_server_fails_with_one_line_per_failed_check(
    pytester: pytest.Pytester, gate: Path, saved_baseline: Path
) -> None:
    shutil.copytree(saved_baseline, gate)
    result = run_gate(pytester, "--webperf-json=out.json", cost=2 * COST_US)  # default checks
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*webperf regression:",
            "*[[]GET /work on *[]] cpu_per_req * -> * (+*%, 95% CI +*%..+*%*) beyond +5%",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    judged = verdict(pytester.path / "out.json")
    assert judged["status"] == "regression"
    assert any(r.startswith("cpu_per_req ") for r in judged["reasons"]), judged
    assert all(" beyond " in r for r in judged["reasons"]), judged  # one line per check


def test_a_faster_server_is_a_note_never_a_failure(
    pytester: pytest.Pytester, gate: Path, saved_baseline: Path
) -> None:
    shutil.copytree(saved_baseline, gate)
    result = run_gate(pytester, QUIET_CHECKS, "--webperf-json=out.json", cost=COST_US // 2)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*cpu_per_req * -> * better than the baseline by more than 5%"])
    judged = verdict(pytester.path / "out.json")
    assert judged["status"] == "pass" and not judged["reasons"], judged
    assert any("better than the baseline" in n for n in judged["notes"]), judged


def test_a_corrupt_baseline_fails_that_test_only_and_save_replaces_it(
    pytester: pytest.Pytester, gate: Path, engine: None
) -> None:
    pytester.makepyfile(
        test_other="""
        def test_hello(webperf):
            webperf.http(webperf.server("costly"), path="/hello", repeat=1)
    """
    )
    path = baseline_path(gate)
    path.parent.mkdir(parents=True)
    path.write_text('{"schema": 1, "measurements": {"GET /work": [')  # cut short
    result = run_gate(pytester)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            f"*BaselineError: baseline file {path} cannot be read (*); delete it, or re-run "
            "with --webperf-save to record a new baseline",
        ]
    )
    assert "Traceback" not in result.stdout.str()

    fixed = run_gate(pytester, "--webperf-save", str(pytester.path / "test_target.py"))
    fixed.assert_outcomes(passed=1)
    assert read_json(path)["measurements"][NAME]["latest"]["measurement"]["runs"]
    kept = [p.name for p in path.parent.iterdir() if ".corrupt-" in p.name]
    assert len(kept) == 1, "the unreadable file is kept beside the new one"


# The conftest pauses the real atomic write of the baseline at one of its fsyncs (the
# temp file's, before the rename; the directory's, after it) and tells the test, which
# then sends a real SIGINT: whatever the moment, the file must be the old one or the new
# one, whole.
PAUSE_CONFTEST = """
import os
import time
from pathlib import Path

from pytest_webperf.gate import baseline

PAUSE_AT = int(os.environ.get("GATE_PAUSE_AT_FSYNC", "0"))
_real_write, _real_fsync = baseline.write_text_atomic, os.fsync
_saving = {"calls": 0, "on": False}


def _paused_fsync(fd):
    if _saving["on"]:
        _saving["calls"] += 1
        if _saving["calls"] == PAUSE_AT:
            Path("paused").write_text(str(os.getpid()))
            time.sleep(60)  # the test interrupts us here
    return _real_fsync(fd)


def _write(path, text, *args, **kwargs):
    _saving["on"] = True
    try:
        return _real_write(path, text, *args, **kwargs)
    finally:
        _saving["on"] = False


if PAUSE_AT:
    baseline.write_text_atomic = _write
    os.fsync = _paused_fsync
"""


def save_interrupted(pytester: pytest.Pytester, pause_at: int) -> str:
    """A --webperf-save run interrupted (SIGINT) while paused at fsync number ``pause_at``."""
    marker = pytester.path / "paused"
    marker.unlink(missing_ok=True)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            *RUN,
            "--webperf-repeat=1",
            f"--webperf-baseline-dir={pytester.path / 'bl'}",
            "--webperf-save",
        ],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "GATE_PAUSE_AT_FSYNC": str(pause_at)},
        preexec_fn=take_sigint,  # noqa: PLW1509 (a signal disposition only)
    )
    try:
        deadline = time.monotonic() + 180
        while not marker.exists():
            assert process.poll() is None, process.communicate()[0]
            assert time.monotonic() < deadline, "the save never reached the pause"
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode != 0, output
    return output


@pytest.mark.parametrize("pause_at", [1, 2], ids=["before-rename", "after-rename"])
def test_ctrl_c_during_save_leaves_the_old_or_the_new_baseline_whole(
    pytester: pytest.Pytester, gate: Path, engine: None, pause_at: int
) -> None:
    pytester.makeconftest(PAUSE_CONFTEST)
    run_gate(pytester, "--webperf-save", "--webperf-repeat=1").assert_outcomes(passed=1)
    path = baseline_path(gate)
    old = path.read_bytes()

    output = save_interrupted(pytester, pause_at)

    assert "KeyboardInterrupt" in output, output
    assert [p.name for p in path.parent.iterdir()] == [path.name], "a temp file was left"
    data = read_json(path)
    history = data["measurements"][NAME]["history"]
    if pause_at == 1:  # interrupted before the rename: the old file, byte for byte
        assert path.read_bytes() == old
        assert len(history) == 1
    else:  # after the rename: the new file, whole
        assert path.read_bytes() != old
        assert len(history) == 2
        assert data["measurements"][NAME]["latest"]["measurement"]["runs"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("rps:5", "*check 'rps:5' needs a unit: write rps:5% *"),
        ("p95:-10%", "*check 'p95:-10%' points the wrong way: p95 is worse when it rises*"),
        ("speed:5%", "*unknown metric 'speed'*"),
    ],
)
def test_a_bad_compare_fail_spec_is_a_usage_error(
    pytester: pytest.Pytester, spec: str, message: str
) -> None:
    pytester.makepyfile(test_target=TARGET)
    result = pytester.runpytest_subprocess("-p", "no:locust", f"--webperf-compare-fail={spec}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


def test_an_absolute_limit_in_a_marker_fails_without_a_baseline(
    pytester: pytest.Pytester, gate: Path, engine: None
) -> None:
    pytester.makepyfile(
        test_target=f"""
        import os

        import pytest


        @pytest.mark.webperf(compare_fail="p99_ms<0.001", repeat=1)
        def test_work(webperf):
            target = webperf.server("costly", env={{"COST_US": os.environ["{COST_ENV}"]}})
            webperf.http(target, path="/work")
    """
    )
    result = run_gate(pytester, "--webperf-json=out.json")
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*webperf regression:",
            "*[[]GET /work on *[]] p99_ms *ms breaks the limit p99_ms<0.001",
        ]
    )
    failure = result.stdout.str().split("webperf regression:")[1].split("= webperf =")[0]
    assert "no baseline" not in failure  # advice, said in the summary only
    judged = verdict(pytester.path / "out.json")
    assert judged["status"] == "regression", judged
