"""Where a change in CPU went: the functions the profile names, their change per
request with its interval, and the sentence that says why when it names none; or, when
the target's CPU per request did not move, that the time went elsewhere.

The judge calls ``attribute`` with the measurement's profile (both sides of an A/B run,
or this run's side and the stored baseline's digest) and its own estimate of the change
of ``cpu_per_req`` (``estimates.paired_estimate`` or ``level_estimate``): the diff
(``profiling/diff.py``) scales every function's share by that estimate, so the profile
and the check agree on the total, and no second figure of the same thing exists.

What is added to the profile (the JSON report's ``profile``): ``changes`` (the named
functions, ranked), ``tested``, ``pairs``, ``family_alpha`` and ``confidence``,
``dispersion`` (the repetitions' overdispersion factor), ``detectable_us``,
``explained`` (the part of the total's change, ``total_change_us`` on the diff's
scale, that the named functions account for) and ``explains`` (that, in words),
``unresolved`` (why nothing was named, in one sentence), ``cpu`` (the total's change),
``scale`` (what the functions were scaled by: the CPU measured, refined by the shares'
own view of the total when they agree: ``profiling/diff.py``) and ``elsewhere`` (the
CPU per request credibly did not move, its interval within ``STILL`` of none: a failed
rps or latency check is about time spent waiting, not computing). A profile that
cannot be diffed gets ``why``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_webperf.gate.estimates import Estimate
from pytest_webperf.profiling import diff, digest
from pytest_webperf.profiling.stacks import FunctionChange, on_stack, parse_folded

# The CPU per request "did not move" when its interval lies within this of no change (the
# default cpu_per_req check's threshold): an interval that merely includes 0 may hide a
# change as large as the one that failed.
STILL = 0.05
ELSEWHERE = (
    "the target's CPU per request did not move ({change}, {low}..{high}): the time went "
    "elsewhere, waiting rather than computing (locks, I/O, the network, the scheduler, "
    "other processes)"
)


def attribute(
    profile: Mapping[str, Any] | None,
    estimate: Estimate | str | None,
    *,
    stored: Mapping[str, Any] | None = None,
    against_stored: bool = False,
) -> dict[str, Any] | None:
    """``profile`` with the diff and the sentences added (None stays None). ``stored``:
    the stored baseline's digest, when judged against one (``against_stored``)."""
    if profile is None:
        return None
    found = dict(profile)
    if isinstance(estimate, Estimate):
        found.update(_total(estimate))
    if profile.get("why"):
        return found
    if against_stored:
        why = _stored_side(found, stored)
        if why is not None:
            return {**found, "why": why}
    base = _repetitions(found.get("base_repetitions"))
    change = _repetitions(found.get("repetitions"))
    if len(base) < 2 or len(change) < 2:
        fewer = "A" if len(base) < 2 else "B"
        found["why"] = (
            f"{min(len(base), len(change))} profiled repetition(s) of {fewer}: two or more "
            "per side say how much repetitions differ (--webperf-repeat 2 or more)"
        )
        return found
    total = _total_of(estimate)
    result = diff.diff(base, change, total)
    named = result.named
    base_stacks = _folded(found.get("base_folded"))
    change_stacks = _folded(found.get("change_folded"))
    changes = [
        FunctionChange(
            t.function,
            t.change_us,
            t.low_us,
            t.high_us,
            t.base_us,
            _total_change(t.function, base_stacks, change_stacks, result.total),
            t.ratio,
            t.p_value,
        ).to_dict()
        for t in named
    ]
    found.update(
        {
            "pairs": min(len(base), len(change)),
            "tested": len(result.tests),
            "family_alpha": diff.FAMILY_ALPHA,
            "confidence": 1 - diff.FAMILY_ALPHA,
            "changes": changes,
            "samples": {"A": result.samples[0], "B": result.samples[1]},
            "dispersion": round(result.dispersion.phi, 3),
            "scale": result.scale,
            "total_change_us": result.total.change_us,
            "detectable_us": result.detectable_us,
        }
    )
    if result.explained is not None:
        found["explained"] = result.explained
        found["explains"] = explains(result.explained, result.total.change_us)
    if result.why is not None:
        found["unresolved"] = result.why
    return found


