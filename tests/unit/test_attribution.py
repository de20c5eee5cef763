"""The judge's diff of a profile (``gate/attribution.py``): named functions scaled by the
gate's own estimate of the change of CPU per request, the sentence when none is named,
the time gone elsewhere when the CPU did not move, and a stored baseline's digest as
side A."""

from __future__ import annotations

import random
from typing import Any

import pytest

from pytest_webperf.gate.attribution import attribute, explains
from pytest_webperf.gate.estimates import Estimate
from pytest_webperf.profiling import digest

SHARES = {"serve (srv)": 0.4, "parse (srv)": 0.3, "render (srv)": 0.2, "checksum (srv)": 0.1}


def side(rng: random.Random, shares: dict[str, float], n: int, cpu: float) -> list[dict[str, Any]]:
    reps = []
    for _ in range(3):
        names = list(shares)
        drawn = rng.choices(names, weights=list(shares.values()), k=n)
        stacks = {f"main;{f}": drawn.count(f) for f in names}
        reps.append(digest.repetition(stacks, 1000, cpu, {"py-spy": 997}))
    return reps


def estimate(change: float, low: float, high: float, base: float = 100.0) -> Estimate:
    return Estimate(base * (1 + change), base, change, low, high, 0.5, 0.5, se=0.02, df=4)


def profile(rng: random.Random, b_shares: dict[str, float], cpu_b: float) -> dict[str, Any]:
    return {
        "tools": ["py-spy"],
        "base_repetitions": side(rng, SHARES, 800, 100.0),
        "repetitions": side(rng, b_shares, 800, cpu_b),
        "base_folded": "main;serve (srv) 10\n",
        "change_folded": "main;serve (srv) 10\nmain;checksum (srv) 30\n",
        "notes": [],
    }


def test_the_function_made_three_times_costlier_is_named_with_its_interval() -> None:
    b = dict(SHARES, **{"checksum (srv)": 0.3})
    found = attribute(profile(random.Random(2), b, 120.0), estimate(0.2, 0.15, 0.25))
    assert found is not None
    (named,) = found["changes"]
    assert named["function"] == "checksum (srv)" and named["low_us"] > 0
    assert named["change_us"] == pytest.approx(20.0, rel=0.35)  # 10 -> 30 µs of 100 -> 120
    assert named["ratio"] == pytest.approx(3, rel=0.3) and named["p_value"] < 0.01
    assert found["explained"] == pytest.approx(1, abs=0.35)
    assert found["pairs"] == 3 and found["tested"] == 4 and found["confidence"] == 0.95
    assert "unresolved" not in found and "elsewhere" not in found
    assert found["cpu"]["change_us"] == pytest.approx(20.0)


def test_nothing_named_says_why_and_what_the_run_could_resolve() -> None:
    found = attribute(profile(random.Random(4), SHARES, 100.0), estimate(0.0, -0.04, 0.04))
    assert found is not None and found["changes"] == []
    assert "no function's change is resolved" in found["unresolved"]
    assert found["detectable_us"] > 0
    assert found["elsewhere"].startswith("the target's CPU per request did not move (+0.0%")
    wide = attribute(profile(random.Random(4), SHARES, 100.0), estimate(0.1, -0.2, 0.5))
    assert wide is not None and "elsewhere" not in wide  # not resolved is not "did not move"


def test_one_repetition_per_side_is_a_reason_not_a_diff() -> None:
    one = profile(random.Random(5), SHARES, 100.0)
    one["base_repetitions"] = one["base_repetitions"][:1]
    found = attribute(one, estimate(0.3, 0.2, 0.4))
    assert found is not None and "--webperf-repeat 2 or more" in found["why"]
    assert "elsewhere" not in found  # the CPU moved


def test_a_stored_baseline_without_a_profile_is_said() -> None:
    mine = profile(random.Random(6), SHARES, 100.0)
    del mine["base_repetitions"], mine["base_folded"]
    found = attribute(mine, estimate(0.3, 0.2, 0.4), stored=None, against_stored=True)
    assert found is not None and "carries no profile" in found["why"]


def test_a_stored_baseline_s_digest_is_side_a() -> None:
    rng = random.Random(8)
    stored = digest.digest(["py-spy"], side(rng, SHARES, 800, 100.0), {"main;serve (srv)": 2400})
    mine = profile(rng, dict(SHARES, **{"checksum (srv)": 0.3}), 120.0)
    del mine["base_repetitions"], mine["base_folded"]
    found = attribute(mine, estimate(0.2, 0.1, 0.3), stored=stored, against_stored=True)
    assert found is not None and [c["function"] for c in found["changes"]] == ["checksum (srv)"]
    assert found["samples"]["A"] == 2400 and found["base_folded"] == stored["folded"]
    broken = attribute(mine, estimate(0.2, 0.1, 0.3), stored={"schema": 9}, against_stored=True)
    assert broken is not None and "cannot be read" in broken["why"]


def test_no_profile_stays_none() -> None:
    assert attribute(None, estimate(0.0, -0.1, 0.1)) is None
    assert attribute({"why": "no perf"}, "not measured") == {"why": "no perf"}


@pytest.mark.parametrize(
    ("explained", "total", "words"),
    [
        (0.85, 10.0, "the functions named account for 85% of the change of CPU per request"),
        (1.54, -3.6, "changed by -5.5 µs/req in all, more than the CPU per request's -3.6"),
        (-0.5, 4.0, "changed by -2.0 µs/req in all, against the CPU per request's +4.0"),
    ],
)
def test_the_named_functions_part_of_the_change_reads_plainly(
    explained: float, total: float, words: str
) -> None:
    sentence = explains(explained, total)
    assert words in sentence and "%" not in sentence.replace("85%", "")
    assert f"{total:+.1f} µs/req" in sentence
