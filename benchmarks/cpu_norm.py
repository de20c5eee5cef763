"""Would ``cpu_per_req`` be judged better per unit of the machine's speed? Measured.

    .venv/bin/python benchmarks/cpu_norm.py [--server pywork] [-k 8] [--duration 4s]
                                            [--background 1x100%] [--out norm.json]

The question (issue #28): the Python test server's CPU per request falls by about a
quarter when another core's worth of work runs beside it. If that is the machine
running slower (a shared core, caches, frequency), dividing the server's CPU per
request by the CPU a fixed piece of work takes in the same run would cancel it, and
the gate should judge that ratio. If it is the server doing less work per request
when it runs less often (more requests per wake-up, fewer GIL hand-offs), it would
not.

Each round runs the same one-test project twice, side by side: once on a quiet
machine, once with ``--background`` load (burner processes, as ``gate.py`` has), the
order alternating. During every run a probe process times a fixed piece of work
(sha256 over 1 KiB, ``--probe-work`` times) in its own CPU seconds, every 50 ms (about
5 % of a core): the machine's speed as a CPU-bound process sees it. Per round:

* raw: the loaded run's cpu_per_req over the quiet run's;
* probe: the loaded run's probe CPU per piece over the quiet run's;
* normalised: raw / probe (cpu_per_req in units of the probe's work).

Both sides run the same server, so every ratio should be 1. Reported per ratio over the
rounds: the median, the range, the standard deviation of the logs (the spread) and the
root mean square of the logs (the error: spread and bias together, what the gate would
see as a change). Normalising is worth adopting if it halves the error.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gate import KNOBS, SERVERS, Background, Setting, parse_background, pytest_command, run_pytest

from pytest_webperf.values import parse_duration

TEST = """
def test_work(webperf):
    target = webperf.server({server!r})
    webperf.http(target, path="/work")
"""
# the probe: (wall time, CPU seconds) per fixed piece of work, one line each, to stdout
PROBE = """
import hashlib, sys, time

work = int(sys.argv[1])
block = bytes(1024)
while True:
    started = time.process_time()
    digest = block
    for _ in range(work):
        digest = hashlib.sha256(block + digest[:8]).digest()
    cpu = time.process_time() - started
    print(f"{time.time():.3f} {cpu:.9f}", flush=True)
    time.sleep(0.05)
"""


def one_run(project: Path, args: argparse.Namespace, loaded: bool) -> dict[str, Any]:
    """One pytest run with the probe beside it: cpu_per_req and the probe's median."""
    report = project / "report.json"
    probe = subprocess.Popen(
        [sys.executable, "-c", PROBE, str(args.probe_work)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    command = [
        *pytest_command(Setting(1, args.duration), args, restart_every=1),
        f"--webperf-servers={SERVERS}",
    ]
    background = Background(args.background if loaded else None, args.burst)
    with background:
        started = time.time()
        entry, _ = run_pytest(command, project, report)
        ended = time.time()
    probe.kill()
    out, _ = probe.communicate()
    (run,) = entry["repetitions"]
    # the measured phase is the end of the run: the last duration seconds before pytest's
    # report (the run's set-up and warm-up come first)
    window = (ended - args.duration - 2, ended)
    samples = [
        float(cpu)
        for line in out.splitlines()
        if len(parts := line.split()) == 2
        for at, cpu in [parts]
        if window[0] <= float(at) <= window[1]
    ]
    if not samples:
        raise SystemExit("the probe took no sample during the run")
    return {
        "loaded": loaded,
        "cpu_per_req_us": run["server_cpu_seconds"] / run["requests"] * 1e6,
        "rps": run["requests"] / run["duration_s"],
        "foreign_cpu_percent": run.get("foreign_cpu_percent"),
        "probe_ms": statistics.median(samples) * 1000,
        "probe_samples": len(samples),
        "wall_s": ended - started,
    }


def error(values: list[float]) -> float:
    """How far the ratios stand from 1 (the same server on both sides): the root mean
    square of their logs, bias and spread together."""
    return math.sqrt(statistics.fmean(math.log(v) ** 2 for v in values))


def spread(values: list[float]) -> str:
    logs = [math.log(v) for v in values]
    sd = statistics.stdev(logs) if len(logs) > 1 else 0.0
    return (
        f"median {statistics.median(values):.3f}, range {min(values):.3f}..{max(values):.3f}"
        f", sd of logs {sd:.3f}, rms of logs {error(values):.3f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", choices=sorted(KNOBS), default="pywork")
    parser.add_argument("-k", type=int, default=8, help="rounds (a quiet and a loaded run)")
    parser.add_argument("--duration", type=parse_duration, default=4.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--background", type=parse_background, default=parse_background("1x100%"))
    parser.add_argument("--burst", type=parse_duration, default=1.0)
    parser.add_argument("--warmup", type=parse_duration, default=1.0)
    parser.add_argument("--probe-work", type=int, default=400, help="sha256 blocks per piece")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    args.compare_fail = ""
    if args.background is None:
        parser.error("--background: the loaded runs need other load, e.g. 1x100%")
    rounds: list[tuple[dict[str, Any], dict[str, Any]]] = []
    print(f"load average before {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="webperf-norm-") as tmp:
        project = Path(tmp)
        (project / "test_norm.py").write_text(TEST.format(server=args.server))
        (project / "pytest.ini").write_text("[pytest]\n")
        for i in range(args.k):
            order = (False, True) if i % 2 == 0 else (True, False)
            runs = {loaded: one_run(project, args, loaded) for loaded in order}
            quiet, loaded = runs[False], runs[True]
            rounds.append((quiet, loaded))
            raw = loaded["cpu_per_req_us"] / quiet["cpu_per_req_us"]
            probe = loaded["probe_ms"] / quiet["probe_ms"]
            print(
                f"  #{i + 1}: cpu_per_req {quiet['cpu_per_req_us']:.0f} -> "
                f"{loaded['cpu_per_req_us']:.0f} us (x{raw:.3f}), probe {quiet['probe_ms']:.2f} "
                f"-> {loaded['probe_ms']:.2f} ms (x{probe:.3f}), normalised x{raw / probe:.3f}; "
                f"other CPU {quiet['foreign_cpu_percent']:.0f}% -> "
                f"{loaded['foreign_cpu_percent']:.0f}%; load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    raws = [b["cpu_per_req_us"] / a["cpu_per_req_us"] for a, b in rounds]
    probes = [b["probe_ms"] / a["probe_ms"] for a, b in rounds]
    normalised = [r / p for r, p in zip(raws, probes, strict=True)]
    count, duty = args.background
    print(
        f"\n{args.server}, {args.concurrency} users, {args.duration:g}s runs, other load "
        f"{count} x {duty:.0%} (bursts {args.burst:g}s), {args.k} rounds; "
        f"load average after {os.getloadavg()[0]:.2f}"
    )
    print(f"  raw cpu_per_req, loaded / quiet:   {spread(raws)}")
    print(f"  probe CPU per piece, loaded/quiet: {spread(probes)}")
    print(f"  normalised (raw / probe):          {spread(normalised)}")
    halves = error(normalised) <= error(raws) / 2
    print(f"  normalising halves the error (rms of logs): {'yes' if halves else 'no'}")
    if args.out is not None:
        args.out.write_text(
            json.dumps({"args": vars(args), "rounds": rounds}, indent=1, default=str) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
