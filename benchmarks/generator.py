"""How fast are our load generators? wrk, Locust FastHttpUser and the lean user, side by side.

    .venv/bin/python benchmarks/generator.py [--duration 8] [--connections 100] [--path /hello]
        [--no-remote] [--c10k 10000]

Starts the catalogue's nginx (host network, 127.0.0.1), then runs each generator
at 1 and 2 generator processes (wrk: threads) with the same connections and
duration, one after the other against the same container, and prints req/s,
the generator's CPU seconds and req/s per generator CPU-second, with ratios.
Then the lean user with 1 local + 1 remote worker (``lean+r``: a ``webperf
worker`` process started here, joining the master on loopback as another
machine's would) and, with ``--c10k N``, the lean user at N connections with 2
local processes and with 1 local + 1 remote.

Generator CPU: for the swarms, each process's own user+system time over the
measured phase (the child reports it per process: master and workers included);
for wrk, the rusage of the finished child. wrk comes from the Debian package
``wrk``: installed with apt-get when missing and running as root, else skipped
with a note. The machine is shared: the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

from pytest_webperf.catalog import Catalog, default_directories
from pytest_webperf.swarm.runner import run_swarm
from pytest_webperf.swarm.spec import Remote, SwarmSpec
from pytest_webperf.targets import start_target
from pytest_webperf.workload import Workload


@dataclass(frozen=True)
class Row:
    generator: str
    processes: int
    requests: int
    errors: int
    seconds: float
    cpu_s: float
    p99_ms: float | None = None

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def per_cpu(self) -> float:
        return self.requests / self.cpu_s if self.cpu_s else 0.0


def quietly(*command: str) -> int:
    return subprocess.run(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300, check=False
    ).returncode


def ensure_wrk() -> str | None:
    found = shutil.which("wrk")
    if found or os.geteuid() != 0 or not shutil.which("apt-get"):
        return found
    print("installing wrk (apt-get install -y wrk) ...", flush=True)
    if quietly("apt-get", "install", "-y", "wrk"):
        quietly("apt-get", "update")
        quietly("apt-get", "install", "-y", "wrk")
    return shutil.which("wrk")


def run_wrk(wrk: str, url: str, threads: int, connections: int, seconds: float) -> Row:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [wrk, f"-t{threads}", f"-c{connections}", f"-d{int(seconds)}s", url],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 60,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = done.stdout
    match = re.search(r"(\d+) requests in ([\d.]+)(m?s)", out)
    if match is None:
        raise RuntimeError(f"unexpected wrk output:\n{out}")
    requests = int(match.group(1))
    took = float(match.group(2)) / (1000 if match.group(3) == "ms" else 1)
    errors = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    socket_errors = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), "
        r"timeout (\d+)",
        out,
    )
    if socket_errors:
        errors += sum(int(n) for n in socket_errors.groups())
    return Row("wrk", threads, requests, errors, took, cpu)


def run_generator(
    user: str,
    url: str,
    workers: int,
    *,
    connections: int,
    seconds: float,
    path: str,
    remote: Remote | None = None,
) -> Row:
    outcome = run_swarm(
        SwarmSpec(
            host=url,
            users=connections,
            duration_s=seconds,
            warmup_s=1.0,
            user_class=user,
            workers=workers,
            workload=Workload(path=path),
            remote=remote,
        )
    )
    h = outcome.histogram
    return Row(
        user if remote is None else f"{user}+r",
        workers + (remote.workers if remote is not None else 0),
        outcome.total.requests,
        outcome.total.errors,
        outcome.duration_s,
        outcome.generator_cpu_s,
        h.percentile(99) / 1000 if h.count else None,
    )


@contextlib.contextmanager
def remote_worker() -> Iterator[Remote]:
    """A ``webperf worker`` process (not a child of any swarm) on a free loopback port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    command = [sys.executable, "-m", "pytest_webperf.cli", "worker", "--master", address]
    worker = subprocess.Popen(
        [*command, "--idle-exit", "60s"], stdout=subprocess.DEVNULL, start_new_session=True
    )
    try:
        yield Remote(1, address, 60.0)
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()


