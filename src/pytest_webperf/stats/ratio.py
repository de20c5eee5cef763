"""Pure statistics for comparing two runs made of a few repetitions each.

Everything here is plain Python on sequences of floats (no numpy: the inputs are
tiny, 1-20 repetitions of at most a few hundred seconds each). Mean, variance and
standard deviation are ``statistics``'; Student's t and the incomplete beta function
are written here because ``statistics`` has only the normal distribution and scipy
is a heavy dependency for two functions.

The one question the regression gate asks is "is the current mean worse than
the baseline mean by more than X %, credibly?". The choices, and why:

* **Relative change on the log scale.** The change is ``mean(x) / mean(y) - 1``;
  its uncertainty is computed for ``log(mean(x) / mean(y))`` with the delta method
  (``Var(log mean) ~ CV^2 / n``). Working with coefficients of variation makes every
  result scale-invariant: rps in req/s or req/min gives the same verdict.
* **Welch t-interval, not the bootstrap, for the decision.** With 2-5 repetitions
  per side a bootstrap interval is too narrow: it resamples from a plug-in
  distribution that under-states the variance by ``(n-1)/n`` and uses normal-like
  quantiles where Student's t with ``n-1`` degrees of freedom is due (for n=3,
  ~1.96 instead of ~4.3). The t-interval is exact for normal data and widens as it
  should when n is small. ``bootstrap_ratio_ci`` is still here (seeded,
  percentile) for reports with many repetitions.
* **A floor on the spread from the per-second series.** Two or three repetitions
  can agree by luck (a sample variance near 0 makes any difference "significant").
  The per-second series of each repetition tells how noisy the repetition's mean
  is at least: its batch means (batches of several seconds, because successive
  seconds are autocorrelated) give the within-run variance of the mean. The
  variance used for a side is the larger of the between-repetition variance and
  that within-run variance (each with its own degrees of freedom). With a single
  repetition per side the within-run estimate is the only one there is.
* **No rank test.** With 3 repetitions per side the smallest one-sided p-value of
  a rank test is 1/20 = 0.05, so a rank gate could never fail a 3-repetition run
  (a Mann-Whitney test that lived beside the gate, used by nothing, was removed).
* **Counts (errors, lost messages) as Poisson rates.** Error counts are mostly 0;
  per-repetition rates have no usable log. ``rate_ratio`` compares the two rates
  with the exact conditional binomial test and a Clopper-Pearson interval.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_webperf.stats.distributions import t_cdf, t_ppf

# Seconds per batch when turning a per-second series into batch means: successive
# seconds of a load test are correlated (queues drain slowly), 5 s batches mostly are not.
BATCH_SECONDS = 5
MIN_BATCHES = 3


# --- descriptive -------------------------------------------------------------------------


def mean(values: Sequence[float]) -> float:
    """``statistics.fmean``, raising ``ValueError("mean of no values")`` on no values."""
    if not values:
        raise ValueError("mean of no values")
    return statistics.fmean(values)


def variance(values: Sequence[float]) -> float:
    """Sample variance (n-1 in the denominator); 0.0 for fewer than two values."""
    return statistics.variance(values) if len(values) >= 2 else 0.0


def stdev(values: Sequence[float]) -> float:
    """Sample standard deviation; 0.0 for fewer than two values."""
    return statistics.stdev(values) if len(values) >= 2 else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), linear interpolation between order statistics
    (the default of numpy and of R's type 7). ``statistics.quantiles`` cuts into n
    equal groups only, so a 2.5th percentile would need n=400 cut points."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside 0..100")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def batch_means(series: Sequence[float], batch: int = BATCH_SECONDS) -> list[float]:
    """Means of consecutive batches of ``batch`` values; the incomplete last batch is
    dropped. Shorter batches are used when that is the only way to get MIN_BATCHES."""
    size = max(1, min(batch, len(series) // MIN_BATCHES))
    count = len(series) // size
    return [mean(series[i * size : (i + 1) * size]) for i in range(count)]


@dataclass(frozen=True)
class Spread:
    """A relative variance (CV^2) of one repetition's value, with its degrees of freedom."""

    rel_var: float
    df: float


def within_run_spread(series_per_run: Sequence[Sequence[float]]) -> Spread | None:
    """The relative variance of a repetition's mean implied by its own per-second
    series (batch means), pooled over repetitions; None when no series is long enough."""
    total, df = 0.0, 0.0
    for series in series_per_run:
        batches = batch_means(series) if len(series) >= MIN_BATCHES else []
        if len(batches) < 2:
            continue
        m = mean(batches)
        if m == 0:
            continue
        total += (len(batches) - 1) * variance(batches) / len(batches) / (m * m)
        df += len(batches) - 1
    return Spread(total / df, df) if df else None


