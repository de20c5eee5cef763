"""What profiling costs the target at the rates a run may choose: cpu_per_req with and
without the profiler, measured side by side in one run, interleaved (the configurations'
order rotates every pair) on the same target instance, so drift and neighbours hit
them alike.

    .venv/bin/python benchmarks/profile_overhead.py [--target python|nginx|node]
                                                    [--rates 99,997,1999] [--pairs 6]
                                                    [--duration 3] [--concurrency 4]

``python``: a threaded ``http.server`` doing ~1 ms of Python per request (py-spy);
``nginx``: the catalogue's nginx serving ``/hello`` in a container (perf); ``node``: the
catalogue's Node 18 serving ``/quicksort`` (perf, with the perf map V8 writes under
``NODE_OPTIONS=--perf-basic-prof``, given to every configuration: the flag alone costs
nothing measurable, see the profiles how-to). The same monitor samples every
configuration (``plan.sampling_monitor``); a profiled one also runs the profiler exactly
as a measurement does (``measurement/profiles.py``: stacks folded after each repetition)
at the rate given (py-spy is never above 997 Hz in a run: ``profiling/rates.py``). Prints
each configuration's mean cpu_per_req and samples per repetition, the mean of the
per-pair ratios to the plain one with a t-interval, and the load average before and
after.
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
from pytest_webperf.measurement.plan import RunPlan, sampling_monitor
from pytest_webperf.measurement.profiles import Profiler
from pytest_webperf.models.workload import Workload
from pytest_webperf.profiling.runtimes import profile_env
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


def profiled(rate: int) -> Profiler:
    """A profiler at one fixed rate, whatever the tool."""
    return Profiler(1.0, 1, schedule=[{"perf": rate, "py-spy": rate}])


def summary(configs: list[str], cpu: dict[str, list[float]], samples: dict[str, list[int]]) -> None:
    """Each profiled configuration against the plain one, pair by pair."""
    print(f"cpu_per_req plain      {statistics.fmean(cpu['plain']):8.1f} µs")
    for config in configs[1:]:
        ratios = [math.log(p / q) for p, q in zip(cpu[config], cpu["plain"], strict=True)]
        mean = statistics.fmean(ratios)
        n = len(ratios)
        half = t_ppf(0.975, n - 1) * statistics.stdev(ratios) / math.sqrt(n)
        print(
            f"cpu_per_req {config:10} {statistics.fmean(cpu[config]):8.1f} µs, "
            f"{statistics.fmean(samples[config]):7.0f} samples per repetition: overhead "
            f"{math.expm1(mean):+.1%} (95% CI {math.expm1(mean - half):+.1%}.."
            f"{math.expm1(mean + half):+.1%}) over {n} pairs"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=("python", "nginx", "node"), default="python")
    parser.add_argument("--rates", default="99,997,1999", help="Hz, comma-separated")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
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
            env = profile_env({}, catalog.get(args.target).env)
            target = stack.enter_context(ContainerTarget(catalog, args.target, env=env))
            path = "/hello" if args.target == "nginx" else "/quicksort"
            kind = HttpRequests(Workload(path=path), user_class="lean")
        print(f"load average before: {loadavg()}", flush=True)
        configs = ["plain", *(f"{r} Hz" for r in rates)]
        cpu: dict[str, list[float]] = {c: [] for c in configs}
        samples: dict[str, list[int]] = {c: [] for c in configs}
        tools: set[str] = set()
        for index in range(args.pairs):
            turn = index % len(configs)
            for config in configs[turn:] + configs[:turn]:  # the order rotates every pair
                measure = partial(
                    run_repetition, target, kind, plan, index + 1, monitor_factory=sampling_monitor
                )
                if config == "plain":
                    run = measure()
                else:
                    profiler = profiled(int(config.split()[0]))
                    monitors = profiler.monitors(sampling_monitor)
                    run = profiler.repetition("B", partial(measure, monitor_factory=monitors))
                    for capture in profiler.captures["B"]:
                        if isinstance(capture, str):
                            print(f"no profile: {capture}")
                            return 1
                        tools.update(capture.tools)
                        samples[config].append(capture.samples)
                if run.cpu_per_req_us is None:
                    print(f"pair {index + 1} {config}: no CPU measured")
                    return 1
                cpu[config].append(run.cpu_per_req_us)
                print(
                    f"pair {index + 1} {config:8}: {run.rps:8.0f} req/s  "
                    f"{run.cpu_per_req_us:8.1f} µs/req",
                    flush=True,
                )
        print(f"profiler: {', '.join(sorted(tools)) or '-'}; target {args.target}")
        summary(configs, cpu, samples)
        print(f"load average after: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
