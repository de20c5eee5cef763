"""A profile small enough to keep with a baseline (``profiling/digest.py``)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_webperf.profiling.digest import (
    OTHER,
    REST,
    TRUNCATED,
    bound,
    check,
    digest,
    leaves,
    repetition,
)

frame = st.text("abcdefghij_.()", min_size=1, max_size=30)
stacks = st.dictionaries(
    st.lists(frame, min_size=1, max_size=12).map(";".join), st.integers(1, 5000), max_size=400
)


def size(folded: dict[str, int]) -> int:
    return sum(len(f"{s} {c}\n".encode()) for s, c in folded.items())


@given(stacks, st.integers(200, 20_000))
@settings(max_examples=150)
def test_bound_keeps_every_sample_under_the_cap(folded: dict[str, int], cap: int) -> None:
    cut = bound(folded, cap)
    assert sum(cut.values()) == sum(folded.values())
    assert size(cut) <= max(cap, size({f"{TRUNCATED};{OTHER}": sum(folded.values()) or 1}))


@given(stacks, st.integers(2000, 20_000))
@settings(max_examples=100)
def test_self_samples_of_kept_functions_are_exact(folded: dict[str, int], cap: int) -> None:
    before, after = leaves(folded, 10_000), leaves(bound(folded, cap), 10_000)
    for leaf, count in after.items():
        if leaf not in (OTHER, REST):
            assert count == before[leaf]


def test_small_profiles_are_kept_whole_and_large_ones_cut_to_the_cap() -> None:
    small = {"main;a": 5, "main;b": 3}
    assert bound(small) == small
    big = {f"main;handler;f{i:05d};leaf{i % 50}": 1000 - i % 1000 for i in range(20_000)}
    cut = bound(big, 64 * 1024)
    assert size(cut) <= 64 * 1024 and sum(cut.values()) == sum(big.values())
    assert any(s.startswith(TRUNCATED + ";leaf") for s in cut)


def test_leaves_lump_the_tail() -> None:
    assert leaves({"a;x": 5, "b;y": 3, "c;z": 1}, limit=2) == {"x": 5, "y": 3, REST: 1}


def test_a_digest_is_json_bounded_and_checked() -> None:
    reps = [
        repetition({"main;a": 50, "main;b": 7}, 1000, 120.5, {"perf": 1999}),
        repetition({"main;a": 40, "main;c": 9}, 990, None, {"perf": 1999}),
    ]
    big = {f"main;f{i:05d};leaf{i % 90}": 1 + i % 7 for i in range(30_000)}
    kept = digest(["perf"], reps, big)
    text = json.dumps(kept)
    assert len(text) < 80 * 1024 and check(json.loads(text)) is None
    assert kept["repetitions"][1]["leaves"] == {"a": 40, "c": 9}
    assert kept["repetitions"][0]["samples"] == 57 and kept["repetitions"][0]["rate_hz"] == {
        "perf": 1999
    }
    assert check({"schema": 2}) is not None and check([]) == "not an object"