def between_run_spread(values: Sequence[float]) -> Spread | None:
    """The relative variance of the per-repetition values; None for one repetition."""
    if len(values) < 2:
        return None
    m = mean(values)
    return Spread(variance(values) / (m * m) if m else 0.0, len(values) - 1)


def side_spread(
    values: Sequence[float], series_per_run: Sequence[Sequence[float]] = ()
) -> Spread | None:
    """The spread used for one side: the larger of between- and within-run spread."""
    candidates = [
        s for s in (between_run_spread(values), within_run_spread(series_per_run)) if s is not None
    ]
    return max(candidates, key=lambda s: s.rel_var) if candidates else None


# --- distributions -----------------------------------------------------------------------


# --- the relative change of the mean -----------------------------------------------------


@dataclass(frozen=True)
class RatioEstimate:
    """``change = mean(current) / mean(baseline) - 1`` with a confidence interval.

    ``p_greater``/``p_less`` are one-sided p-values for "current is higher/lower".
    ``low``/``high`` are None when there is no spread estimate at all (one repetition
    per side and no per-second series): then nothing can be said about credibility.
    """

    change: float
    low: float | None
    high: float | None
    confidence: float
    p_greater: float
    p_less: float
    df: float | None
    se: float | None = None  # standard error of the log ratio

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None


def _welch(a: Spread, n_a: int, b: Spread, n_b: int) -> tuple[float, float]:
    """Standard error of the log ratio and its Welch-Satterthwaite degrees of freedom."""
    va, vb = a.rel_var / n_a, b.rel_var / n_b
    se2 = va + vb
    if se2 == 0:
        return 0.0, math.inf
    return math.sqrt(se2), se2 * se2 / (va * va / a.df + vb * vb / b.df)


def unit_spread(
    values: Sequence[float],
    series_per_run: Sequence[Sequence[float]] = (),
    instances: Sequence[int | None] | None = None,
) -> tuple[Spread | None, int]:
    """One side's spread per unit of evidence, and how many units it has.

    Runs on one process instance share its bias (memory layout, hash seed: several per
    cent), so they are not independent: with two instances or more the unit is the
    instance, valued at the mean of its runs, and the within-run floor shrinks by the
    runs it averages. With one instance (never restarted), unknown instances (None) or
    one run per instance, the unit is the run."""
    if instances is not None and len(instances) != len(values):
        raise ValueError("one instance number per value")
    known = [i for i in instances or () if i is not None]
    groups: dict[int, list[float]] = {}
    if len(known) == len(values):
        for value, instance in zip(values, known, strict=True):
            groups.setdefault(instance, []).append(value)
    if len(groups) < 2 or len(groups) == len(values):
        return side_spread(values, series_per_run), len(values)
    candidates = [between_run_spread([mean(g) for g in groups.values()])]
    within = within_run_spread(series_per_run)
    if within is not None:  # one repetition's floor; an instance averages several
        candidates.append(Spread(within.rel_var * len(groups) / len(values), within.df))
    spreads = [s for s in candidates if s is not None]
    return max(spreads, key=lambda s: s.rel_var) if spreads else None, len(groups)


def ratio_change(
    current: Sequence[float],
    baseline: Sequence[float],
    *,
    current_series: Sequence[Sequence[float]] = (),
    baseline_series: Sequence[Sequence[float]] = (),
    current_instances: Sequence[int | None] | None = None,
    baseline_instances: Sequence[int | None] | None = None,
    floor: Spread | None = None,
    confidence: float = 0.95,
) -> RatioEstimate:
    """The relative change of the mean and its Welch t-interval on the log scale.

    Means must be positive (a zero current mean is a -100 % change with certainty).
    When only one side has a spread estimate it is used for both (same server,
    same machine: same relative noise is the natural assumption). With each run's
    process instance given, the units of evidence are instances (``unit_spread``).
    ``floor``: one unit's relative variance at least, on either side that has a spread
    (what fresh processes of the same code differ by, known beforehand).
    """
    mx, my = mean(current), mean(baseline)
    if my <= 0 or mx < 0:
        raise ValueError("ratio of means needs a positive baseline and a non-negative current")
    if mx == 0:
        return RatioEstimate(-1.0, -1.0, -1.0, confidence, 1.0, 0.0, None)
    log_ratio = math.log(mx / my)
    change = math.expm1(log_ratio)
    (sx, nx) = unit_spread(current, current_series, current_instances)
    (sy, ny) = unit_spread(baseline, baseline_series, baseline_instances)
    sx, sy = sx or sy, sy or sx
    if floor is not None:  # under a spread the runs gave, never in place of none
        sx, sy = (floor if s is not None and s.rel_var < floor.rel_var else s for s in (sx, sy))
    if sx is None or sy is None:
        return RatioEstimate(change, None, None, confidence, 0.5, 0.5, None)
    se, df = _welch(sx, nx, sy, ny)
    if se == 0:
        p_gt = 0.0 if log_ratio > 0 else 1.0
        p_lt = 0.0 if log_ratio < 0 else 1.0
        return RatioEstimate(change, change, change, confidence, p_gt, p_lt, df, 0.0)
    return _estimate(log_ratio, se, df, confidence)


