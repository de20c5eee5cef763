"""What a bisect hunts: BAD's change against GOOD, measured first, and how a step that
its test's own checks leave undecided is read against it.

Why: a test's threshold (``cpu_per_req:5%``) is the smallest change the gate must see;
a bisect looks for the commit that made a known, usually larger, change. A step
whose interval is too wide for the threshold can still be plain about the hunted
effect. For each check that failed in BAD against GOOD, with ``effect`` the change
BAD made (worse is up; mirrored for a metric where worse is down):

- the step's interval lies wholly short of ``effect``: it rules the effect out, the
  step is **good** for this hunt;
- it excludes no change (wholly on the worse side of 0) and reaches ``effect``: it is
  consistent with the whole effect, the step is **bad**;
- it spans both 0 and ``effect``: **undecided** (measured again with more pairs, then
  skipped).

A step is bad when any hunted check says bad, good when every one says good.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pytest_webperf.gate.metrics import METRICS

Reading = Literal["good", "bad", "undecided"]


@dataclass(frozen=True)
class Hunted:
    """One check BAD failed against GOOD: its test, its check and the change."""

    test: str  # nodeid [name]
    check: str  # as the report names it, e.g. "cpu_per_req:5%"
    metric: str
    effect: float  # relative change, e.g. 0.21
    low: float | None = None  # its interval (None: taken as exact)
    high: float | None = None

    def effect_text(self) -> str:
        """``+21.0% (+14.4..+28.0%)``"""
        if self.low is None or self.high is None:
            return f"{self.effect * 100:+.1f}%"
        return f"{self.effect * 100:+.1f}% ({self.low * 100:+.1f}..{self.high * 100:+.1f}%)"

    def describe(self) -> str:
        return f"{self.test}: {self.check} {self.effect_text()}"


def _key(entry: Mapping[str, Any]) -> str:
    return f"{entry.get('nodeid')} [{entry.get('name')}]"


def _checks(report: Mapping[str, Any] | None) -> dict[tuple[str, str], Mapping[str, Any]]:
    return {
        (_key(test), str(check.get("check", check.get("metric")))): check
        for test in (report or {}).get("tests", ())
        for check in test.get("verdict", {}).get("checks", ())
    }


def hunted(report: Mapping[str, Any] | None) -> list[Hunted]:
    """The relative checks that failed in BAD's run against GOOD, with their change."""
    found = []
    for (test, name), check in _checks(report).items():
        metric = str(check.get("metric"))
        change = check.get("change")
        if check.get("outcome") != "fail" or change is None or metric not in METRICS:
            continue
        low, high = check.get("low"), check.get("high")
        found.append(
            Hunted(
                test,
                name,
                metric,
                float(change),
                None if low is None else float(low),
                None if high is None else float(high),
            )
        )
    return found


def read(check: Mapping[str, Any] | None, hunt: Hunted) -> Reading:
    """One hunted check of a step, read against the hunted effect (the module's rule)."""
    if check is None or check.get("change") is None:
        return "undecided"
    if check.get("low") is None or check.get("high") is None:
        return "undecided"
    change, low, high = float(check["change"]), float(check["low"]), float(check["high"])
    effect = hunt.effect
    effect_low = hunt.low if hunt.low is not None else effect
    effect_high = hunt.high if hunt.high is not None else effect
    if METRICS[hunt.metric].bad == "down":  # mirrored: worse is down
        change, low, high = -change, -high, -low
        effect, effect_low = -effect, -effect_high
    # the half-widths that face each other: the step's upward, the effect's downward
    spread = math.hypot(max(0.0, high - change), max(0.0, effect - effect_low))
    if effect - change > spread:
        return "good"
    if low > 0:
        return "bad"
    return "undecided"


def judge(report: Mapping[str, Any] | None, hunts: list[Hunted]) -> tuple[Reading, str]:
    """A step's reading against every hunted check, and why, in one line."""
    checks = _checks(report)
    readings = []
    for hunt in hunts:
        check = checks.get((hunt.test, hunt.check))
        reading = read(check, hunt)
        interval = (
            f"{float(check['low']) * 100:+.1f}..{float(check['high']) * 100:+.1f}%"
            if check is not None and check.get("low") is not None and check.get("high") is not None
            else "no interval"
        )
        readings.append(
            (reading, f"{hunt.check} {interval} against {hunt.effect_text()}: {RULES[reading]}")
        )
    if any(r == "bad" for r, _ in readings):
        outcome: Reading = "bad"
    elif readings and all(r == "good" for r, _ in readings):
        outcome = "good"
    else:
        outcome = "undecided"
    return outcome, "; ".join(why for _, why in readings)


RULES: dict[Reading, str] = {
    "good": "credibly short of it, rules it out",
    "bad": "excludes no change, not credibly short of it",
    "undecided": "consistent with both no change and the hunted effect",
}
