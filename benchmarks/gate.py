"""How good are the regression gates? False alarms and detection of both, measured
through pytest on the same machine in one run.

    .venv/bin/python benchmarks/gate.py [--mode stored,ab] [--server costly|pywork]
                                        [--slowdowns 1.0,1.05,1.1] [-k 8]
                                        [--restart-every 1,0] [--settings 3x3s]
                                        [--warmup 1s] [--concurrency 8] [--budget 30s]
                                        [--cost N] [--compare-fail SPEC]
                                        [--contention on,off] [--background 1x50%]
                                        [--out gate-results.json]

Two gates, each a separate ``pytest`` subprocess per trial, read back from
``--webperf-json``: what a user's CI job gets.

* ``stored``: per row (setting x restart-every) a one-test project saves a baseline
  with ``--webperf-save``, then every trial runs the server with its cost knob
  (COST_US for ``costly``, WORK for ``pywork``) times the slowdown and is compared with
  that baseline. Each trial is also saved, to a scratch copy of the baseline directory,
  so its whole ``Measurement`` can be re-decided per default check.
* ``ab``: every trial makes a throwaway git repository holding the server directory
  and the test, commits it, sets the knob times the slowdown in ``server.toml`` and
  commits again, and runs ``pytest --webperf-against=HEAD~1``; a slowdown of 1.0 is an
  A/A trial, ``--webperf-against=HEAD --webperf-against-always`` (the same code on both
  sides). ``--budget`` is ``--webperf-against-budget``; the setting's repetitions are
  the minimum number of pairs.

Under other load (``--background NxDUTY``: N processes each busy DUTY of the time, in
bursts of random length, mean ``--burst``, so a pair's two sides see different load, as
a CI neighbour's compile steps do) the contention rule can be measured: ``--contention
on,off`` runs every trial kind with the plugin's rule (rps and latency not judged when
other processes used more than ``metrics.CONTENDED_CPU_PERCENT`` of a core) and
without it (a ``conftest.py`` in the trial's project lifts the limit), alternated.

Reported per mode, setting and restart-every: false alarms over the A/A trials and
detections per slowdown (verdict ``regression``), with exact Clopper-Pearson 95 %
intervals (with K = 8, 0 of 8 only says the rate is below 37 %: read small K as "none
seen", not "never"); how many trials ended ``undecided``; wall time per test; the
median ``detectable`` each check stated beside the real slowdown, and the median
change it measured. Trial kinds are alternated (the order of the slowdowns rotates
every round), so drift on the machine hits them alike. The machine is shared: the
load average is printed before and after each row.
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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytest_webperf.gate import decide, grammar
from pytest_webperf.gate.baseline import BaselineStore
from pytest_webperf.models.measurement import Measurement
from pytest_webperf.values import parse_duration

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ROOT / "tests" / "servers"
MACHINE = "gate-bench"
NAME = "GET /work"
TEST_FILE = "test_gate_target.py"
KNOB_ENV = "GATE_BENCH_KNOB"
KNOBS = {"costly": ("COST_US", 1000), "pywork": ("WORK", 120)}  # env var, default base
STORED_TEST = """
import os


def test_work(webperf):
    target = webperf.server({server!r}, env={{{knob!r}: os.environ["{env}"]}})
    webperf.http(target, path="/work")
"""
AB_TEST = """
def test_work(webperf):
    target = webperf.server({server!r})
    webperf.http(target, path="/work")
"""
JUDGED = ("rps", "cpu_per_req", "p95")  # the relative default checks, in the summary
# --contention off: the trial's project lifts the rule's limit (gate/outcome.py reads it per call)
RULE_OFF = """
import math

from pytest_webperf.gate import outcome

outcome.CONTENDED_CPU_PERCENT = math.inf
"""
# other load: a process busy DUTY of the time in bursts of random length (exponential,
# mean BURST seconds), idle in between; argv: duty burst
BURNER = """
import random, sys, time