def _estimate(log_ratio: float, se: float, df: float, confidence: float) -> RatioEstimate:
    q = t_ppf(0.5 + confidence / 2, df)
    t = log_ratio / se
    return RatioEstimate(
        math.expm1(log_ratio),
        math.expm1(log_ratio - q * se),
        math.expm1(log_ratio + q * se),
        confidence,
        1 - t_cdf(t, df),
        t_cdf(t, df),
        df,
        se,
    )


# --- paired runs (A/B): the change against its base, measured interleaved --------------


def paired_change(
    log_ratios: Sequence[float],
    instances: Sequence[int],
    *,
    floor: Spread | None = None,
    confidence: float = 0.95,
) -> RatioEstimate:
    """The change of B against A from paired repetitions, ``log(B_i / A_i)`` per pair.

    Pairs that ran on the same process instances (no restart between them) share that
    instance's bias (memory layout, hash seed, ASLR: several per cent, measured), so
    they are not independent evidence: the unit of evidence is the instance, and the
    estimate is the mean over instances of their mean log ratio, with the t-interval
    over instances (df = instances - 1). With a single instance (never restarted) the
    pairs are the units, and the interval says nothing about instance bias.

    ``floor`` is the relative variance of one pair's log ratio implied by the runs'
    own per-second series (A's plus B's within-run spread): two or three instances can
    agree by luck, the series say how noisy a pair is at least."""
    if len(log_ratios) != len(instances):
        raise ValueError("one instance number per pair")
    if not log_ratios:
        raise ValueError("no pairs")
    groups: dict[int, list[float]] = {}
    for ratio, instance in zip(log_ratios, instances, strict=True):
        groups.setdefault(instance, []).append(ratio)
    units = [mean(g) for g in groups.values()] if len(groups) > 1 else list(log_ratios)
    centre = mean(units)
    candidates: list[tuple[float, float]] = []  # (variance of the centre, df)
    if len(units) > 1:
        candidates.append((variance(units) / len(units), len(units) - 1))
    if floor is not None and floor.df > 0:
        candidates.append((floor.rel_var / len(log_ratios), floor.df))
    if not candidates:
        change = math.expm1(centre)
        return RatioEstimate(change, None, None, confidence, 0.5, 0.5, None)
    var, df = max(candidates)
    if var == 0:
        change = math.expm1(centre)
        p_gt, p_lt = (0.0 if centre > 0 else 1.0), (0.0 if centre < 0 else 1.0)
        return RatioEstimate(change, change, change, confidence, p_gt, p_lt, df, 0.0)
    return _estimate(centre, math.sqrt(var), df, confidence)


def detectable_change(
    se: float, df: float | None, *, alpha: float = 0.025, power: float = 0.8
) -> float:
    """The smallest relative change a one-sided test at level ``alpha`` detects with
    probability ``power``, given the standard error ``se`` of the log ratio:
    ``expm1((t[1-alpha] + t[power]) * se)`` (the textbook minimum detectable effect).
    It shrinks as pairs or repetitions are added (``se`` ~ 1/sqrt(n)) and grows with
    the spread."""
    if se < 0 or not 0 < alpha < 0.5 or not 0.5 <= power < 1:
        raise ValueError("se >= 0, 0 < alpha < 0.5, 0.5 <= power < 1")
    dof = math.inf if df is None else df
    return math.expm1((t_ppf(1 - alpha, dof) + t_ppf(power, dof)) * se)


def bootstrap_ratio_ci(
    current: Sequence[float],
    baseline: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 20240611,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``mean(current) / mean(baseline) - 1``.

    Seeded, so a report shows the same interval every time. Too narrow for a few
    repetitions (see the module docstring): reports only, never the gate.
    """
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        xs = rng.choices(current, k=len(current))
        ys = rng.choices(baseline, k=len(baseline))
        my = mean(ys)
        if my > 0:
            ratios.append(mean(xs) / my - 1)
    if not ratios:
        raise ValueError("bootstrap of a ratio needs a positive baseline")
    tail = (1 - confidence) / 2 * 100
    return percentile(ratios, tail), percentile(ratios, 100 - tail)


# --- counts ------------------------------------------------------------------------------
