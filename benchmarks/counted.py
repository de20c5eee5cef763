"""Counted measurements (``count=True``): what one counted A/B test costs, how repeatable
their figures are, and what counting costs. Measured through pytest, as a user's run
measures.

    .venv/bin/python benchmarks/counted.py [--ab c,python-async,node]
                                           [--servers nginx,python-async,go,node]
                                           [--repeat 5] [--requests 0]
                                           [--counter-requests 2000] [--out FILE.json]

0. **One counted A/B test, per server** (``--ab``; ``c`` is the C server of the counted
   end-to-end tests, built by ``build=``, the others the catalogue's): a one-test project
   in a temporary git repository, ``webperf.http(target, "/hello", count=True)`` (the C
   server's ``/work``) with ``--webperf-against=HEAD --webperf-against-always``: an A/A
   run, both sides the same code, as CI runs it. Reported: the test's wall time, the
   pairs run, N, the A/A change and what it could detect for ``instructions_per_req``,
   and where a repetition's time went (each phase's median over the repetitions). Then,
   for the C server, the same test counted alone (one side, its repetitions in turn, no
   core pinned): its instructions per request beside those of the A/A run, whose sides
   ran at once, each on its own core (one side's counts do not move when the other runs
   beside it).
1. **Repeatability and cost, per catalogue server.** One ``pytest`` run per server, of a
   one-test project in a temporary directory: ``webperf.server(NAME)`` and
   ``webperf.http(target, "/hello", count=True)`` with ``--webperf-repeat=K``: K
   repetitions, each on fresh instances (counted under callgrind, then natively), no A/B:
   the spread of one side over fresh processes is the A/A question. Reported per server:
   N (sized by the probe unless ``--requests``), instructions per request (median),
   ``(max-min)/median`` and the coefficient of variation over the K repetitions; the same
   spread for allocations and system calls; what the whole test took, what a repetition
   took (both windows, both starts, warm-ups, dumps), Valgrind's slowdown (the target's
   CPU per request under callgrind over natively) and its wall-time slowdown.
2. **The system call counters' cost.** A stdlib Python server started natively (a local
   command), warmed up, then ``--counter-requests`` keep-alive requests from this process
   timed three times in turn, twice each: with nothing attached, under ``perf stat -e
   raw_syscalls:sys_enter``, under ``strace -f -c``; each counter's count per request
   beside its time.

The load average is printed before and after each step: the machine is shared, counts
do not care, wall times do.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# the counted end-to-end tests' C server (not part of the plugin)
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from counted_servers import C_SERVER  # noqa: E402

AB_TEST = """
import pytest


@pytest.mark.webperf(compare_fail="instructions_per_req:1%,syscalls_per_req:5%")
def test_ab(webperf):
    target = {target}
    webperf.http(target, path={path!r}, count=True)
"""
C_TARGET = (
    'webperf.process(["build/server"], name="c", health="/health", '
    'build="mkdir -p build && cc -O2 -o build/server server.c", watch=["server.c"])'
)

TEST = """
def test_counted(webperf):
    target = webperf.server({server!r})
    webperf.http(target, path="/hello", count=True{requests})
