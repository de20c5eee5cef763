"""``webperf noise TARGET``: how noisy is a target on this machine, and what can a gate
see through that noise?

An A/A measurement through the real loop: a one-test project in a temporary directory,
run by pytest with ``--webperf-repeat=N --webperf-restart-every=R`` and read back from
``--webperf-json``, so the figures are what a user's test gets. From the repetitions
(``R`` on each of ``N / R`` process instances) it separates, per metric, on the log
scale (a one-way analysis of variance):

* the **per-run spread**: the CV between repetitions on one instance (pooled);
* the **instance spread**: the CV of an instance's true level, what two copies of the
  same server differ by for as long as they live (memory layout, hash seed, ASLR).

and projects the A/B gate (``measurement/pairs.py``): a pair is one repetition of each side, so one
pair's log ratio varies by ``2 * per_run^2``, and both sides' instance biases add
``2 * instance^2`` to every pair that shares them. With a restart every pair
(``--webperf-restart-every=1``) the units of evidence are the pairs; never restarted,
the instance bias is in every pair alike and in no interval, a false alarm the gate
cannot see (reported as ``unseen``). The detectable regression is
``ratio.detectable_change`` at the level the gate uses when it has ``n`` pairs: it
looks after every pair from its minimum on, each look at half the previous level
(``decide.evaluate``), and at a single look (a fixed number of pairs) for comparison.

Plain Python: the pytest run is a subprocess, like a user's.
"""

from __future__ import annotations

import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_webperf.errors import WebperfError
from pytest_webperf.gate.metrics import METRICS
from pytest_webperf.gate.outcome import POWER
from pytest_webperf.models.measurement import Measurement
from pytest_webperf.report.json_report import measurements, read_report
from pytest_webperf.stats import ratio as stats

NOISE_METRICS = ("rps", "cpu_per_req")
HORIZONS_S = (30.0, 60.0, 120.0)
ONE_SIDED = 0.025  # the gate's one-sided level before looks are counted (95 % confidence)
TEST = """
def test_noise(webperf):
    target = webperf.server({name!r})
    webperf.http(target, path={path!r})
"""


class NoiseError(WebperfError):
    """The A/A run could not be made or read."""


@dataclass(frozen=True)
class Spread:
    """One metric's noise: relative standard deviations (log scale, ~ CV)."""

    metric: str
    mean: float
    per_run: float  # between repetitions on one instance, pooled over instances
    instance: float  # of an instance's level, beyond what per_run explains
    runs: int
    instances: int


