"""How good is the regression gate? False alarms and detection, measured through pytest.

    .venv/bin/python benchmarks/gate.py [--settings 3x5s,5x3s] [-k 8] [--cost 1000]
                                        [--slower 1.1] [--concurrency 8] [--warmup 2s]
                                        [--out gate-results.json]

For each setting (repetitions x duration) the script writes a one-test project that
loads the test-only ``costly`` server (tests/servers/costly: COST_US units of CPU
work per request, never a sleep), runs pytest once with ``--webperf-save`` to store a
baseline, then K times unchanged and K times slowed (COST_US x ``--slower``),
alternating, each a separate ``pytest`` subprocess compared with that baseline under
the default checks, and reads each verdict from ``--webperf-json``: what a user's CI
job gets. Reported per setting:

* false-alarm rate: unchanged runs whose verdict is ``regression``;
* detection rate: slowed runs whose verdict is ``regression``;
* both with exact (Clopper-Pearson) 95 % intervals: with K = 8, 0 of 8 only says
  the rate is below 37 %, so read small-K figures as "no alarm seen", not "never";
* which default check fired, from re-deciding each stored run with ``compare.decide``
  per check (each run is also saved, to a scratch copy of the baseline directory, so
  its whole ``Measurement`` can be read back), and the spread of the rps and
  cpu_per_req changes;
* wall time per pytest run (start-up, container, warm-up and repetitions).

The machine is shared: the load average is printed before and after each setting.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_webperf import checks, compare, metrics
from pytest_webperf.baseline import BaselineStore
from pytest_webperf.config import parse_duration
from pytest_webperf.models import Measurement

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ROOT / "tests" / "servers"
MACHINE = "gate-bench"
NODEID_PREFIX = "test_gate_target.py::test_work"
NAME = "GET /work"
COST_ENV = "GATE_BENCH_COST_US"
TARGET = f"""
import os


def test_work(webperf):
    target = webperf.server("costly", env={{"COST_US": os.environ["{COST_ENV}"]}})
    webperf.http(target, path="/work")
"""
SINGLE_CHECKS = [str(c) for c in checks.DEFAULT_CHECKS]


@dataclass(frozen=True)
class Setting:
    repeat: int
    duration_s: float

    @classmethod
    def parse(cls, text: str) -> Setting:
        repeat, _, duration = text.partition("x")
        return cls(int(repeat), parse_duration(duration))

    def __str__(self) -> str:
        return f"{self.repeat}x{self.duration_s:g}s"


@dataclass
class Run:
    kind: str  # "unchanged" or "slower"
    status: str
    reasons: list[str]
    wall_s: float
    fired: dict[str, bool]  # per single default check, re-decided from the stored run
    rps_change: float
    cpu_change: float | None


@dataclass
class Outcome:
    setting: Setting
    runs: list[Run] = field(default_factory=list)
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    baseline_wall_s: float = 0.0


# --- statistics -----------------------------------------------------------------------------


def _binom_cdf(k: int, n: int, p: float) -> float:
    return math.fsum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval for k successes in n trials (bisection, no scipy)."""
    alpha = (1 - confidence) / 2

    def solve(target: float, cdf_at: int) -> float:
        low, high = 0.0, 1.0
        for _ in range(60):  # P(X <= cdf_at) falls as p rises
            mid = (low + high) / 2
            if _binom_cdf(cdf_at, n, mid) > target:
                low = mid
            else:
                high = mid
        return (low + high) / 2

    lower = 0.0 if k == 0 else solve(1 - alpha, k - 1)
    upper = 1.0 if k == n else solve(alpha, k)
    return lower, upper


# --- one pytest run -------------------------------------------------------------------------


