"""The differential profile's test on simulated A/B runs: how often an A/A run names a
function (a false lead), and how often a function made costlier is named (power), for
the sample counts, pairs, instance effects and bursts real runs have.

    .venv/bin/python benchmarks/profile_simulation.py [--trials 500] [--quick]

The model, per repetition (every pair restarts both sides, so each repetition is a
fresh instance):

* ``k`` functions with Zipf costs (``mu_f ~ 1/rank``, 100 µs per request on A);
* an instance effect per function, its cost times ``exp(N(0, sigma_inst))`` (layout,
  hash seed, JIT), and one on the whole CPU, ``exp(N(0, sigma_common))`` (the machine);
* optionally one GC-like function (the 3rd largest) with ``exp(N(0, sigma_gc))``;
* samples ``N ~ Poisson(rate x CPU)`` in bursts of ``L`` on one function;
* the monitor's CPU per request: the true one times ``exp(N(0, sigma_monitor))``: 1 % on
  a quiet machine; 10 % and 25 % as seen here for a lightly loaded server beside 1.5
  cores of other work (an A/B run of ``tests/e2e/test_profile_ab.py``, checksum 3x: the
  pairs' CPU per request changed by -4 %, +29 % and +49 %).

B is A, or A with one function's cost times ``factor``. Methods: the product's test
(``profiling.diff.diff``: shares pooled over the repetitions, moderated dispersion,
scaled by the monitor's paired total refined by the shares' view of it) and the same
scaled by the monitor's total alone. Family alpha 5 %.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_webperf.profiling.diff import Repetition, diff


@dataclass(frozen=True)
class Scenario:
    name: str
    k: int = 17
    pairs: int = 3
    samples: int = 2000  # per side, all pairs together (on A)
    sigma_inst: float = 0.05
    sigma_common: float = 0.03
    sigma_monitor: float = 0.01
    sigma_gc: float = 0.0  # > 0: the 3rd function is GC-like
    burst: int = 1
    changed: int | None = None  # rank (0-based) of the function made costlier
    factor: float = 3.0


def costs(k: int) -> np.ndarray:
    mu = 1.0 / np.arange(1, k + 1)
    return 100.0 * mu / mu.sum()


def repetition(rng: np.random.Generator, mu: np.ndarray, s: Scenario) -> Repetition:
    eff = mu * np.exp(rng.normal(0.0, s.sigma_inst, mu.size))
    if s.sigma_gc > 0:
        eff[2] = mu[2] * np.exp(rng.normal(0.0, s.sigma_gc))
    true_total = float(eff.sum()) * math.exp(rng.normal(0.0, s.sigma_common))
    rate = s.samples / s.pairs / 100.0  # samples per µs of CPU per request on A
    n = int(rng.poisson(rate * true_total))
    counts = s.burst * rng.multinomial(n // s.burst, eff / eff.sum())
    named = {f"f{i:02d}": int(c) for i, c in enumerate(counts) if c > 0}
    return Repetition(named, true_total * math.exp(rng.normal(0.0, s.sigma_monitor)))


METHODS = {"product (cpu and shares)": True, "cpu alone": False}


def run(s: Scenario, trials: int, seed: int) -> dict[str, tuple[float, float]]:
    """Per method: the share of trials naming the changed function (power) and naming
    any other function (false leads)."""
    rng = np.random.default_rng(seed)
    mu_a = costs(s.k)
    mu_b = mu_a.copy()
    if s.changed is not None:
        mu_b[s.changed] *= s.factor
    target = None if s.changed is None else f"f{s.changed:02d}"
    hits = dict.fromkeys(METHODS, 0)
    leads = dict.fromkeys(METHODS, 0)
    for _ in range(trials):
        a = [repetition(rng, mu_a, s) for _ in range(s.pairs)]
        b = [repetition(rng, mu_b, s) for _ in range(s.pairs)]
        for name, shares in METHODS.items():
            named = {t.function: t.change_us for t in diff(a, b, shares_scale=shares).named}
            hits[name] += target is not None and named.get(target, 0) > 0
            leads[name] += any(f != target for f in named)
    return {m: (hits[m] / trials, leads[m] / trials) for m in METHODS}


def scenarios(quick: bool) -> list[Scenario]:
    noisy = 0.10
    found = [
        Scenario("A/A, 3 pairs, 2000 samples/side"),
        Scenario("A/A, 3 pairs, 2000/side, monitor 10 %", sigma_monitor=noisy),
        Scenario("A/A, 3 pairs, 2000/side, bursts of 3", burst=3),
        Scenario("A/A, 3 pairs, 2000/side, GC-like (sigma 0.4)", sigma_gc=0.4),
        Scenario(
            "A/A, 3 pairs, 2000/side, GC-like, monitor 10 %", sigma_gc=0.4, sigma_monitor=noisy
        ),
        Scenario("A/A, 3 pairs, 2000/side, instance sigma 0.15", sigma_inst=0.15),
        Scenario("A/A, 5 pairs, 2000/side, GC-like, bursts of 3", pairs=5, sigma_gc=0.4, burst=3),
        Scenario(
            "A/A, 3 pairs, 800/side, bursts of 3, monitor 10 %",
            samples=800,
            burst=3,
            sigma_monitor=noisy,
        ),
        Scenario(
            "A/A, 3 pairs, 1500/side, bursts of 3, monitor 25 %",
            samples=1500,
            burst=3,
            sigma_monitor=0.25,
        ),
        Scenario(
            "A/A, 3 pairs, 1500/side, GC-like, bursts of 3, monitor 25 %",
            samples=1500,
            burst=3,
            sigma_gc=0.4,
            sigma_monitor=0.25,
        ),
        Scenario("3x f04 (4.4 %), 3 pairs, 2000/side", changed=4),
        Scenario(
            "3x f04 (4.4 %), 3 pairs, 2000/side, monitor 10 %", changed=4, sigma_monitor=noisy
        ),
        Scenario("3x f09 (2.3 %), 3 pairs, 2000/side", changed=9),
        Scenario("3x f04 (4.4 %), 3 pairs, 200/side (99 Hz, light load)", changed=4, samples=200),
        Scenario(
            "3x f09 (2.3 %), 3 pairs, 2000/side, monitor 10 %", changed=9, sigma_monitor=noisy
        ),
        Scenario(
            "3x f01 (17 %), 3 pairs, 1000/side, bursts of 3, monitor 10 %",
            changed=1,
            samples=1000,
            burst=3,
            sigma_monitor=noisy,
        ),
        Scenario(
            "3x f04 (4.4 %), 3 pairs, 1500/side, bursts of 3, monitor 25 %",
            changed=4,
            samples=1500,
            burst=3,
            sigma_monitor=0.25,
        ),
        Scenario("1.5x f01 (17 %), 3 pairs, 2000/side", changed=1, factor=1.5),
        Scenario("3x f00 (29 %), 3 pairs, 2000/side, monitor 10 %", changed=0, sigma_monitor=noisy),
        Scenario("3x f09, GC-like, bursts of 3", changed=9, sigma_gc=0.4, burst=3),
    ]
    return [found[1], found[8], found[12], found[13]] if quick else found


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    started = time.monotonic()
    print("| scenario | " + " | ".join(METHODS) + " |")
    print("|---|" + "---|" * len(METHODS))
    for index, s in enumerate(scenarios(args.quick)):
        result = run(s, args.trials, seed=20261126 + index)
        cells = [
            f"{leads:.3f}" if s.changed is None else f"{power:.2f} / {leads:.3f}"
            for power, leads in result.values()
        ]
        print(f"| {s.name} | " + " | ".join(cells) + " |", flush=True)
    print(
        f"\nA/A rows: the share of trials naming any function (false leads). Other rows: "
        f"the changed function named (power) / any other named. {args.trials} trials per "
        f"row, {time.monotonic() - started:.0f} s; load average {_load()}."
    )
    return 0


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    sys.exit(main())
