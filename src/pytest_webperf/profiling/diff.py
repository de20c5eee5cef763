"""Which functions a change made costlier or cheaper: each function's share of the CPU
samples, pooled over the repetitions of each side, B against A, scaled by the change of
the target's CPU per request (pure: no I/O).

Why pooled counts, not a t-interval over pairs
----------------------------------------------
A repetition's profile is a sample of a multinomial: each of its ``N`` samples lands in
one function (the leaf of its stack) with probability ``p_f``, the function's share of
the CPU. A t-interval over pairs of each function's change has ``n - 1`` degrees of
freedom and, Bonferroni over ``k`` functions, needs Student's quantile at
``1 - alpha / 2k``: with 3 pairs and 17 functions that is ~41 at 99 %, wider than any real
change (simulated: it named a function made 3x costlier in 0 % of 3-pair runs). Pooling
each side's samples over its repetitions and testing every function's share with a
binomial variance uses every sample. What the multinomial does not explain (each
repetition is a fresh instance: layout, hash seed, JIT and GC state; samples come in
bursts on one slow request) is a **dispersion factor** estimated from the repetitions,
as quasi-binomial models do: Pearson's statistic of the repetitions' counts against the
side's pooled shares over its degrees of freedom (``dispersion``). One function much
more variable than the rest (GC) would be under-covered by a common factor, so each
function gets its own factor shrunk towards the common one with ``PRIOR_DF`` = 4 prior
degrees of freedom (empirical Bayes, as limma moderates variances): with 3 pairs the
common factor dominates, with 10 a function's own variation between repetitions does
(the between-pair check, kept where there are enough pairs, without a threshold).

From shares to µs per request
-----------------------------
When ``f`` gets 3x costlier every other function's share falls, though its cost did
not change. A function's cost per request is its share times the target's CPU per
request ``T`` (measured by the monitor, not by the sampler), so the test is on

    L_f = log(p_B / p_A) + log(T_B / T_A)
    Var = phi_f * [(1/(C_B+1/2) - 1/(N_B+1/2)) + (1/(C_A+1/2) - 1/(N_A+1/2))] + se_T^2

(Katz's log ratio of two binomial proportions with Haldane's 1/2, so a function absent
on one side stays finite; the total's term is the gate's own estimate of the change of
``cpu_per_req`` with its standard error: ``Total``). The two parts come from independent
measurements, so their variances add; the degrees of freedom are Welch-Satterthwaite's.
Only the *ratio* of the totals enters: A's level scales every function alike. The
change in µs per request is ``mu_A * (exp(L_f) - 1)``, its interval mapped from the log
scale (so it always agrees with the decision).

Many functions at once
----------------------
A function is tested when its mean share over both sides is at least ``MIN_SHARE`` and
it has ``MIN_COUNT`` samples in all, at ``FAMILY_ALPHA / k`` (Bonferroni): simulated
(``benchmarks/profile_false_leads.py`` measures it on real runs), an A/A run names a
function in at most 3.3 % of trials under instance effects, bursts and a GC-like
function, and a function at 1.5-4.4 % of the CPU made 3x costlier is named in 92-100 %
of 3-pair runs with 2,000 samples per side. When nothing is named, ``Diff.why`` says why
in one sentence, with the smallest change of a function at the median tested share that
the run resolves with 80 % power (``Diff.detectable_us``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from statistics import NormalDist

from pytest_webperf.stats.distributions import t_cdf, t_ppf
from pytest_webperf.stats.ratio import paired_change, ratio_change

FAMILY_ALPHA = 0.05  # an A/A run names no function in 19 trials of 20, at least
MIN_SHARE = 0.01  # functions under 1 % of the samples are not tested (they only raise k)
MIN_COUNT = 10  # nor those with fewer samples in all (no normal approximation)
PRIOR_DF = 4.0  # how much a function's own dispersion is shrunk to the common one
REST = "(rest)"  # the untested functions, one category of the dispersion's statistic
POWER = 0.8  # the power at which ``detectable_us`` is stated
TRIM = 0.3  # the share of functions left out at each end of the shares' view of the total
MIN_REFERENCE = 4  # functions tested, at least, for the shares' view of the total
AGREE = 3.29  # the measured total and the shares' view disagree beyond this many se (0.1 %)


@dataclass(frozen=True)
class Repetition:
    """One repetition of one side: self samples per function, and the target's CPU
    time per request (µs) as the monitor measured it."""

    counts: Mapping[str, int]
    cpu_per_request_us: float

    @property
    def samples(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class Total:
    """The change of the target's CPU per request, B against A, on the log scale, with
    its standard error and degrees of freedom, and A's level (µs per request)."""

    log_ratio: float
    se: float
    df: float
    base_us: float

    @property
    def change_us(self) -> float:
        return self.base_us * math.expm1(self.log_ratio)


