"""Faults: misbehaving servers, dying targets, interruptions and disk trouble, as a user
sees them through pytest. None of them may pass, hang, show a traceback or leave a
process, a container or a temporary directory behind."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.e2e.interrupt import take_sigint
from tests.e2e.options import SHORT

from pytest_webperf.models.workload import Workload
from pytest_webperf.swarm.runner import run_swarm
from pytest_webperf.swarm.spec import SwarmSpec
from pytest_webperf.targets.container import MANAGED, OWNER
from pytest_webperf.targets.engine import docker_client
from pytest_webperf.targets.process import ProcessTarget

pytest_plugins = ["pytester"]
SERVER = Path(__file__).with_name("fault_server.py")
QUICK = [
    *SHORT,
    "--webperf-repeat=1",
]
TEST = """
import sys

def test_fault(webperf):
    target = webperf.process([sys.executable, "fault_server.py", {mode!r}], name="fault-{mode}")
    webperf.http(target, path="/hello")
"""


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


def fault_servers(where: Path | None = None) -> list[int]:
    """Processes running fault_server.py started from a pytester directory (``where``:
    from that one alone; tests on the other core run their own)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
            cwd = (cmdline.parent / "cwd").resolve()
        except OSError:
            continue
        ours = where is None or cwd == where.resolve()
        if len(argv) > 1 and argv[1] == b"fault_server.py" and ours:
            pids.append(int(cmdline.parent.name))
    return pids


def run_fault(pytester: pytest.Pytester, mode: str, *options: str) -> pytest.RunResult:
    """TEST against fault_server.py MODE, with its own temporary directory (other runs
    on the machine come and go in the shared one)."""
    shutil.copy(SERVER, pytester.path / "fault_server.py")
    pytester.makepyfile(test_fault=TEST.format(mode=mode))
    tmp = pytester.path / "tmp"
    tmp.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(tmp))
        result = pytester.runpytest_subprocess(
            *QUICK, "--webperf-json=out.json", *options, timeout=90
        )
    assert "Traceback" not in result.stdout.str(), result.stdout.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert fault_servers(pytester.path) == []
    assert list(tmp.iterdir()) == []
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
    failure = f"[[]GET /hello on fault-{mode}[]] broken: * requests failed *{kind}: *"
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
            preexec_fn=take_sigint,  # noqa: PLW1509 (a signal disposition only)
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
    run = background(
        "ok",
        "--webperf-duration=30s",
        "--webperf-json=out.json",
        "--webperf-save",
        "--webperf-baseline-dir=base",
    )
    run.wait_for_load()
    run.process.send_signal(sig)
    output = run.finish()
    assert run.process.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "KeyboardInterrupt" in output
    assert run.left_behind() == {}, output
    assert list(run.tmp.iterdir()) == []  # no webperf-* directory or file of ours
    assert not list(pytester.path.rglob("*.tmp"))  # no half-written report or baseline
    for written in [pytester.path / "out.json", *pytester.path.glob("base/*/*.json")]:
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


def test_an_unwritable_baseline_dir_is_one_line_and_the_reports_are_still_written(
    pytester: pytest.Pytester,
) -> None:
    """Root ignores permission bits, so a file stands where the directory should be: the
    same OSError a read-only directory gives."""
    (pytester.path / "in-the-way").write_text("a file, not a directory\n")
    result = run_fault(
        pytester,
        "ok",
        "--webperf-save",
        "--webperf-baseline-dir=in-the-way",
        "--webperf-markdown=s.md",
    )
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["webperf: error saving baselines: cannot write the baseline *in-the-way*"]
    )
    assert (pytester.path / "in-the-way").read_text() == "a file, not a directory\n"
    assert json.loads((pytester.path / "out.json").read_text())["tests"]
    assert "GET /hello" in (pytester.path / "s.md").read_text()


def test_an_unwritable_report_path_is_one_line_naming_it(pytester: pytest.Pytester) -> None:
    (pytester.path / "in-the-way").write_text("a file\n")
    result = run_fault(
        pytester, "ok", "--webperf-html=in-the-way/r.html", "--webperf-markdown=new/dir/s.md"
    )
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["webperf: error writing the HTML report to in-the-way/r.html: *"])
    assert (pytester.path / "new" / "dir" / "s.md").exists()  # a missing directory is made
    assert json.loads((pytester.path / "out.json").read_text())["tests"]


