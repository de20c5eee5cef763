"""What profiling costs the target: cpu_per_req with and without the profiler, measured
side by side in one run, interleaved (profiled, plain, plain, profiled, ...) on the
same target instance, so drift and neighbours hit both alike.

    .venv/bin/python benchmarks/profile_overhead.py [--target python|nginx] [--pairs 6]
                                                    [--duration 3] [--concurrency 4]

``python``: a threaded ``http.server`` doing ~1 ms of Python per request (py-spy);
``nginx``: the catalogue's nginx serving ``/hello`` in a container (perf). The same
monitor samples both sides (``plan.sampling_monitor``); the profiled side also runs
the profiler exactly as an A/B run does (``ab``'s profiling monitor, stacks folded after
each repetition). Prints each side's mean cpu_per_req, the mean of the per-pair ratios
with a t-interval, and the load average before and after.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from contextlib import ExitStack
from functools import partial
from pathlib import Path

from pytest_webperf.measurement.loop import HttpRequests, run_repetition
from pytest_webperf.measurement.pairs import profiled_repetition, profiling_monitors
from pytest_webperf.measurement.plan import RunPlan, sampling_monitor
from pytest_webperf.models.workload import Workload
from pytest_webperf.profiling.capture import Capture, Recording
from pytest_webperf.stats.distributions import t_ppf
from pytest_webperf.targets.base import Target
from pytest_webperf.targets.catalog import Catalog, default_directories
from pytest_webperf.targets.container import ContainerTarget
from pytest_webperf.targets.process import ProcessTarget

PYTHON_SERVER = """
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def work():
    total = 0
    for i in range(20_000):
        total += i * i
    return total


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 65536
    disable_nagle_algorithm = True

    def do_GET(self):
        if self.path == "/work":
            work()
        body = b"ok\\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
"""


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=("python", "nginx"), default="python")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    plan = RunPlan(concurrency=args.concurrency, duration_s=args.duration, warmup_s=0.5, repeat=1)
    with ExitStack() as stack:
        target: Target
        if args.target == "python":
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            (directory / "server.py").write_text(PYTHON_SERVER)
            target = stack.enter_context(
                ProcessTarget([sys.executable, "server.py"], name="pywork", cwd=str(directory))
            )
            kind = HttpRequests(Workload(path="/work"), user_class="lean")
        else:
            catalog = Catalog(dict.fromkeys(d.resolve() for d in default_directories()))
            target = stack.enter_context(ContainerTarget(catalog, "nginx"))
            kind = HttpRequests(Workload(path="/hello"), user_class="lean")
        print(f"load average before: {loadavg()}", flush=True)
        recordings: list[Recording] = []
        profiled_factory = profiling_monitors(sampling_monitor, recordings)
        plain: list[float] = []
        profiled: list[float] = []
        tools: set[str] = set()
        for index in range(args.pairs):
            order = ("profiled", "plain") if index % 2 == 0 else ("plain", "profiled")
            for side in order:
                captures: list[Capture | str] = []
                if side == "profiled":
                    run = profiled_repetition(
                        recordings,
                        captures,
                        partial(
                            run_repetition,
                            target,
                            kind,
                            plan,
                            index + 1,
                            monitor_factory=profiled_factory,
                        ),
                    )
                    for capture in captures:
                        if isinstance(capture, str):
                            print(f"no profile: {capture}")
                        else:
                            tools.update(capture.tools)
                else:
                    run = run_repetition(
                        target, kind, plan, index + 1, monitor_factory=sampling_monitor
                    )
                cpu = run.cpu_per_req_us
                if cpu is None:
                    print(f"pair {index + 1} {side}: no CPU measured")
                    return 1
                (profiled if side == "profiled" else plain).append(cpu)
                print(f"pair {index + 1} {side:8}: {run.rps:8.0f} req/s  {cpu:8.1f} µs/req")
        ratios = [math.log(p / q) for p, q in zip(profiled, plain, strict=True)]
        mean = statistics.fmean(ratios)
        half = t_ppf(0.975, len(ratios) - 1) * statistics.stdev(ratios) / math.sqrt(len(ratios))
        print(f"profiler: {', '.join(sorted(tools)) or '-'}")
        print(f"cpu_per_req plain    {statistics.fmean(plain):8.1f} µs")
        print(f"cpu_per_req profiled {statistics.fmean(profiled):8.1f} µs")
        print(
            f"overhead {math.expm1(mean):+.1%} (95% CI {math.expm1(mean - half):+.1%}.."
            f"{math.expm1(mean + half):+.1%}) over {len(ratios)} pairs"
        )
        print(f"load average after: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