def total_from_pairs(a: Sequence[Repetition], b: Sequence[Repetition]) -> Total:
    """The total's change from pairs (``a[i]`` against ``b[i]``), each a fresh instance:
    when no gate estimate is given."""
    estimate = paired_change(
        [math.log(y.cpu_per_request_us / x.cpu_per_request_us) for x, y in zip(a, b, strict=False)],
        list(range(min(len(a), len(b)))),
    )
    return _total(estimate.change, estimate.se, estimate.df, a)


def total_from_sides(a: Sequence[Repetition], b: Sequence[Repetition]) -> Total:
    """The total's change from two sides' repetitions (Welch on the log scale)."""
    estimate = ratio_change([r.cpu_per_request_us for r in b], [r.cpu_per_request_us for r in a])
    return _total(estimate.change, estimate.se, estimate.df, a)


def _total(change: float, se: float | None, df: float | None, a: Sequence[Repetition]) -> Total:
    base = sum(r.cpu_per_request_us for r in a) / len(a)
    return Total(math.log1p(change), se or 0.0, df or math.inf, base)


@dataclass(frozen=True)
class Dispersion:
    """How much more the repetitions' counts vary than a multinomial's: the common
    factor over all tested functions (``phi``, ``df``), and each function's own."""

    phi: float
    df: float
    own: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # phi_f, d_f

    def moderated(self, function: str, prior_df: float = PRIOR_DF) -> tuple[float, float]:
        """The factor used for ``function`` and its degrees of freedom: its own shrunk
        towards the common one; never under 1 (a multinomial is the least noise)."""
        if not math.isfinite(prior_df):  # the common factor alone
            return max(1.0, self.phi), self.df if self.df > 0 else math.inf
        own, d_f = self.own.get(function, (self.phi, 0.0))
        d0 = min(prior_df, self.df)
        if d0 + d_f <= 0:
            return 1.0, math.inf
        return max(1.0, (d0 * self.phi + d_f * own) / (d0 + d_f)), d0 + d_f


def dispersion(sides: Sequence[Sequence[Repetition]], tested: Sequence[str]) -> Dispersion:
    """Pearson's statistic of each side's repetitions against that side's pooled
    shares, over the tested functions and the rest as one category (so every sample
    counts once), divided by its degrees of freedom, ``(n - 1)(K - 1)`` per side."""
    chi2 = df = 0.0
    own_chi2 = dict.fromkeys(tested, 0.0)
    own_df = dict.fromkeys(tested, 0.0)
    for reps in sides:
        sizes = [r.samples for r in reps]
        total = sum(sizes)
        if len(reps) < 2 or total == 0:
            continue
        grouped = [_grouped(r.counts, tested) for r in reps]
        pooled = {f: sum(g.get(f, 0) for g in grouped) / total for f in [*tested, REST]}
        present = [f for f, p in pooled.items() if p > 0]
        for f in present:
            p = pooled[f]
            residuals = [
                (g.get(f, 0) - size * p) ** 2 / (size * p)
                for g, size in zip(grouped, sizes, strict=True)
                if size > 0
            ]
            chi2 += sum(residuals)
            if f != REST and p < 1:
                own_chi2[f] += sum(residuals) / (1 - p)
                own_df[f] += len(residuals) - 1
        df += (len(reps) - 1) * (len(present) - 1)
    if df <= 0:
        return Dispersion(1.0, 0.0)
    own = {f: (own_chi2[f] / own_df[f], own_df[f]) for f in tested if own_df[f] > 0}
    return Dispersion(chi2 / df, df, own)


def _grouped(counts: Mapping[str, int], tested: Sequence[str]) -> dict[str, int]:
    keep = set(tested)
    grouped = {f: c for f, c in counts.items() if f in keep}
    grouped[REST] = sum(c for f, c in counts.items() if f not in keep)
    return grouped


@dataclass(frozen=True)
class FunctionTest:
    """One function: its cost per request on A, the change B - A (µs) with its
    simultaneous interval, the ratio of its costs, and the test's p-value."""

    function: str
    base_us: float
    change_us: float
    low_us: float
    high_us: float
    ratio: float
    p_value: float
    named: bool


@dataclass(frozen=True)
class Diff:
    """The functions tested (named ones first, by the size of the change), each side's
    samples, the dispersion, and why nothing was named when nothing was."""

    tests: tuple[FunctionTest, ...]
    samples: tuple[int, int]
    dispersion: Dispersion
    total: Total  # the scale the functions were tested on (``scale`` says where from)
    detectable_us: float | None
    why: str | None
    scale: str = "cpu"  # "cpu", "cpu and shares", or "cpu; the shares disagree"

    @property
    def named(self) -> tuple[FunctionTest, ...]:
        return tuple(t for t in self.tests if t.named)

    @property
    def explained(self) -> float | None:
        """The part of the total's change the named functions account for."""
        change = self.total.change_us
        if not self.named or change == 0:
            return None
        return sum(t.change_us for t in self.named) / change