def pytest_run(
    project: Path,
    baseline_dir: Path,
    setting: Setting,
    args: argparse.Namespace,
    cost: int,
    *,
    report: Path,
) -> tuple[dict[str, Any], float]:
    """Run the project's test once, saving into ``baseline_dir``; (verdict, wall s)."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:locust",
        "-p",
        "no:cacheprovider",
        f"--webperf-servers={SERVERS}",
        f"--webperf-concurrency={args.concurrency}",
        f"--webperf-duration={setting.duration_s}s",
        f"--webperf-warmup={args.warmup}s",
        f"--webperf-repeat={setting.repeat}",
        f"--webperf-machine-id={MACHINE}",
        f"--webperf-baseline-dir={baseline_dir}",
        "--webperf-save",
        f"--webperf-json={report}",
    ]
    started = time.monotonic()
    done = subprocess.run(
        command,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, COST_ENV: str(cost)},
        check=False,
    )
    wall = time.monotonic() - started
    if done.returncode not in (0, 1) or not report.is_file():
        raise SystemExit(
            f"pytest failed to run (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
    tests = json.loads(report.read_text())["tests"]
    return tests[0]["verdict"], wall


def stored(baseline_dir: Path, nodeid: str) -> Measurement:
    found = BaselineStore(baseline_dir, MACHINE).load(nodeid, NAME)
    if found is None:
        raise SystemExit(f"no stored measurement of {nodeid} under {baseline_dir}")
    return found


def mean_of(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else None


def change(current: Measurement, reference: Measurement, metric: str) -> float | None:
    per_run = metrics.METRICS[metric].per_run
    now = mean_of([per_run(r) for r in current.runs])
    then = mean_of([per_run(r) for r in reference.runs])
    return None if now is None or then is None or then == 0 else now / then - 1


@dataclass(frozen=True)
class Project:
    """Where a setting's runs happen, and the baseline they are compared with."""

    directory: Path
    reference_dir: Path
    reference: Measurement


def one_run(
    project: Project,
    kind: str,
    cost: int,
    setting: Setting,
    *,
    args: argparse.Namespace,
    index: int,
) -> Run:
    reference, reference_dir = project.reference, project.reference_dir
    scratch = project.directory / f"run-{index}-{kind}"
    shutil.copytree(reference_dir, scratch / "bl")
    verdict, wall = pytest_run(
        project.directory, scratch / "bl", setting, args, cost, report=scratch / "report.json"
    )
    current = stored(scratch / "bl", reference.nodeid)  # this run, as the save stored it
    fired = {
        spec: compare.decide(current, reference, checks.parse_checks(spec)).failed
        for spec in SINGLE_CHECKS
    }
    rps = change(current, reference, "rps")
    return Run(
        kind,
        verdict["status"],
        list(verdict["reasons"]),
        wall,
        fired,
        rps if rps is not None else math.nan,
        change(current, reference, "cpu_per_req"),
    )


