"""Faults: misbehaving servers, dying targets, interruptions and disk trouble, as a user
sees them through pytest. None of them may pass, hang, show a traceback or leave a
process, a container or a temporary directory behind."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
SERVER = Path(__file__).with_name("fault_server.py")
QUICK = [
    "-p",
    "no:locust",
    "-W",
    "error",
    "--webperf-concurrency=4",
    "--webperf-duration=1s",
    "--webperf-warmup=0.5s",
    "--webperf-repeat=1",
]
TEST = """
import sys

def test_fault(webperf):
    target = webperf.process([sys.executable, "fault_server.py", {mode!r}], name="fault-{mode}")
    webperf.http(target, path="/hello")
"""


def webperf_dirs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("webperf-*")}


def children_of(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def fault_servers() -> list[int]:
    """Processes running fault_server.py started from a pytester directory."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if len(argv) > 1 and argv[1] == b"fault_server.py":
            pids.append(int(cmdline.parent.name))
    return pids


def run_fault(pytester: pytest.Pytester, mode: str, *options: str) -> pytest.RunResult:
    shutil.copy(SERVER, pytester.path / "fault_server.py")
    pytester.makepyfile(test_fault=TEST.format(mode=mode))
    before = webperf_dirs()
    result = pytester.runpytest_subprocess(*QUICK, "--webperf-json=out.json", *options, timeout=90)
    assert "Traceback" not in result.stdout.str(), result.stdout.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert fault_servers() == []
    assert webperf_dirs() <= before
    return result


# mode, extra options, the error kind the failure line names
MISBEHAVING = [
    ("500", (), "http_500"),
    ("garbage", (), "protocol"),
    ("short-body", (), "closed"),
    ("bad-chunk", (), "protocol"),
    ("silent", ("--webperf-timeout=1s",), "timeout"),
    ("slow-accept", ("--webperf-timeout=1s",), "timeout"),
]


@pytest.mark.parametrize(("mode", "options", "kind"), MISBEHAVING, ids=[m[0] for m in MISBEHAVING])
def test_a_misbehaving_server_fails_its_test(
    pytester: pytest.Pytester, mode: str, options: tuple[str, ...], kind: str
) -> None:
    result = run_fault(pytester, mode, *options)
    result.assert_outcomes(failed=1)
    failure = f"[[]GET /hello[]] broken: * requests failed *{kind}: *"
    result.stdout.fnmatch_lines(["webperf regression:", failure])
    result.stdout.fnmatch_lines([f"test_fault[[]c4[]] * GET /hello * fault-{mode} * broken"])
    (test,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert test["verdict"]["status"] == "broken"


def test_the_well_behaved_control_passes(pytester: pytest.Pytester) -> None:
    result = run_fault(pytester, "ok")
    result.assert_outcomes(passed=1)


def test_a_huge_body_is_measured_not_buffered(pytester: pytest.Pytester) -> None:
    """50 MB per response: slow, not broken; the generator discards the body."""
    result = run_fault(pytester, "huge", "--webperf-timeout=5s")
    (test,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    (run,) = test["repetitions"]
    if run["errors"] == 0:
        result.assert_outcomes(passed=1)
        assert run["bytes"] >= 50 * 1024 * 1024
    else:  # a busy machine: 5 s per 50 MB was not enough, and that fails
        result.assert_outcomes(failed=1)


def test_a_server_that_exits_mid_run_fails_with_its_exit_code(pytester: pytest.Pytester) -> None:
    result = run_fault(pytester, "exit", "--webperf-duration=2s", "--webperf-repeat=2")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*TargetDied*fault-exit is not running (exit code 3)*"])