def diff(
    a: Sequence[Repetition],
    b: Sequence[Repetition],
    total: Total | None = None,
    *,
    family_alpha: float = FAMILY_ALPHA,
    min_share: float = MIN_SHARE,
    min_count: int = MIN_COUNT,
    prior_df: float = PRIOR_DF,
    shares_scale: bool = True,
) -> Diff:
    """The functions whose self CPU per request changed from A to B. ``total`` is the
    gate's estimate of the total's change (by default, pairs when both sides have as
    many repetitions, else Welch), refined by the shares' view of it (``combined``;
    ``shares_scale=False``: the measured total alone, for comparison). Two repetitions
    per side at least: one says nothing of how much repetitions differ (``ValueError``)."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError("two repetitions per side or more")
    if total is None:
        total = total_from_pairs(a, b) if len(a) == len(b) else total_from_sides(a, b)
    a_counts, b_counts = pool(a), pool(b)
    n_a, n_b = sum(a_counts.values()), sum(b_counts.values())
    if n_a == 0 or n_b == 0:
        side = "A" if n_a == 0 else "B"
        return Diff((), (n_a, n_b), Dispersion(1.0, 0.0), total, None, f"{side} has no samples")
    tested = [
        f
        for f in sorted({*a_counts, *b_counts} - {REST})
        if (a_counts.get(f, 0) / n_a + b_counts.get(f, 0) / n_b) / 2 >= min_share
        and a_counts.get(f, 0) + b_counts.get(f, 0) >= min_count
    ]
    spread = dispersion([a, b], tested)
    alpha = family_alpha / max(1, len(tested))
    rows = {
        f: ((a_counts.get(f, 0), n_a, b_counts.get(f, 0), n_b), spread.moderated(f, prior_df))
        for f in tested
    }
    shares = from_shares(rows.values(), spread.df, total.base_us) if shares_scale else None
    total, scale = combined(total, shares)
    tests = [_test(f, counts, phi, total, alpha) for f, (counts, phi) in rows.items()]
    tests.sort(key=lambda t: (not t.named, -abs(t.change_us), t.function))
    detectable = _detectable(tested, a_counts, (n_a, n_b), spread, total=total, alpha=alpha)
    why = None if any(t.named for t in tests) else _why_none(tested, n_a, n_b, detectable)
    return Diff(tuple(tests), (n_a, n_b), spread, total, detectable, why, scale)


Row = tuple[tuple[int, int, int, int], tuple[float, float]]  # counts, (phi, its df)


def from_shares(rows: Iterable[Row], df: float, base_us: float) -> Total | None:
    """The total's change as the shares see it, when most functions did not change:
    minus the precision-weighted mean of the middle share log ratios (the extreme
    ``TRIM`` of the functions at each end left out, as TMM normalises RNA-seq counts),
    with its standard error; None with fewer than ``MIN_REFERENCE`` functions."""
    found = []
    for (c_a, n_a, c_b, n_b), (phi, _) in rows:
        ratio = math.log((c_b + 0.5) / (n_b + 0.5)) - math.log((c_a + 0.5) / (n_a + 0.5))
        found.append((ratio, phi * _share_variance(c_a, n_a, c_b, n_b)))
    if len(found) < MIN_REFERENCE:
        return None
    found.sort()
    cut = min(math.floor(TRIM * len(found)), (len(found) - 2) // 2)
    middle = found[cut : len(found) - cut]
    weight = sum(1 / v for _, v in middle)
    centre = sum(r / v for r, v in middle) / weight
    return Total(-centre, math.sqrt(1 / weight), df if df > 0 else math.inf, base_us)


def combined(measured: Total, shares: Total | None) -> tuple[Total, str]:
    """The scale of the tests: the measured total's change, refined by the shares' view
    of it (inverse-variance weights, Satterthwaite's degrees of freedom), unless the two
    disagree beyond chance (``AGREE``: a change spread over many functions moves every
    share alike, and the shares' view then misses it): the measured one alone."""
    if shares is None or not math.isfinite(measured.se):
        return measured, "cpu"
    v_m, v_s = measured.se**2, shares.se**2
    if v_m + v_s == 0:
        return measured, "cpu"
    if abs(measured.log_ratio - shares.log_ratio) > AGREE * math.sqrt(v_m + v_s):
        return measured, "cpu; the shares disagree"
    a = v_s / (v_m + v_s)
    var = v_m * v_s / (v_m + v_s)
    parts = [(a * a * v_m, measured.df), ((1 - a) ** 2 * v_s, shares.df)]
    centre = a * measured.log_ratio + (1 - a) * shares.log_ratio
    return Total(centre, math.sqrt(var), _satterthwaite(*parts), measured.base_us), "cpu and shares"


def pool(reps: Sequence[Repetition]) -> dict[str, int]:
    """Self samples per function over repetitions."""
    pooled: dict[str, int] = {}
    for rep in reps:
        for f, c in rep.counts.items():
            pooled[f] = pooled.get(f, 0) + c
    return pooled


def _share_variance(c_a: float, n_a: float, c_b: float, n_b: float) -> float:
    """Var of log(p_B / p_A) for two binomial shares (Katz), with Haldane's 1/2."""
    c_a, c_b = c_a + 0.5, c_b + 0.5
    return (1 / c_a - 1 / (n_a + 0.5)) + (1 / c_b - 1 / (n_b + 0.5))


def _test(
    function: str,
    counts: tuple[int, int, int, int],
    phi: tuple[float, float],
    total: Total,
    alpha: float,
) -> FunctionTest:
    c_a, n_a, c_b, n_b = counts
    phi_value, phi_df = phi
    share = phi_value * _share_variance(c_a, n_a, c_b, n_b)
    level = total.se**2
    log_ratio = math.log((c_b + 0.5) / (n_b + 0.5)) - math.log((c_a + 0.5) / (n_a + 0.5))
    log_ratio += total.log_ratio
    df = _satterthwaite((share, phi_df), (level, total.df))
    se = math.sqrt(share + level)
    p_value = 2 * (1 - t_cdf(abs(log_ratio) / se, df)) if se > 0 else float(log_ratio == 0)
    q = _quantile(1 - alpha / 2, df)  # named when the interval excludes no change
    base = (c_a + 0.5) / (n_a + 0.5) * total.base_us  # f's cost per request on A
    return FunctionTest(
        function,
        c_a / n_a * total.base_us,
        base * _expm1(log_ratio),
        base * _expm1(log_ratio - q * se),
        base * _expm1(log_ratio + q * se),
        math.exp(min(log_ratio, 700.0)),
        min(1.0, max(0.0, p_value)),
        abs(log_ratio) > q * se,
    )


def _expm1(x: float) -> float:
    """``expm1`` kept finite: a bound of e^700 says "unbounded" well enough."""
    return math.expm1(min(x, 700.0))


@lru_cache(maxsize=4096)
def _quantile_cached(p: float, df: float) -> float:
    return t_ppf(p, df)


def _quantile(p: float, df: float) -> float:
    """Student's quantile, the degrees of freedom rounded down to a tenth (conservative,
    and a run's tests share the bisection's work)."""
    return _quantile_cached(p, math.floor(df * 10) / 10 if math.isfinite(df) else df)


def _satterthwaite(*parts: tuple[float, float]) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of variance estimates."""
    var = sum(v for v, _ in parts)
    denominator = sum(v * v / d for v, d in parts if math.isfinite(d) and d > 0 and v > 0)
    if denominator == 0:
        return math.inf
    return max(1.0, var * var / denominator)


def _detectable(
    tested: Sequence[str],
    a_counts: Mapping[str, int],
    sizes: tuple[int, int],
    spread: Dispersion,
    *,
    total: Total,
    alpha: float,
) -> float:
    """The smallest rise (µs per request) of a function at the median tested share (at
    ``MIN_SHARE`` if none was tested) that this run names with ``POWER``."""
    n_a, n_b = sizes
    shares = sorted(a_counts.get(f, 0) / n_a for f in tested) or [MIN_SHARE]
    p = max(shares[len(shares) // 2], 1 / n_a)
    var = max(1.0, spread.phi) * _share_variance(p * n_a, n_a, p * n_b, n_b) + total.se**2
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(POWER)
    return p * total.base_us * math.expm1(z * math.sqrt(var))


def _why_none(tested: Sequence[str], n_a: int, n_b: int, detectable: float) -> str:
    fewest = min(n_a, n_b)
    if not tested:
        return (
            f"no function has {MIN_SHARE:.0%} of the samples and {MIN_COUNT} samples in all "
            f"({fewest:,} samples on the smaller side): profile longer or at a higher rate"
        )
    return (
        f"no function's change is resolved with {fewest:,} samples on the smaller side: a "
        f"change under ~{detectable:.1f} µs/req in one function is not (raise "
        "--webperf-duration or --webperf-repeat for more samples, or the change is spread "
        "thin over many functions)"
    )