def run_setting(setting: Setting, args: argparse.Namespace, base: Path) -> Outcome:
    project = base / f"setting-{setting}"
    project.mkdir()
    (project / "test_gate_target.py").write_text(TARGET)
    outcome = Outcome(setting, load_before=os.getloadavg())
    reference_dir = project / "reference"
    _, outcome.baseline_wall_s = pytest_run(
        project, reference_dir, setting, args, args.cost, report=project / "baseline.json"
    )
    nodeid = f"{NODEID_PREFIX}[c{args.concurrency}]"
    where = Project(project, reference_dir, stored(reference_dir, nodeid))
    slower = round(args.cost * args.slower)
    for i in range(args.k):
        order = [("unchanged", args.cost), ("slower", slower)]
        for kind, cost in order if i % 2 == 0 else order[::-1]:  # alternate: drift hits both
            run = one_run(where, kind, cost, setting, args=args, index=i)
            outcome.runs.append(run)
            cpu = "-" if run.cpu_change is None else f"{run.cpu_change:+.1%}"
            print(
                f"  {setting} {kind:9} #{i + 1}: {run.status:15} rps {run.rps_change:+.1%} "
                f"cpu/req {cpu}  {run.wall_s:.0f}s  load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    outcome.load_after = os.getloadavg()
    return outcome


# --- report ---------------------------------------------------------------------------------


def rate(runs: Sequence[Run], flagged: Any) -> str:
    k, n = sum(1 for r in runs if flagged(r)), len(runs)
    low, high = clopper_pearson(k, n)
    return f"{k}/{n} = {k / n:.0%} (95% CI {low:.0%}..{high:.0%})"


def spread(values: Sequence[float | None]) -> str:
    known = sorted(v for v in values if v is not None and not math.isnan(v))
    if not known:
        return "-"
    return f"{known[0]:+.1%} / {statistics.median(known):+.1%} / {known[-1]:+.1%}"


def summary(outcome: Outcome, args: argparse.Namespace) -> list[str]:
    same = [r for r in outcome.runs if r.kind == "unchanged"]
    slow = [r for r in outcome.runs if r.kind == "slower"]
    walls = [r.wall_s for r in outcome.runs]
    lines = [
        f"setting {outcome.setting} (repeat x duration), warm-up {args.warmup}s, "
        f"{args.concurrency} users, COST_US {args.cost} vs {round(args.cost * args.slower)}",
        f"  load average before {outcome.load_before[0]:.1f}, after {outcome.load_after[0]:.1f}",
        f"  false alarms (default checks): {rate(same, lambda r: r.status == 'regression')}",
        f"  detected {args.slower - 1:.0%} slower: "
        f"{rate(slow, lambda r: r.status == 'regression')}",
        f"  wall time per pytest run: median {statistics.median(walls):.0f}s, "
        f"max {max(walls):.0f}s (baseline save {outcome.baseline_wall_s:.0f}s)",
        "  rps change       min / median / max: unchanged "
        f"{spread([r.rps_change for r in same])}, slower {spread([r.rps_change for r in slow])}",
        "  cpu_per_req chg  min / median / max: unchanged "
        f"{spread([r.cpu_change for r in same])}, slower {spread([r.cpu_change for r in slow])}",
        "  per check (re-decided from the stored runs): false alarms | detections",
    ]
    for spec in SINGLE_CHECKS:
        lines.append(
            f"    {spec:16} {rate(same, lambda r, s=spec: r.fired[s])} | "
            f"{rate(slow, lambda r, s=spec: r.fired[s])}"
        )
    return lines


def to_json(outcomes: Sequence[Outcome], args: argparse.Namespace) -> dict[str, Any]:
    return {
        "args": {k: v for k, v in vars(args).items() if k != "settings"},
        "settings": [
            {
                "setting": str(o.setting),
                "load_before": o.load_before,
                "load_after": o.load_after,
                "baseline_wall_s": o.baseline_wall_s,
                "runs": [vars(r) for r in o.runs],
            }
            for o in outcomes
        ],
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--settings",
        default="3x5s,5x3s",
        help="comma-separated REPEATxDURATION settings (default 3x5s,5x3s)",
    )
    parser.add_argument("-k", type=int, default=8, help="unchanged and slowed runs each")
    parser.add_argument("--cost", type=int, default=1000, help="COST_US of the baseline")
    parser.add_argument("--slower", type=float, default=1.1, help="cost factor of a regression")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--warmup", type=parse_duration, default=2.0)
    parser.add_argument("--out", type=Path, default=None, help="also write the runs as JSON")
    args = parser.parse_args(argv)
    args.settings = [Setting.parse(s) for s in args.settings.split(",")]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="webperf-gate-") as tmp:
        for setting in args.settings:
            print(
                f"== {setting}: baseline, then {args.k} unchanged + {args.k} slower runs",
                flush=True,
            )
            outcomes.append(run_setting(setting, args, Path(tmp)))
            print("\n".join(summary(outcomes[-1], args)), flush=True)
    print("\n== summary")
    for outcome in outcomes:
        print("\n".join(summary(outcome, args)))
    if args.out is not None:
        args.out.write_text(json.dumps(to_json(outcomes, args), indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
