"""Faults: misbehaving servers, dying targets, interruptions and disk trouble, as a user
sees them through pytest. None of them may pass, hang, show a traceback or leave a
process, a container or a temporary directory behind."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
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


def descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        for child in children_of(todo.pop()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pids: set[int]) -> dict[int, str]:
    """The ones still running, with their command (zombies are dead: only a reap is
    missing)."""
    running = {}
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            running[pid] = command.decode(errors="replace")
    return running


class Background:
    """A pytest run of TEST in a subprocess, with its own temporary directory."""

    def __init__(self, pytester: pytest.Pytester, mode: str, *options: str) -> None:
        shutil.copy(SERVER, pytester.path / "fault_server.py")
        pytester.makepyfile(test_fault=TEST.format(mode=mode))
        self.tmp = pytester.path / "tmp"
        self.tmp.mkdir()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pytest", *QUICK, *options],
            cwd=pytester.path,
            env={**os.environ, "TMPDIR": str(self.tmp)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.seen: set[int] = set()

    def wait_for_load(self, timeout: float = 60) -> int:
        """Once the swarm runs: the fault server's pid."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.seen |= descendants(self.process.pid)
            servers = [p for p in fault_servers() if p in self.seen or self._ours(p)]
            if servers and len(self.seen) >= 2:
                time.sleep(2)  # the swarm is measuring now
                self.seen |= descendants(self.process.pid) | descendants(servers[0])
                return servers[0]
            time.sleep(0.2)
        raise AssertionError(f"no load within {timeout}s")

    def _ours(self, pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/cwd").resolve() == self.tmp.parent
        except OSError:
            return False

    def finish(self, timeout: float = 60) -> str:
        output, _ = self.process.communicate(timeout=timeout)
        return output

    def left_behind(self) -> dict[int, str]:
        time.sleep(0.5)  # a child that exits on its own, after its parent
        return alive(self.seen)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for pid in alive(self.seen):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def background(pytester: pytest.Pytester) -> Iterator[Callable[..., Background]]:
    started: list[Background] = []

    def start(mode: str, *options: str) -> Background:
        started.append(Background(pytester, mode, *options))
        return started[-1]

    yield start
    for run in started:
        run.close()


def test_a_target_killed_from_outside_says_by_which_signal(
    background: Callable[..., Background],
) -> None:
    run = background("ok", "--webperf-duration=8s")
    os.kill(run.wait_for_load(), signal.SIGKILL)
    output = run.finish()
    assert run.process.returncode == pytest.ExitCode.TESTS_FAILED, output
    assert "TargetDied: fault-ok died during the measurement" in output, output
    assert "fault-ok is not running (killed by SIGKILL)" in output, output
    assert "Traceback" not in output
    assert run.left_behind() == {}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_run_leaves_nothing_behind(
    background: Callable[..., Background], pytester: pytest.Pytester, sig: signal.Signals
) -> None:
    run = background("ok", "--webperf-duration=30s", "--webperf-json=out.json")
    run.wait_for_load()
    run.process.send_signal(sig)
    output = run.finish()
    assert run.process.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "KeyboardInterrupt" in output
    assert run.left_behind() == {}, output
    assert list(run.tmp.iterdir()) == []  # no webperf-* directory or file of ours
    written = pytester.path / "out.json"
    assert [p.name for p in pytester.path.glob(".out.json*")] == []  # no half-written file
    if written.exists():
        json.loads(written.read_text())


def test_a_killed_pytest_takes_its_process_target_and_swarm_along(
    background: Callable[..., Background],
) -> None:
    run = background("ok", "--webperf-duration=30s")
    run.wait_for_load()
    run.process.kill()
    run.finish()
    deadline = time.monotonic() + 10  # the swarm notices at its next interval
    while run.left_behind() and time.monotonic() < deadline:
        pass
    assert run.left_behind() == {}
