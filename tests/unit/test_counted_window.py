"""The pieces of a counted window: callgrind's command line, the vgdb monitor (its listing
read, a failure and a hang named with the fix, dumps waited for whole), the system call
counters' outputs read, the threads' context switches stamped, a target that cannot be
counted refused in one line, and a repetition per instance (N's size:
test_counted_sizing.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_webperf.errors import TargetError
from pytest_webperf.measurement.count import refusal
from pytest_webperf.measurement.count.window import at_rest
from pytest_webperf.models.workload import Request
from pytest_webperf.profiling.valgrind import Callgrind, Monitor
from pytest_webperf.sampling.syscalls import (
    SyscallCounter,
    counter_problem,
    perf_count,
    strace_total,
)
from pytest_webperf.sampling.tree import switches_between
from pytest_webperf.swarm.stamp import CpuProbe, read_switches, stamp
from pytest_webperf.targets.client import warm
from pytest_webperf.targets.external import ExternalTarget
from pytest_webperf.targets.process import ProcessTarget
from pytest_webperf.targets.runtime import JVM_REFUSED


def test_callgrinds_command_line() -> None:
    argv = Callgrind(smc_check="all-non-file", callers=40).argv("/w")
    assert argv[:4] == [
        "valgrind",
        "--tool=callgrind",
        "--trace-children=yes",
        "--instr-atstart=no",
    ]
    assert "--callgrind-out-file=/w/callgrind.out.%p" in argv
    assert "--vgdb-prefix=/w/vgdb" in argv and "--vgdb=yes" in argv
    assert argv[-2:] == ["--smc-check=all-non-file", "--separate-callers=40"]
    assert not any("collect-systime" in a or "separate-threads" in a for a in argv)
    assert "--separate-callers=40" in Callgrind(callers=40).describe("valgrind-3.19.0")


class FakeVgdb:
    """vgdb as a target would run it: a listing, commands answered (or not), and a dump
    file written per ``dump``."""

    def __init__(self, directory: Path, pids: Sequence[int], *, hang: bool = False) -> None:
        self.directory, self.pids, self.hang = directory, list(pids), hang
        self.sent: list[tuple[int, str]] = []
        self.dumps: dict[int, int] = {}

    def __call__(self, argv: Sequence[str], timeout: float) -> tuple[int, str]:
        assert argv[0] == "vgdb" and argv[1].startswith("--vgdb-prefix=")
        if argv[2] == "-l":
            lines = [f"use --pid={p} for valgrind --tool=callgrind ./server" for p in self.pids]
            return 1, "\n".join(lines)
        pid, command = int(argv[2].removeprefix("--pid=")), argv[3]
        if self.hang:
            raise TimeoutError("vgdb")
        if pid not in self.pids:
            return 1, f"vgdb error: no FIFO found matching pid {pid}"
        self.sent.append((pid, command))
        if command == "dump":
            self.dumps[pid] = self.dumps.get(pid, 0) + 1
            path = self.directory / f"callgrind.out.{pid}.{self.dumps[pid]}"
            threading.Timer(0.1, path.write_text, ["events: Ir\nfn=a\n1 5\ntotals: 5\n"]).start()
        return 0, f"sending command {command} to pid {pid}"


def test_the_monitor_lists_zeroes_and_waits_for_whole_dumps(tmp_path: Path) -> None:
    vgdb = FakeVgdb(tmp_path, [41, 42])
    monitor = Monitor(tmp_path, "/seen", vgdb, "server")
    assert monitor.pids() == [41, 42]
    monitor.every([41, 42], "zero")
    (tmp_path / "callgrind.out.41").write_text("")  # the exit dump: never a window's
    dumps = monitor.dump([41, 42])
    assert [p.name for p in dumps] == ["callgrind.out.41.1", "callgrind.out.42.1"]
    assert vgdb.sent == [(41, "zero"), (42, "zero"), (41, "dump"), (42, "dump")]


def test_a_vgdb_failure_and_a_hang_are_named_with_the_fix(tmp_path: Path) -> None:
    monitor = Monitor(tmp_path, "/seen", FakeVgdb(tmp_path, [41]), "server")
    with pytest.raises(TargetError, match="vgdb zero to process 7 failed: vgdb error: no FIFO"):
        monitor.command(7, "zero")
    hung = Monitor(tmp_path, "/seen", FakeVgdb(tmp_path, [41], hang=True), "nginx")
    with pytest.raises(TargetError, match=r"did not answer .* \[count\] table"):
        hung.command(41, "zero")


PERF = "# started on Wed\n\n3007,,raw_syscalls:sys_enter,1004,100.00,,\n"
STRACE = """\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 55.00    0.001100           1      1000           write
 45.00    0.000900           0      2007        12 read