"""

SERVER = """
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self):
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
"""


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def spread(values: Sequence[float]) -> tuple[float, float]:
    """((max - min) / median, coefficient of variation), as fractions."""
    median = statistics.median(values)
    if not median or len(values) < 2:
        return 0.0, 0.0
    return (max(values) - min(values)) / median, statistics.stdev(values) / statistics.fmean(values)


def counted_run(server: str, repeat: int, requests: int, directory: Path) -> dict[str, Any]:
    """One pytest run of a counted measurement of ``server``; its figures."""
    project = directory / server
    project.mkdir()
    given = f", requests={requests}" if requests else ""
    (project / "test_counted.py").write_text(TEST.format(server=server, requests=given))
    report = project / "report.json"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:locust",
        "-p",
        "no:cacheprovider",
        "-q",
        f"--webperf-repeat={repeat}",
        f"--webperf-json={report}",
        "test_counted.py",
    ]
    started = time.monotonic()
    done = subprocess.run(command, cwd=project, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if not report.exists():
        tail = (done.stdout + done.stderr)[-3000:]
        raise SystemExit(f"{server}: no report (exit {done.returncode}):\n{tail}")
    (entry,) = json.loads(report.read_text())["tests"]
    counts = [r["counts"] for r in entry["repetitions"]]
    figures: dict[str, Any] = {"server": server, "exit": done.returncode, "test_s": wall}
    for key in ("instructions_per_req", "allocs_per_req", "syscalls_per_req"):
        values = [float(c[key]) for c in counts if c.get(key) is not None]
        apart, cv = spread(values) if values else (None, None)
        figures[key] = {"values": values, "median": statistics.median(values) if values else None}
        figures[key].update(range=apart, cv=cv)
    figures["requests"] = sorted({int(c["requests"]) for c in counts})
    figures["run_s"] = [float(c["run_s"]) for c in counts]
    figures["slowdown"] = [c["slowdown"] for c in counts]
    figures["wall_slowdown"] = [c["wall_slowdown"] for c in counts]
    figures["tool"] = counts[0]["tool"]
    figures["pinning"] = counts[0]["pinning"]
    figures["syscall_tool"] = counts[0].get("syscall_tool")
    return figures


def git(project: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=bench@example", "-c", "user.name=bench", *args],
        cwd=project,
        check=True,
        capture_output=True,
    )


def ab_run(server: str, directory: Path, *, alone: bool = False) -> dict[str, Any]:
    """One counted A/A test of ``server`` against its base (or, ``alone``, one side in
    turn); its wall time and figures."""
    project = directory / f"{'alone' if alone else 'ab'}-{server}"
    project.mkdir()
    if server == "c":
        (project / "server.c").write_text(C_SERVER)
        target, path = C_TARGET, "/work"
    else:
        target, path = f"webperf.server({server!r})", "/hello"
    (project / "test_ab.py").write_text(AB_TEST.format(target=target, path=path))
    (project / ".gitignore").write_text("build/\n*.json\n__pycache__/\n")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "base")
    report = project / "report.json"
    ab = [] if alone else ["--webperf-against=HEAD", "--webperf-against-always"]
    command = [sys.executable, "-m", "pytest", "-p", "no:locust", "-p", "no:cacheprovider"]
    command += ["-q", *ab, f"--webperf-json={report}", "test_ab.py"]
    env = {**os.environ, "WEBPERF_BUILD_CACHE": str(project / "builds")}
    started = time.monotonic()
    done = subprocess.run(
        command, cwd=project, capture_output=True, text=True, env=env, check=False
    )
    wall = time.monotonic() - started
    if not report.exists():
        tail = (done.stdout + done.stderr)[-3000:]
        raise SystemExit(f"{server}: no report (exit {done.returncode}):\n{tail}")
    (entry,) = json.loads(report.read_text())["tests"]
    reps = entry["repetitions"] + entry.get("base_repetitions", [])
    counts = [r["counts"] for r in reps]
    check = next(
        (c for c in entry["verdict"]["checks"] if c["metric"] == "instructions_per_req"), {}
    )
    phases: dict[str, list[float]] = {}
    for c in counts:
        for phase, seconds in c.get("phases", {}).items():
            phases.setdefault(phase, []).append(seconds)
    return {
        "server": server,
        "alone": alone,
        "exit": done.returncode,
        "test_s": wall,
        "pairs": (entry.get("against") or {}).get("pairs"),
        "requests": sorted({int(c["requests"]) for c in counts}),
        "instructions_per_req": {
            "A": [r["counts"]["instructions_per_req"] for r in entry.get("base_repetitions", [])],
            "B": [r["counts"]["instructions_per_req"] for r in entry["repetitions"]],
        },
        "change": check.get("change"),
        "detectable": check.get("detectable"),
        "outcome": check.get("outcome"),
        "notes": entry["verdict"].get("notes", []),
        "phases": {k: statistics.median(v) for k, v in phases.items()},
        "run_s": [c["run_s"] for c in counts],
    }


def print_ab(rows: Sequence[dict[str, Any]]) -> None:
    print(
        "| server | test s | pairs | N | A/A change | could detect | outcome | a repetition's "
        "phases, median s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        if row["alone"]:
            continue
        change = "-" if row["change"] is None else f"{row['change']:+.3%}"
        could = "-" if row["detectable"] is None else f"{row['detectable']:.3%}"
        phases = ", ".join(f"{k} {v:.1f}" for k, v in row["phases"].items())
        print(
            f"| {row['server']} | {row['test_s']:.0f} | {row['pairs']} "
            f"| {'/'.join(map(str, row['requests']))} | {change} | {could} "
            f"| {row['outcome']} | {phases} |"
        )


def print_beside(rows: Sequence[dict[str, Any]]) -> None:
    alone = {r["server"]: r for r in rows if r["alone"]}
    for row in rows:
        if row["alone"] or row["server"] not in alone:
            continue
        ir = row["instructions_per_req"]
        solo = alone[row["server"]]["instructions_per_req"]["B"]

        def shown(values: Sequence[float]) -> str:
            return ", ".join(f"{x:,.2f}" for x in values)

        print(
            f"{row['server']}: instructions/req alone, one side in turn: {shown(solo)}; both "
            f"sides at once, each on its core: A {shown(ir['A'])}, B {shown(ir['B'])}"
        )


def print_counted(rows: Sequence[dict[str, Any]]) -> None:
    print(
        "| server | N | instructions/req (median) | (max-min)/median | CV | allocs/req "
        "(max-min)/median | syscalls/req (median; (max-min)/median) | test s | s per "
        "repetition (median) | Valgrind slowdown, CPU (median) | wall (median) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        ir, allocs, calls = (
            row["instructions_per_req"],
            row["allocs_per_req"],
            row["syscalls_per_req"],
        )
        slow = [s for s in row["slowdown"] if s is not None]
        wall = [s for s in row["wall_slowdown"] if s is not None]
        print(
            f"| {row['server']} | {'/'.join(map(str, row['requests']))} | {ir['median']:,.1f} "
            f"| {ir['range']:.3%} | {ir['cv']:.3%} | {allocs['range']:.3%} "
            f"| {calls['median'] or 0:.3f}; {calls['range'] or 0:.2%} | {row['test_s']:.0f} "
            f"| {statistics.median(row['run_s']):.1f} "
            f"| {statistics.median(slow) if slow else float('nan'):.0f}x "
            f"| {statistics.median(wall) if wall else float('nan'):.0f}x |"
        )


def counter_costs(requests: int, directory: Path) -> list[dict[str, Any]]:
    """Keep-alive requests to a native stdlib server with nothing, perf, strace attached."""
    sys.path.insert(0, str(ROOT / "src"))
    from pytest_webperf.models.workload import Request
    from pytest_webperf.sampling import syscalls
    from pytest_webperf.targets.client import warm
    from pytest_webperf.targets.process import ProcessTarget

    script = directory / "server.py"
    script.write_text(SERVER)
    rows: list[dict[str, Any]] = []
    with ProcessTarget([sys.executable, str(script)], name="stdlib", health="/") as target:
        warm(target, [Request("/")], 500, None)
        pid = target.parts()["stdlib"]
        for _ in range(2):
            for counter in ("none", "perf", "strace"):
                if counter == "perf" and syscalls.perf_problem() is not None:
                    continue
                if counter == "strace" and syscalls.strace_problem() is not None:
                    continue
                rows.append(timed(counter, target, pid, requests))
    return rows


def timed(counter: str, target: Any, pid: int, requests: int) -> dict[str, Any]:
    """``requests`` keep-alive requests with ``counter`` attached (``none``, ``perf``, or
    ``strace``: perf taken as unusable for the while)."""
    from pytest_webperf.models.workload import Request
    from pytest_webperf.sampling import syscalls
    from pytest_webperf.targets.client import warm

    if counter == "none":
        started = time.monotonic()
        warm(target, [Request("/")], requests, None)
        return {"counter": counter, "seconds": time.monotonic() - started, "syscalls_per_req": None}
    original = syscalls.perf_problem
    if counter == "strace":
        syscalls.perf_problem = lambda: "strace asked for"  # type: ignore[assignment]
    try:
        with syscalls.SyscallCounter([pid]) as found:
            started = time.monotonic()
            warm(target, [Request("/")], requests, None)
            seconds = time.monotonic() - started
    finally:
        syscalls.perf_problem = original  # type: ignore[assignment]
    calls = found.result.calls
    return {
        "counter": counter,
        "tool": found.result.tool,
        "seconds": seconds,
        "syscalls_per_req": None if calls is None else calls / requests,
    }


def print_costs(rows: Sequence[dict[str, Any]], requests: int) -> None:
    print(f"| counter | {requests:,} requests took, s (each try) | syscalls/req |")
    print("|---|---|---|")
    for counter in ("none", "perf", "strace"):
        mine = [r for r in rows if r["counter"] == counter]
        if not mine:
            continue
        per = [r["syscalls_per_req"] for r in mine if r["syscalls_per_req"] is not None]
        times = ", ".join(f"{r['seconds']:.2f}" for r in mine)
        print(f"| {counter} | {times} | {', '.join(f'{p:.3f}' for p in per) or '-'} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ab", default="c,python-async,node", help="'' for none")
    parser.add_argument("--servers", default="nginx,python-async,go,node", help="'' for none")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--requests", type=int, default=0, help="N; 0: sized by the probe")
    parser.add_argument("--counter-requests", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short=10", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    print(f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, commit {commit}", flush=True)
    results: dict[str, Any] = {"commit": commit, "ab": [], "servers": [], "counters": []}
    with tempfile.TemporaryDirectory(prefix="webperf-counted-bench-") as tmp:
        for server in [s for s in args.ab.split(",") if s]:
            for alone in (False, True) if server == "c" else (False,):
                before = load()
                row = ab_run(server, Path(tmp), alone=alone)
                row.update(load_before=before, load_after=load())
                results["ab"].append(row)
                print(
                    f"{server}{' alone' if alone else ' A/A'}: {row['test_s']:.0f} s, "
                    f"could detect {row['detectable']}, {row['outcome']}; "
                    f"{before} -> {row['load_after']}",
                    flush=True,
                )
        if results["ab"]:
            print()
            print_ab(results["ab"])
            print_beside(results["ab"])
            print(flush=True)
        for server in [s for s in args.servers.split(",") if s]:
            before = load()
            row = counted_run(server, args.repeat, args.requests, Path(tmp))
            row.update(load_before=before, load_after=load())
            results["servers"].append(row)
            print(
                f"{server}: {row['instructions_per_req']['median']:,.1f} instructions/req, "
                f"{row['instructions_per_req']['range']:.3%} apart over {args.repeat}; "
                f"{row['test_s']:.0f} s; {before} -> {row['load_after']}",
                flush=True,
            )
        before = load()
        results["counters"] = counter_costs(args.counter_requests, Path(tmp))
        results["counters_load"] = [before, load()]
    print()
    if results["servers"]:
        print_counted(results["servers"])
        print()
    print_costs(results["counters"], args.counter_requests)
    print(
        f"\n(system call counters: {results['counters_load'][0]} -> {results['counters_load'][1]})"
    )
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