def explains(explained: float, total_us: float) -> str:
    """The named functions' part of the change of CPU per request, in words: a share when
    they add up to some of it; their sum when they moved more than the total did, or the
    other way (other functions moved against them, each too little to be named)."""
    named_us = explained * total_us
    if 0 <= explained <= 1:
        return (
            f"the functions named account for {explained:.0%} of the change of CPU per "
            f"request ({total_us:+.1f} µs/req)"
        )
    how = "more than" if explained > 1 else "against"
    return (
        f"the functions named changed by {named_us:+.1f} µs/req in all, {how} the CPU per "
        f"request's {total_us:+.1f} µs/req: other functions moved the other way, each too "
        "little to be named"
    )


def _stored_side(found: dict[str, Any], stored: Mapping[str, Any] | None) -> str | None:
    """The stored baseline's digest as side A of ``found``; why it cannot be."""
    if stored is None:
        return "the stored baseline carries no profile (re-save it with --webperf-save)"
    problem = digest.check(stored)
    if problem is not None:
        return f"the stored baseline's profile cannot be read ({problem})"
    reps = stored["repetitions"]
    found["base_repetitions"] = list(reps)
    found["base_folded"] = stored["folded"]
    samples = found.setdefault("samples", {})
    requests = found.setdefault("requests", {})
    samples["A"] = sum(int(r.get("samples") or sum(r["leaves"].values())) for r in reps)
    requests["A"] = sum(int(r.get("requests") or 0) for r in reps)
    found["tools"] = sorted({*found.get("tools", ()), *stored.get("tools", ())})
    return None


def _repetitions(found: object) -> list[diff.Repetition]:
    """A side's repetitions as the diff pools them (those with a CPU per request)."""
    reps = []
    for rep in found if isinstance(found, Sequence) else ():
        if not isinstance(rep, Mapping) or not isinstance(rep.get("leaves"), Mapping):
            continue
        cpu = rep.get("cpu_per_request_us")
        if isinstance(cpu, int | float) and cpu > 0:
            counts = {str(k): int(v) for k, v in rep["leaves"].items()}
            reps.append(diff.Repetition(counts, float(cpu)))
    return reps


def _total_of(estimate: Estimate | str | None) -> diff.Total | None:
    """The gate's estimate of the change of CPU per request as the diff's total (None:
    the diff estimates it from the repetitions)."""
    if not isinstance(estimate, Estimate) or estimate.se is None or estimate.baseline <= 0:
        return None
    if estimate.change <= -1:
        return None
    return diff.Total(
        math.log1p(estimate.change), estimate.se, estimate.df or math.inf, estimate.baseline
    )


def _total(estimate: Estimate) -> dict[str, Any]:
    """The total's change, and the sentence when it did not move."""
    found: dict[str, Any] = {
        "cpu": {
            "base_us": estimate.baseline,
            "change_us": estimate.baseline * estimate.change,
            "change": estimate.change,
            "low": estimate.low,
            "high": estimate.high,
        }
    }
    low, high = estimate.low, estimate.high
    if low is not None and high is not None and -STILL < low <= 0 <= high < STILL:
        found["elsewhere"] = ELSEWHERE.format(
            change=f"{100 * estimate.change:+.1f}%",
            low=f"{100 * low:+.1f}",
            high=f"{100 * high:+.1f}%",
        )
    return found


def _folded(text: object) -> dict[str, int]:
    try:
        return parse_folded(text) if isinstance(text, str) else {}
    except ValueError:
        return {}


def _total_change(
    function: str, base: Mapping[str, int], change: Mapping[str, int], total: diff.Total
) -> float:
    """B - A of the function's total time per request (it and what it calls), from the
    stacks' shares and the total: for context beside its self time."""
    n_a, n_b = sum(base.values()), sum(change.values())
    if n_a == 0 or n_b == 0:
        return 0.0
    share_a = on_stack(base).get(function, 0) / n_a
    share_b = on_stack(change).get(function, 0) / n_b
    t_a = total.base_us
    return share_b * t_a * math.exp(total.log_ratio) - share_a * t_a