def test_a_broken_run_is_not_saved_as_a_baseline_unless_asked(pytester: pytest.Pytester) -> None:
    result = run_fault(pytester, "500", "--webperf-save", "--webperf-baseline-dir=base")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "webperf: not saved as baselines: 1 measurement(s) that failed their absolute "
            "checks*test_fault.py::test_fault[[]c4[]] [[]GET /hello[]]*--webperf-save-failed*"
        ]
    )
    assert not list((pytester.path / "base").rglob("*.json"))
    result = run_fault(
        pytester, "500", "--webperf-save", "--webperf-save-failed", "--webperf-baseline-dir=base"
    )
    result.stdout.fnmatch_lines(["webperf: saved 1 baseline(s) in 1 file(s) under *"])
    assert len(list((pytester.path / "base").rglob("*.json"))) == 1


def test_target_url_says_it_does_not_apply_to_a_process_target(pytester: pytest.Pytester) -> None:
    result = run_fault(pytester, "ok", "--webperf-target-url=http://127.0.0.1:9")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "webperf: test_fault.py::test_fault[[]c4[]]: --webperf-target-url does not apply "
            "to webperf.process(...): it measured the command it started"
        ]
    )


def test_no_engine_says_how_to_get_one(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent")
    pytester.makepyfile(
        test_server="""
        def test_server(webperf):
            webperf.http(webperf.server("nginx"))
        """
    )
    result = pytester.runpytest_subprocess(*QUICK, timeout=120)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*EngineUnavailable: no Docker engine answers (*Start a Docker engine*"
            "*--webperf-target-url=http://127.0.0.1:PORT*"
        ]
    )
    assert "Traceback" not in result.stdout.str()


EXAMPLES = [
    ("500", "http_500", "HTTP/1.1 500 Internal Server Error"),
    ("garbage", "protocol", "not an HTTP/1.x status line: b'\\x00\\x01garbage, not HTTP at all'"),
    ("short-body", "closed", "connection closed after 10 of 100 body bytes"),
    ("bad-chunk", "protocol", "bad chunk size b'zz'"),
    ("silent", "timeout", "no answer within 1 s"),
]


@pytest.mark.parametrize("user", ["lean", "native"])
@pytest.mark.parametrize(("mode", "kind", "example"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_the_swarm_keeps_an_example_of_each_failure(
    mode: str, kind: str, example: str, user: str
) -> None:
    """What compare's broken message can show (RunResult.error_examples), from the child."""
    spec = SwarmSpec(
        host="",
        users=2,
        duration_s=1.5,
        warmup_s=0.2,
        timeout_s=1.0,
        user_class=user,
        workload=Workload(path="/hello"),
    )
    with ProcessTarget([sys.executable, str(SERVER), mode], name=mode) as target:
        outcome = run_swarm(dataclasses.replace(spec, host=target.url))
    assert outcome.total.error_kinds.get(kind, 0) > 0
    assert outcome.total.error_examples[kind] == example


NGINX = """
def test_nginx(webperf):
    webperf.http(webperf.server("nginx"), path="/hello")
"""


def containers_of(pid: int) -> list[str]:
    """Names of the containers ``pid`` started (sparse: other runs remove theirs as we list)."""
    found = docker_client().containers.list(all=True, filters={"label": MANAGED}, sparse=True)
    return [
        c.attrs["Names"][0].lstrip("/")
        for c in found
        if (c.attrs.get("Labels") or {}).get(OWNER, "").startswith(f"{pid}:")
    ]


def start_nginx_run(pytester: pytest.Pytester, duration: str) -> subprocess.Popen[str]:
    pytester.makepyfile(test_nginx=NGINX)
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", *QUICK, f"--webperf-duration={duration}"],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=take_sigint,  # noqa: PLW1509 (a signal disposition only)
    )


def wait_for_containers(pid: int, timeout: float = 120) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if names := containers_of(pid):
            time.sleep(3)  # healthy, and the swarm is running
            return names
        time.sleep(0.2)
    raise AssertionError(f"no container of pid {pid} within {timeout}s")


def test_sigterm_mid_run_removes_the_container(pytester: pytest.Pytester, engine: None) -> None:
    process = start_nginx_run(pytester, "30s")
    try:
        wait_for_containers(process.pid)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
        assert process.stdout is not None
        process.stdout.close()
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output
    assert containers_of(process.pid) == [], output


def test_the_next_run_sweeps_the_containers_of_a_killed_one(
    pytester: pytest.Pytester, engine: None
) -> None:
    process = start_nginx_run(pytester, "30s")
    try:
        names = wait_for_containers(process.pid)
    finally:
        process.kill()  # SIGKILL: no clean-up at all
        process.wait()
        assert process.stdout is not None
        process.stdout.close()
    assert containers_of(process.pid) == names  # left behind, until...
    result = pytester.runpytest_subprocess(*QUICK, timeout=120)  # the next run starts one
    result.assert_outcomes(passed=1)
    assert containers_of(process.pid) == []