duty, burst = float(sys.argv[1]), float(sys.argv[2])
rng = random.Random()
while True:
    busy = rng.expovariate(1 / burst)
    end = time.monotonic() + busy
    while time.monotonic() < end:
        pass
    time.sleep(busy * (1 - duty) / duty)
"""


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
class Trial:
    slowdown: float  # 1.0: A/A (or unchanged against the stored baseline)
    knob: int
    status: str
    reasons: list[str]
    wall_s: float
    checks: dict[str, dict[str, Any]]  # metric -> outcome, change, detectable, ...
    fired: dict[str, bool] = field(default_factory=dict)  # stored: per single check
    pairs: int | None = None  # ab: pairs measured
    stopped: str = ""
    rule: str = "on"  # the contention rule: "on" (the plugin's) or "off" (lifted)
    busy: float | None = None  # other processes' CPU, % of a core (the worse side)


@dataclass
class Row:
    mode: str
    setting: Setting
    restart_every: int
    trials: list[Trial] = field(default_factory=list)
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    baseline_wall_s: float | None = None

    def __str__(self) -> str:
        return f"{self.mode} {self.setting} restart-every {self.restart_every}"


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


def pytest_command(setting: Setting, args: argparse.Namespace, restart_every: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:locust",
        "-p",
        "no:cacheprovider",
        f"--webperf-concurrency={args.concurrency}",
        f"--webperf-duration={setting.duration_s}s",
        f"--webperf-warmup={args.warmup}s",
        f"--webperf-repeat={setting.repeat}",
        f"--webperf-restart-every={restart_every}",
        f"--webperf-machine-id={MACHINE}",
        *([f"--webperf-compare-fail={args.compare_fail}"] if args.compare_fail else []),
    ]


class TrialFailed(Exception):
    """A trial's pytest run that measured nothing (a server that did not start under
    load, ...): recorded as ``errored`` with the end of its output, not a crash."""

    def __init__(self, output: str, wall_s: float) -> None:
        super().__init__(output)
        self.output, self.wall_s = output, wall_s


def run_pytest(
    command: Sequence[str], cwd: Path, report: Path, env: dict[str, str] | None = None
) -> tuple[dict[str, Any], float]:
    """One pytest run; (its test's JSON entry, wall seconds)."""
    started = time.monotonic()
    done = subprocess.run(
        [*command, f"--webperf-json={report}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **(env or {})},
        check=False,
    )
    wall = time.monotonic() - started
    if done.returncode not in (0, 1) or not report.is_file():
        raise SystemExit(
            f"pytest failed to run (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
    entries = json.loads(report.read_text())["tests"]
    if len(entries) != 1:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise TrialFailed(
            f"pytest exit {done.returncode}, {len(entries)} measurements:\n{tail}", wall
        )
    return entries[0], wall


def judged_checks(verdict: dict[str, Any]) -> dict[str, dict[str, Any]]:
    keys = ("outcome", "change", "detectable", "threshold", "low", "high")
    return {c["metric"]: {k: c.get(k) for k in keys} for c in verdict["checks"]}


def busiest(entry: dict[str, Any]) -> float | None:
    """Other processes' CPU (% of a core) of the busier side, as the rule reads it: the
    mean over a side's repetitions (``metrics.foreign_cpu``)."""
    sides = [entry.get("repetitions") or [], entry.get("base_repetitions") or []]
    found = [
        statistics.fmean(values)
        for runs in sides
        if (values := [v for r in runs if (v := r.get("foreign_cpu_percent")) is not None])
    ]
    return max(found) if found else None


def trial_of(
    entry: dict[str, Any], slowdown: float, knob: int, wall: float, rule: str = "on"
) -> Trial:
    verdict = entry["verdict"]
    against = entry.get("against") or {}
    return Trial(
        slowdown,
        knob,
        verdict["status"],
        list(verdict["reasons"]),
        wall,
        judged_checks(verdict),
        pairs=against.get("pairs"),
        stopped=against.get("stopped", ""),
        rule=rule,
        busy=busiest(entry),
    )


# --- the stored-baseline gate ---------------------------------------------------------------


def stored(baseline_dir: Path, nodeid: str) -> Measurement:
    found = BaselineStore(baseline_dir, MACHINE).load(nodeid, NAME)
    if found is None:
        raise SystemExit(f"no stored measurement of {nodeid} under {baseline_dir}")
    return found


class StoredGate:
    """A baseline saved once per row; every trial compared with it."""

    def __init__(self, row: Row, args: argparse.Namespace, base: Path) -> None:
        self.args, self.row = args, row
        self.project = base / f"stored-{row.setting}-r{row.restart_every}"
        self.project.mkdir()
        knob = KNOBS[args.server][0]
        (self.project / TEST_FILE).write_text(
            STORED_TEST.format(server=args.server, knob=knob, env=KNOB_ENV)
        )
        self.command = [
            *pytest_command(row.setting, args, row.restart_every),
            f"--webperf-servers={SERVERS}",
            "--webperf-save",
        ]
        self.reference_dir = self.project / "reference"
        _, row.baseline_wall_s = self.run(self.reference_dir, args.cost, "baseline.json")
        nodeid = f"{TEST_FILE}::test_work[c{args.concurrency}]"
        self.reference = stored(self.reference_dir, nodeid)
        self.count = 0

    def run(self, baseline_dir: Path, knob: int, report: str) -> tuple[dict[str, Any], float]:
        return run_pytest(
            [*self.command, f"--webperf-baseline-dir={baseline_dir}"],
            self.project,
            self.project / report,
            {KNOB_ENV: str(knob)},
        )

    def trial(self, slowdown: float, knob: int, rule: str = "on") -> Trial:
        del rule  # always "on": parse_args refuses --contention off with --mode stored
        self.count += 1
        scratch = self.project / f"trial-{self.count}"
        shutil.copytree(self.reference_dir, scratch / "bl")
        entry, wall = self.run(scratch / "bl", knob, f"trial-{self.count}.json")
        current = stored(scratch / "bl", self.reference.nodeid)  # as the save stored it
        found = trial_of(entry, slowdown, knob, wall)
        found.fired = {
            spec: decide.decide(current, self.reference, grammar.parse_checks(spec)).failed
            for spec in single_checks(self.args)
        }
        return found


# --- the A/B gate ---------------------------------------------------------------------------


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=gate", "-c", "user.email=gate@bench", *args],
        capture_output=True,
        check=True,
    )


def set_knob(toml: Path, name: str, value: int) -> None:
    """``NAME = "..."`` in the server's [env] table, set to ``value``."""
    text = toml.read_text()
    start = text.index(f'{name} = "')
    end = text.index('"', start + len(name) + 4)
    toml.write_text(f'{text[:start]}{name} = "{value}{text[end:]}')


class AbGate:
    """A throwaway repository per trial: the base committed, the change committed on it."""

    def __init__(self, row: Row, args: argparse.Namespace, base: Path) -> None:
        self.args, self.row = args, row
        self.directory = base / f"ab-{row.setting}-r{row.restart_every}"
        self.directory.mkdir()
        self.command = [
            *pytest_command(row.setting, args, row.restart_every),
            f"--webperf-against-budget={args.budget}s",
        ]
        self.count = 0

    def trial(self, slowdown: float, knob: int, rule: str = "on") -> Trial:
        self.count += 1
        server, (name, base_knob) = self.args.server, (KNOBS[self.args.server][0], self.args.cost)
        repo = self.directory / f"trial-{self.count}"
        shutil.copytree(SERVERS / server, repo / "servers" / server)
        toml = repo / "servers" / server / "server.toml"
        set_knob(toml, name, base_knob)
        (repo / TEST_FILE).write_text(AB_TEST.format(server=server))
        (repo / "pytest.ini").write_text("[pytest]\n")
        if rule == "off":
            (repo / "conftest.py").write_text(RULE_OFF)
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "base")
        if knob == base_knob:
            against = ["--webperf-against=HEAD", "--webperf-against-always"]  # A/A
        else:
            set_knob(toml, name, knob)
            git(repo, "commit", "-q", "-am", f"{name} x {slowdown:g}")
            against = ["--webperf-against=HEAD~1"]
        entry, wall = run_pytest([*self.command, *against], repo, repo / "report.json")
        return trial_of(entry, slowdown, knob, wall, rule)


# --- the rows -------------------------------------------------------------------------------


def run_row(
    row: Row, args: argparse.Namespace, base: Path, saved: Callable[[], None] = lambda: None
) -> Row:
    """Every trial of a row; ``saved`` is called after each (the JSON so far)."""
    with Background(args.background, args.burst):
        return _run_row(row, args, base, saved)


def _run_row(row: Row, args: argparse.Namespace, base: Path, saved: Callable[[], None]) -> Row:
    row.load_before = os.getloadavg()
    gate: StoredGate | AbGate = (
        StoredGate(row, args, base) if row.mode == "stored" else AbGate(row, args, base)
    )
    kinds = [(s, rule) for s in args.slowdowns for rule in args.contention]
    for i in range(args.k):
        shift = i % len(kinds)  # rotate: every kind runs early and late alike
        for slowdown, rule in kinds[shift:] + kinds[:shift]:
            knob = round(args.cost * slowdown)
            try:
                trial = gate.trial(slowdown, knob, rule)
            except TrialFailed as failed:
                trial = Trial(
                    slowdown, knob, "errored", [failed.output], failed.wall_s, {}, rule=rule
                )
                print(failed.output, flush=True)
            row.trials.append(trial)
            saved()
            shown = "  ".join(
                f"{m} {_pct(c['change'])} (>= {_size(c['detectable'])})"
                for m, c in trial.checks.items()
                if m in JUDGED
            )
            pairs = "" if trial.pairs is None else f" {trial.pairs} pairs"
            busy = "" if trial.busy is None else f" other {trial.busy:.0f}%"
            print(
                f"  {row} x{slowdown:.2f} rule {rule} #{i + 1}: {trial.status:15} {shown}  "
                f"{trial.wall_s:.0f}s{pairs}{busy}  load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    row.load_after = os.getloadavg()
    return row


class Background:
    """``--background NxDUTY``: N burner processes for the length of a row, each in a
    session of its own and killed whole at the end (Ctrl-C included)."""

    def __init__(self, spec: tuple[int, float] | None, burst: float) -> None:
        self.spec, self.burst = spec, burst
        self.processes: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Background:
        if self.spec is not None:
            count, duty = self.spec
            self.processes = [
                subprocess.Popen(
                    [sys.executable, "-c", BURNER, str(duty), str(self.burst)],
                    start_new_session=True,
                )
                for _ in range(count)
            ]
        return self

    def __exit__(self, *exc: object) -> None:
        for process in self.processes:
            process.kill()
            process.wait()


def parse_background(text: str) -> tuple[int, float] | None:
    """``1x50%`` -> (1, 0.5); ``off`` -> None."""
    if text in ("", "off"):
        return None
    count, _, duty = text.partition("x")
    value = float(duty.removesuffix("%")) / 100
    if int(count) < 1 or not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text}: NxDUTY, e.g. 1x50%")
    return int(count), value


# --- report ---------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:+.1%}"


def _size(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def rate(trials: Sequence[Trial], flagged: Callable[[Trial], bool]) -> str:
    k, n = sum(1 for t in trials if flagged(t)), len(trials)
    if not n:
        return "-"
    low, high = clopper_pearson(k, n)
    return f"{k}/{n} = {k / n:.0%} (95% CI {low:.0%}..{high:.0%})"


def median_of(trials: Sequence[Trial], metric: str, key: str) -> str:
    values = [
        t.checks[metric][key]
        for t in trials
        if metric in t.checks and t.checks[metric].get(key) is not None
    ]
    if not values:
        return "-"
    median = statistics.median(values)
    return f"{median:.1%}" if key == "detectable" else f"{median:+.1%}"


def summary(row: Row, args: argparse.Namespace) -> list[str]:
    knob = KNOBS[args.server][0]
    walls = [t.wall_s for t in row.trials]
    saved = "" if row.baseline_wall_s is None else f" (baseline save {row.baseline_wall_s:.0f}s)"
    budget = f", budget {args.budget:g}s" if row.mode == "ab" else ""
    lines = [
        f"{row}: {args.server} {knob} {args.cost}, warm-up {args.warmup:g}s, "
        f"{args.concurrency} users{budget}, checks {args.compare_fail or 'the defaults'}",
        f"  load average before {row.load_before[0]:.1f}, after {row.load_after[0]:.1f}",
        f"  wall time per test: median {statistics.median(walls):.0f}s, max {max(walls):.0f}s"
        + saved,
        f"  undecided: {rate(row.trials, lambda t: t.status == 'undecided')}",
        f"  errored (measured nothing): {rate(row.trials, lambda t: t.status == 'errored')}",
    ]
    if args.background is not None:
        count, duty = args.background
        lines.append(f"  other load: {count} process(es) busy {duty:.0%}, bursts {args.burst:g}s")
    for slowdown, rule in [(s, r) for s in args.slowdowns for r in args.contention]:
        trials = [t for t in row.trials if t.slowdown == slowdown and t.rule == rule]
        what = "false alarms (A/A)" if slowdown == 1.0 else f"detected {slowdown - 1:+.0%}"
        if len(args.contention) > 1:
            what += f", rule {rule}"
        lines.append(f"  x{slowdown:<5.2f} {what:19} {rate(trials, _regression)}")
        lines.append(
            f"         undecided {rate(trials, lambda t: t.status == 'undecided')}, "
            f"a check contended {rate(trials, _contended)}"
        )
        for metric in ("rps", "p95"):  # the checks the rule can hold back
            lines.append(
                f"         {metric} check failed {rate(trials, _failed(metric))}, "
                f"contended {rate(trials, _outcome(metric, 'contended'))}"
            )
        pairs = [t.pairs for t in trials if t.pairs is not None]
        if pairs:
            lines.append(f"         pairs median {statistics.median(pairs):g}, max {max(pairs)}")
        for metric in JUDGED:
            lines.append(
                f"         {metric:12} change median {median_of(trials, metric, 'change'):>7}, "
                f"stated detectable median {median_of(trials, metric, 'detectable'):>7} "
                f"(real {slowdown - 1:+.0%})"
            )
    if row.mode == "stored":
        lines.append("  per check (re-decided from the stored runs): regression per slowdown")
        for spec in single_checks(args):
            cells = [
                f"x{s:g} {rate([t for t in row.trials if t.slowdown == s], _fired(spec))}"
                for s in args.slowdowns
            ]
            lines.append(f"    {spec:16} " + " | ".join(cells))
    return lines


def single_checks(args: argparse.Namespace) -> list[str]:
    """The checks every trial is judged by (the defaults, or --compare-fail), one by one."""
    chosen = (
        grammar.parse_checks(args.compare_fail) if args.compare_fail else grammar.DEFAULT_CHECKS
    )
    return [str(c) for c in chosen]


def _regression(trial: Trial) -> bool:
    return trial.status == "regression"


def _failed(metric: str) -> Callable[[Trial], bool]:
    return _outcome(metric, "fail")


def _outcome(metric: str, outcome: str) -> Callable[[Trial], bool]:
    return lambda trial: trial.checks.get(metric, {}).get("outcome") == outcome


def _contended(trial: Trial) -> bool:
    return any(c.get("outcome") == "contended" for c in trial.checks.values())


def _fired(spec: str) -> Callable[[Trial], bool]:
    return lambda trial: trial.fired.get(spec, False)


def to_json(rows: Sequence[Row], args: argparse.Namespace) -> dict[str, Any]:
    return {
        "args": {k: v for k, v in vars(args).items() if k != "settings"},
        "settings": [str(s) for s in args.settings],
        "rows": [
            {
                "mode": r.mode,
                "setting": str(r.setting),
                "restart_every": r.restart_every,
                "load_before": r.load_before,
                "load_after": r.load_after,
                "baseline_wall_s": r.baseline_wall_s,
                "trials": [asdict(t) for t in r.trials],
            }
            for r in rows
        ],
    }


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",")]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", default="stored,ab", help="stored, ab or both (default)")
    parser.add_argument("--server", choices=sorted(KNOBS), default="costly")
    parser.add_argument("--cost", type=int, help="the base's knob (COST_US 1000, WORK 120)")
    parser.add_argument(
        "--slowdowns", type=_floats, default=[1.0, 1.05, 1.1], help="knob factors; 1.0 = A/A"
    )
    parser.add_argument("-k", type=int, default=8, help="trials per slowdown and row")
    parser.add_argument(
        "--restart-every",
        default="1",
        help="comma-separated --webperf-restart-every values, a row each (e.g. 1,0)",
    )
    parser.add_argument(
        "--settings", default="3x3s", help="comma-separated REPEATxDURATION (default 3x3s)"
    )
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--warmup", type=parse_duration, default=1.0)
    parser.add_argument(
        "--budget", type=parse_duration, default=30.0, help="--webperf-against-budget (ab)"
    )
    parser.add_argument(
        "--compare-fail",
        default="",
        help="--webperf-compare-fail for every trial (default: the plugin's default checks)",
    )
    parser.add_argument(
        "--contention",
        default="on",
        help="the contention rule: on (the plugin's), off, or on,off (alternated; ab only)",
    )
    parser.add_argument(
        "--background",
        type=parse_background,
        default=None,
        help="other load for the length of each row: NxDUTY, e.g. 1x50%% (default none)",
    )
    parser.add_argument(
        "--burst", type=parse_duration, default=1.0, help="--background bursts' mean length"
    )
    parser.add_argument("--out", type=Path, default=None, help="also write the trials as JSON")
    args = parser.parse_args(argv)
    args.mode = args.mode.split(",")
    if not set(args.mode) <= {"stored", "ab"}:
        parser.error(f"--mode {','.join(args.mode)}: stored, ab or stored,ab")
    args.contention = args.contention.split(",")
    if not set(args.contention) <= {"on", "off"}:
        parser.error(f"--contention {','.join(args.contention)}: on, off or on,off")
    if "off" in args.contention and "stored" in args.mode:
        parser.error("--contention off is measured in A/B mode: add --mode ab")
    if 1.0 not in args.slowdowns:
        parser.error("--slowdowns must include 1.0: false alarms need A/A trials")
    args.cost = args.cost or KNOBS[args.server][1]
    args.restart_every = [int(x) for x in args.restart_every.split(",")]
    args.settings = [Setting.parse(s) for s in args.settings.split(",")]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="webperf-gate-") as tmp:
        for setting in args.settings:
            for restart_every in args.restart_every:
                for mode in args.mode:
                    row = Row(mode, setting, restart_every)
                    print(f"== {row}: {args.k} x {','.join(map(str, args.slowdowns))}", flush=True)
                    rows.append(row)
                    run_row(row, args, Path(tmp), lambda: save(rows, args))
                    print("\n".join(summary(row, args)), flush=True)
    print("\n== summary")
    for row in rows:
        print("\n".join(summary(row, args)))
    save(rows, args)
    return 0


def save(rows: Sequence[Row], args: argparse.Namespace) -> None:
    """The trials so far to ``--out`` (after every trial: a long run cut short keeps them)."""
    if args.out is not None:
        temporary = args.out.with_name(args.out.name + ".tmp")
        temporary.write_text(json.dumps(to_json(rows, args), indent=1, default=str) + "\n")
        temporary.replace(args.out)


if __name__ == "__main__":
    sys.exit(main())
