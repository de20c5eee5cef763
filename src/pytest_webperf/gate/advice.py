"""Advice in a verdict's reasons: what to do next, said once, never a failure reason.

``decide.verdict_of`` puts two kinds of text among a verdict's reasons that are
not failed checks: why a run is not a pass (``generator-bound: ...``) and that
there was nothing to compare with (``no baseline ...``). A failed test shows only
its failed checks; the terminal summary says each piece of advice once, with the
tests it applies to, instead of once per test.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pytest_webperf.models.measurement import Measurement

ADVICE_PREFIXES = ("generator-bound:", "no baseline")
LISTED = 10  # places named per advice; the JSON report has every verdict


def is_advice(reason: str) -> bool:
    return reason.startswith(ADVICE_PREFIXES)


def failure_reasons(reasons: Iterable[str]) -> list[str]:
    """The failed checks among a verdict's reasons."""
    return [r for r in reasons if not is_advice(r)]


def where(measurement: Measurement) -> str:
    """How the terminal summary names a measurement (``nodeid [name]``)."""
    return f"{measurement.nodeid} [{measurement.name}]"


def advice_of(measurements: Iterable[Measurement]) -> list[tuple[str, str]]:
    """(where, advice) for every piece of advice in the measurements' verdicts."""
    return [
        (where(m), reason)
        for m in measurements
        if m.verdict is not None
        for reason in m.verdict.reasons
        if is_advice(reason)
    ]


def grouped(advice: Iterable[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """(advice, the places it applies to) per distinct advice, in first-seen order."""
    places: dict[str, list[str]] = {}
    for place, text in advice:
        seen = places.setdefault(text, [])
        if place not in seen:
            seen.append(place)
    return list(places.items())


def advice_lines(advice: Iterable[tuple[str, str]]) -> list[str]:
    """One line per distinct advice; a second line lists the tests when there are several."""
    lines: list[str] = []
    for text, places in grouped(advice):
        if len(places) == 1:
            lines.append(f"{places[0]}: {text}")
        else:
            shown = places if len(places) <= LISTED else [*places[: LISTED - 1], "..."]
            lines += [text, f"  applies to {len(places)} measurements: {', '.join(shown)}"]
    return lines


def group_summary_advice(lines: Sequence[str], advice: Sequence[tuple[str, str]]) -> list[str]:
    """``lines`` with the per-test advice lines (``where: advice``) replaced, where the
    first of them stood, by each advice said once (``advice_lines``)."""
    per_test = {f"{place}: {text}" for place, text in advice}
    kept: list[str] = []
    insert_at: int | None = None
    for line in lines:
        if line in per_test:
            insert_at = len(kept) if insert_at is None else insert_at
        else:
            kept.append(line)
    if insert_at is None:
        return kept
    return kept[:insert_at] + advice_lines(advice) + kept[insert_at:]