def instances_of(runs: int, restart_every: int) -> list[int]:
    """Which instance each repetition ran on (``restart_every`` 0: one instance)."""
    return [i // restart_every if restart_every else 0 for i in range(runs)]


def spread(metric: str, values: Sequence[float], instances: Sequence[int]) -> Spread:
    """Per-run and instance spread of positive ``values`` grouped by ``instances``."""
    if len(values) != len(instances) or not values or min(values) <= 0:
        raise ValueError("one instance per value, positive values")
    groups: dict[int, list[float]] = {}
    for value, instance in zip(values, instances, strict=True):
        groups.setdefault(instance, []).append(math.log(value))
    within_df = sum(len(g) - 1 for g in groups.values())
    within = (
        math.fsum(stats.variance(g) * (len(g) - 1) for g in groups.values()) / within_df
        if within_df
        else 0.0
    )
    means = [stats.mean(g) for g in groups.values()]
    per_instance = len(values) / len(groups)
    # Var(instance mean) = instance^2 + per_run^2 / runs per instance; clamp what
    # chance pushes below zero
    level = max(0.0, stats.variance(means) - within / per_instance) if len(means) > 1 else 0.0
    return Spread(
        metric,
        stats.mean(values),
        math.sqrt(within),
        math.sqrt(level),
        len(values),
        len(groups),
    )


def pairs_in(seconds: float, pair_s: float) -> int:
    """How many whole pairs fit in ``seconds`` of measuring."""
    if pair_s <= 0:
        raise ValueError("a pair takes some time")
    return int(seconds // pair_s)


@dataclass(frozen=True)
class Projection:
    pairs: int
    detectable: float | None  # stated by the gate at that many pairs (None: < 2 units)
    unseen: float  # sd of the instance bias no interval covers (never restarted)


def project(
    noise: Spread, pairs: int, *, restart_every: int, min_pairs: int | None = None
) -> Projection:
    """What the A/B gate states as detectable after ``pairs`` pairs. ``min_pairs`` None:
    one look at that many pairs; else the gate's looks, every pair from ``min_pairs``."""
    run_var, instance_var = noise.per_run**2, noise.instance**2
    if restart_every:
        units = math.ceil(pairs / restart_every)
        per_unit = min(restart_every, pairs) if units else 1
        unit_var = 2 * instance_var + 2 * run_var / per_unit
        unseen = 0.0
    else:  # one instance on each side: the pairs are the units, the bias is in all of them
        units, unit_var = pairs, 2 * run_var
        unseen = math.sqrt(2 * instance_var)
    looks = 1 if min_pairs is None else max(1, pairs - min_pairs + 1)
    if units < 2:
        return Projection(pairs, None, unseen)
    se = math.sqrt(unit_var / units)
    alpha = ONE_SIDED / 2**looks
    return Projection(
        pairs, stats.detectable_change(se, units - 1, alpha=alpha, power=POWER), unseen
    )


# --- the A/A run ----------------------------------------------------------------------------


@dataclass(frozen=True)
class NoiseRun:
    server: str
    path: str
    concurrency: int
    duration_s: float
    warmup_s: float
    repeat: int
    restart_every: int
    servers: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        if self.restart_every < 2 or self.repeat < 2 * self.restart_every:
            raise NoiseError(
                f"--repeat {self.repeat} --restart-every {self.restart_every}: the spreads "
                "need 2 or more repetitions on each of 2 or more instances (e.g. --repeat 8 "
                "--restart-every 2)"
            )


@dataclass(frozen=True)
class Measured:
    run: NoiseRun
    measurement: Measurement
    wall_s: float

    @property
    def repetition_s(self) -> float:
        """Seconds one repetition took, everything included (start-up, restarts)."""
        return self.wall_s / max(1, len(self.measurement.runs))

    def by_instance(self) -> dict[str, str]:
        """Each metric's values, instance by instance: ``[4810 4702] [4655 4790]``."""
        instances = instances_of(len(self.measurement.runs), self.run.restart_every)
        shown = {}
        for name in NOISE_METRICS:
            groups: dict[int, list[str]] = {}
            for run, instance in zip(self.measurement.runs, instances, strict=True):
                value = METRICS[name].per_run(run)
                groups.setdefault(instance, []).append("-" if value is None else f"{value:.4g}")
            shown[name] = " ".join(f"[{' '.join(g)}]" for g in groups.values())
        return shown

    def spreads(self) -> list[Spread]:
        instances = instances_of(len(self.measurement.runs), self.run.restart_every)
        found = []
        for name in NOISE_METRICS:
            per_run = METRICS[name].per_run
            values = [per_run(r) for r in self.measurement.runs]
            if all(v is not None and v > 0 for v in values):
                found.append(spread(name, [float(v) for v in values if v is not None], instances))
        return found


def measure(run: NoiseRun) -> Measured:
    """Run the A/A test once through pytest; its measurement and wall time."""
    with tempfile.TemporaryDirectory(prefix="webperf-noise-") as tmp:
        project = Path(tmp)
        (project / "pytest.ini").write_text("[pytest]\n")
        (project / "test_noise.py").write_text(TEST.format(name=run.server, path=run.path))
        out = project / "noise.json"
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:locust",
            *(f"--webperf-servers={d}" for d in run.servers),
            f"--webperf-concurrency={run.concurrency}",
            f"--webperf-duration={run.duration_s}s",
            f"--webperf-warmup={run.warmup_s}s",
            f"--webperf-repeat={run.repeat}",
            f"--webperf-restart-every={run.restart_every}",
            f"--webperf-baseline-dir={project / 'baselines'}",
            f"--webperf-json={out}",
        ]
        started = time.monotonic()
        done = subprocess.run(command, cwd=project, capture_output=True, text=True, check=False)
        wall = time.monotonic() - started
        if not out.is_file():
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
            raise NoiseError(
                f"the A/A run of {run.server} failed (exit {done.returncode}):\n{tail}"
            )
        (measured,) = measurements(read_report(out))
    if len(measured.runs) < 2:
        raise NoiseError(f"{run.server}: fewer than 2 repetitions measured")
    return Measured(run, measured, wall)


# --- the report -----------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def lines(measured: Measured, *, min_pairs: int) -> list[str]:
    run = measured.run
    pair_s = 2 * measured.repetition_s
    spreads = measured.spreads()
    out = [
        f"webperf noise: {run.server} GET {run.path}, {run.concurrency} users, {run.repeat} "
        f"repetitions of {run.duration_s:g}s (+{run.warmup_s:g}s warm-up) on "
        f"{len(set(instances_of(run.repeat, run.restart_every)))} instance(s), "
        f"{measured.wall_s:.0f}s",
        "",
        f"{'metric':12} {'mean':>10} {'per-run CV':>11} {'instance CV':>12}",
    ]
    for s in spreads:
        out.append(f"{s.metric:12} {s.mean:10.4g} {_pct(s.per_run):>11} {_pct(s.instance):>12}")
    out.append("")
    out += [f"{name:12} by instance: {text}" for name, text in measured.by_instance().items()]
    out += [
        "",
        f"A/B gate (one pair = 2 repetitions = {pair_s:.1f}s here, restarts included): the "
        f"regression it could detect ({POWER:.0%} power)",
        f"{'metric':12} {'restarts':22} " + " ".join(f"{f'{h:g}s':>14}" for h in HORIZONS_S),
    ]
    schemes = (
        ("every pair, one look", 1, None),
        ("every pair, as gated", 1, min_pairs),
        ("never, as gated", 0, min_pairs),
    )
    for s in spreads:
        for label, restart_every, looks_from in schemes:
            cells = []
            for horizon in HORIZONS_S:
                p = project(
                    s, pairs_in(horizon, pair_s), restart_every=restart_every, min_pairs=looks_from
                )
                cells.append(f"{_pct(p.detectable)} ({p.pairs}p)")
            out.append(f"{s.metric:12} {label:22} " + " ".join(f"{c:>14}" for c in cells))
    unseen = [f"{s.metric} {_pct(math.sqrt(2) * s.instance)}" for s in spreads]
    out += [
        "",
        "as gated: the gate looks after every pair from its minimum "
        f"({min_pairs}), each look at half the level of the one before",
        "never restarted, the two instances' bias is in every pair and in no interval: sd "
        + ", ".join(unseen),
    ]
    return out