def remote_row(url: str, remote: Remote | None, connections: int, args: argparse.Namespace) -> Row:
    """The lean user on 2 generator processes: 1 local + the remote worker (``lean+r``),
    or without ``remote`` 2 local ones."""
    return run_generator(
        "lean",
        url,
        1 if remote is not None else 2,
        connections=connections,
        seconds=args.duration,
        path=args.path,
        remote=remote,
    )


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def table(rows: list[Row]) -> str:
    lines = [
        f"{'generator':<10} {'procs':>5} {'req/s':>9} {'errors':>7} {'p99 ms':>7} "
        f"{'gen CPU s':>9} {'req/CPU-s':>10}"
    ]
    for r in rows:
        p99 = f"{r.p99_ms:7.2f}" if r.p99_ms is not None else f"{'-':>7}"
        lines.append(
            f"{r.generator:<10} {r.processes:>5} {r.rps:>9,.0f} {r.errors:>7} {p99} "
            f"{r.cpu_s:>9.2f} {r.per_cpu:>10,.0f}"
        )
    return "\n".join(lines)


def ratios(rows: list[Row]) -> list[str]:
    by = {(r.generator, r.processes): r for r in rows}
    out = []
    for procs in (1, 2):
        lean, fast, wrk = by.get(("lean", procs)), by.get(("fast", procs)), by.get(("wrk", procs))
        if lean and fast and fast.per_cpu:
            out.append(
                f"{procs} process(es): lean/fast req/s {lean.rps / fast.rps:.2f}x, "
                f"req per CPU-second {lean.per_cpu / fast.per_cpu:.2f}x"
            )
        if lean and wrk and wrk.rps:
            out.append(
                f"{procs} process(es): lean/wrk req/s {lean.rps / wrk.rps:.2f}, "
                f"req per CPU-second {lean.per_cpu / wrk.per_cpu:.2f}"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per run")
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--path", default="/hello")
    parser.add_argument("--processes", default="1,2", help="generator processes to try")
    parser.add_argument(
        "--no-remote", action="store_true", help="skip the 1 local + 1 remote worker row"
    )
    parser.add_argument("--c10k", type=int, default=0, help="also lean at this many connections")
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.processes.split(",")]
    wrk = ensure_wrk()
    if wrk is None:
        print(
            "wrk not found and not installable here: apt-get install wrk (Debian/Ubuntu); "
            "continuing without it",
            file=sys.stderr,
        )
    rows: list[Row] = []
    print(load(), flush=True)
    started = time.monotonic()
    with start_target(Catalog(default_directories()), "nginx") as target:
        url = target.url + args.path
        print(
            f"nginx at {target.url}, {args.connections} connections, {args.duration:.0f} s "
            f"per run, GET {args.path}",
            flush=True,
        )
        for procs in counts:
            if wrk is not None:
                rows.append(run_wrk(wrk, url, procs, args.connections, args.duration))
                print(table(rows[-1:]).splitlines()[1], flush=True)
            for user in ("fast", "lean"):
                rows.append(
                    run_generator(
                        user,
                        target.url,
                        procs,
                        connections=args.connections,
                        seconds=args.duration,
                        path=args.path,
                    )
                )
                print(table(rows[-1:]).splitlines()[1], flush=True)
        big: list[Row] = []
        with remote_worker() as remote:
            if not args.no_remote:
                rows.append(remote_row(target.url, remote, args.connections, args))
                print(table(rows[-1:]).splitlines()[1], flush=True)
            if args.c10k:
                print(f"lean at {args.c10k:,} connections:", flush=True)
                for spare in (None, remote):
                    big.append(remote_row(target.url, spare, args.c10k, args))
                    print(table(big[-1:]).splitlines()[1], flush=True)
    print()
    print(table(rows))
    if big:
        print(f"\nlean at {args.c10k:,} connections\n{table(big)}")
    print()
    for line in ratios(rows):
        print(line)
    print(f"\n{load()}; took {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