------ ----------- ----------- --------- --------- ----------------
100.00    0.002000           0      3007        12 total
"""


def test_the_counters_outputs_are_read() -> None:
    assert perf_count(PERF) == 3007
    assert perf_count("<not counted>,,raw_syscalls:sys_enter,0,100.00,,\n") == 0
    assert perf_count("nothing here") is None
    assert strace_total(STRACE) == 3007
    assert strace_total(STRACE.replace("        12 total", "           total")) == 3007
    assert strace_total("") is None


@pytest.mark.skipif(counter_problem() is not None, reason="no system call counter here")
def test_a_process_system_calls_are_counted() -> None:
    code = (
        "import os, sys, time\nsys.stdin.readline()\n"
        "for _ in range(500): os.getppid()\ntime.sleep(30)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
    try:
        time.sleep(0.5)  # past its start-up
        with SyscallCounter([child.pid]) as counter:
            assert child.stdin is not None
            child.stdin.write(b"go\n")
            child.stdin.flush()
            time.sleep(1.0)
        found = counter.result
        assert found.calls is not None and 500 <= found.calls < 600, found
        assert found.tool is not None
    finally:
        child.kill()
        child.wait()
        if child.stdin is not None:
            child.stdin.close()


def test_every_threads_switches_are_stamped() -> None:
    me = read_switches([os.getpid()])
    assert str(threading.get_native_id()) in me
    time.sleep(0.01)  # a voluntary switch
    later = read_switches([os.getpid()])
    assert switches_between(me, later) >= 1
    assert switches_between({"1": 5, "2": 9}, {"1": 7, "3": 4}) == 2 + 4  # born, gone
    stamped = stamp([CpuProbe("me", os.getpid())])
    assert stamped["parts"]["me"]["switches"]


def test_a_target_that_cannot_be_counted_is_refused_in_one_line(tmp_path: Path) -> None:
    external = ExternalTarget("http://127.0.0.1:9")
    assert "--webperf-target-url" in (refusal(external) or "")
    java = ProcessTarget(["java", "-jar", "app.jar"], name="app")
    assert refusal(java) == f"app: {JVM_REFUSED}"
    assert refusal(ProcessTarget([sys.executable, "app.py"])) is None


def test_a_warm_up_checks_its_responses(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(
        "import http.server, os\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    protocol_version = 'HTTP/1.1'\n"
        "    def do_GET(self):\n"
        "        status = 200 if self.path != '/bad' else 500\n"
        "        self.send_response(status); self.send_header('Content-Length', '2')\n"
        "        self.end_headers(); self.wfile.write(b'ok')\n"
        "    def log_message(self, *a): pass\n"
        "http.server.HTTPServer(('127.0.0.1', int(os.environ['PORT'])), H).serve_forever()\n"
    )
    with ProcessTarget([sys.executable, str(script)], health="/") as target:
        assert warm(target, [Request("/ok")], 20, None) == 0
        assert warm(target, [Request("/ok"), Request("/bad")], 10, None) == 5
        assert warm(target, [Request("/ok", expect_body=b"no")], 3, None) == 3
    with pytest.raises(TargetError, match=r"request 1 of 1 before the counted window \(GET /ok\)"):
        warm(target, [Request("/ok")], 1, None)


class _Target:
    """A target at a URL (nothing else is asked of it here)."""

    name = "closing"

    def __init__(self, url: str) -> None:
        self.url = url

    def logs(self) -> str:
        return ""


def test_a_kept_alive_connection_the_server_closed_is_opened_again() -> None:
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    answered: list[int] = []

    def serve() -> None:  # one request per connection, then closed without saying so
        while len(answered) < 3:
            conn, _ = listener.accept()
            with conn:
                if conn.recv(4096):
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    answered.append(1)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        assert warm(_Target(f"http://127.0.0.1:{port}"), [Request("/")], 3, None) == 0  # type: ignore[arg-type]
    finally:
        listener.close()
    assert len(answered) == 3


def test_a_target_is_at_rest_when_every_thread_sleeps() -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        deadline = time.monotonic() + 10
        while not at_rest([sleeper.pid])[0] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert at_rest([sleeper.pid])[0]  # asleep in a system call
        rest, cpu_s = at_rest([os.getpid()])
        assert not rest and cpu_s > 0  # this thread runs while it reads, and has run
        assert at_rest([2**22 + 7]) == (True, 0.0)  # gone: nothing to wait for
    finally:
        sleeper.kill()
        sleeper.wait()
