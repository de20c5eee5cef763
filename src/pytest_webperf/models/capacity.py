"""The capacity search, pure: which arrival rates to probe, and what the probes say.

    found = search(probe, start=50, limit=5000)   # probe(rate) -> Probe, measured elsewhere
    found.rate, found.low, found.high              # the highest rate that met the SLO, in
                                                   # [low, high): last good, first bad

Rates rise geometrically (``factor``) from ``start`` until a probe breaks the SLO, then
the interval between the last good and the first bad rate is bisected (geometric mean)
until it is narrower than ``tolerance``. A first probe that breaks it steps down the same
way. A probe whose generator could not offer its rate (``generator-bound``) ends the
search without a capacity: what was measured is the generator. Nothing here measures;
``fixture/capacity.py`` runs the probes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Decision = Literal["pass", "fail", "generator-bound"]
Status = Literal["found", "generator-bound", "below-start", "at-limit"]
DECISIONS: tuple[Decision, ...] = ("pass", "fail", "generator-bound")


@dataclass(frozen=True)
class Probe:
    """One offered rate, measured: its decision and what the decision was made from."""

    rate: float  # offered, requests per second in total
    decision: Decision
    achieved: float = 0.0  # requests per second completed (mean over repetitions)
    p50_ms: float | None = None
    p99_ms: float | None = None
    error_rate: float = 0.0
    repetitions: int = 1
    reasons: tuple[str, ...] = ()  # what broke (a failure) or flagged it (generator-bound)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rate": self.rate,
            "decision": self.decision,
            "achieved": self.achieved,
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "error_rate": self.error_rate,
            "repetitions": self.repetitions,
            "reasons": list(self.reasons),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Probe:
        decision = data["decision"]
        if decision not in DECISIONS:
            raise ValueError(f"a probe's decision is one of {DECISIONS}, not {decision!r}")
        return cls(
            rate=float(data["rate"]),
            decision=decision,
            achieved=float(data.get("achieved", 0.0)),
            p50_ms=data.get("p50_ms"),
            p99_ms=data.get("p99_ms"),
            error_rate=float(data.get("error_rate", 0.0)),
            repetitions=int(data.get("repetitions", 1)),
            reasons=tuple(data.get("reasons", ())),
        )


@dataclass(frozen=True)
class Capacity:
    """What a capacity search found. ``rate``: the highest offered rate that met the SLO
    (None: none did, or the generator could not offer the rates); the capacity lies in
    [``low``, ``high``) (``high`` None: not reached, ``low`` None: not even the lowest
    rate probed was met)."""

    status: Status
    rate: float | None
    low: float | None
    high: float | None
    slo: str = ""
    probes: tuple[Probe, ...] = ()
    reason: str = ""
    name: str = ""
    server: str = ""

    @property
    def interval(self) -> tuple[float | None, float | None]:
        return (self.low, self.high)

    @property
    def curve(self) -> list[Probe]:
        """The latency-throughput curve: every probe, by offered rate (a rate probed
        twice keeps its last probe)."""
        return [p for _, p in sorted({p.rate: p for p in self.probes}.items())]

    @property
    def knee(self) -> float | None:
        """The first offered rate that broke the SLO (where the curve turns)."""
        return self.high

    def __str__(self) -> str:
        if self.status == "found" and self.rate is not None and self.high is not None:
            return (
                f"capacity {self.rate:,.0f} req/s (between {self.low:,.0f} and "
                f"{self.high:,.0f}) at {self.slo}, {len(self.probes)} probes"
            )
        return f"capacity {self.status}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "server": self.server,
            "status": self.status,
            "rate": self.rate,
            "low": self.low,
            "high": self.high,
            "slo": self.slo,
            "reason": self.reason,
            "probes": [p.to_dict() for p in self.probes],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Capacity:
        return cls(
            status=data["status"],
            rate=data.get("rate"),
            low=data.get("low"),
            high=data.get("high"),
            slo=str(data.get("slo", "")),
            probes=tuple(Probe.from_dict(p) for p in data.get("probes", ())),
            reason=str(data.get("reason", "")),
            name=str(data.get("name", "")),
            server=str(data.get("server", "")),
        )


@dataclass(frozen=True)
class Repetition:
    """One repetition of a probe, judged: its decision and whether it was clear (every
    figure of the SLO far from its limit), so that one repetition is enough."""

    decision: Decision
    clear: bool = False
    reasons: tuple[str, ...] = field(default=())


def settle(repetitions: Sequence[Repetition], most: int = 3) -> Decision | None:
    """A probe's decision from its repetitions so far, or None: run another.

    A generator-bound repetition decides at once (the rate was not offered). One clear
    repetition decides; two that agree decide; at ``most`` repetitions the majority
    does, a tie failing (a rate met only half the time is not sustained)."""
    if not repetitions:
        return None
    if any(r.decision == "generator-bound" for r in repetitions):
        return "generator-bound"
    passed = sum(r.decision == "pass" for r in repetitions)
    failed = len(repetitions) - passed
    if len(repetitions) == 1:
        return repetitions[0].decision if repetitions[0].clear else None
    if passed >= 2 and failed == 0:
        return "pass"
    if failed >= 2 and passed == 0:
        return "fail"
    if len(repetitions) >= most:
        return "pass" if passed > failed else "fail"
    return None


class _Search:
    """One search's state: the probes so far, the last good and the first bad rate."""

    def __init__(self, slo: str, max_probes: int) -> None:
        self.slo, self.max_probes = slo, max_probes
        self.probes: list[Probe] = []
        self.low: float | None = None
        self.high: float | None = None

    @property
    def spent(self) -> bool:
        return len(self.probes) >= self.max_probes

    def took(self, rate: float, done: Probe) -> Probe:
        self.probes.append(done)
        if done.decision == "pass":
            self.low = rate
        elif done.decision == "fail":
            self.high = rate
        return done

    def ended(self, status: Status, why: str = "") -> Capacity:
        rate = self.low if status in ("found", "at-limit") else None
        high = None if status == "generator-bound" else self.high
        return Capacity(status, rate, self.low, high, self.slo, tuple(self.probes), why)

    def bound(self, done: Probe) -> Capacity:
        why = "; ".join(done.reasons)
        return self.ended(
            "generator-bound", f"the generator could not offer {done.rate:,.0f} req/s ({why})"
        )


Steps = Generator[float, Probe, Capacity]
DOWN_STEPS = 3  # a first probe that fails: as many steps down before "below-start"


def steps(
    *,
    start: float,
    limit: float,
    factor: float = 2.0,
    tolerance: float = 0.05,
    max_probes: int = 24,
    slo: str = "",
) -> Steps:
    """The search as a generator: it yields the next rate to probe, is sent that rate's
    ``Probe``, and returns the ``Capacity`` (so that two searches can take turns)."""
    if not (0 < start <= limit and math.isfinite(limit) and factor > 1 and tolerance > 0):
        raise ValueError(
            f"0 < start <= limit (finite), factor > 1, tolerance > 0: not {start}, {limit}, "
            f"{factor}, {tolerance}"
        )
    state = _Search(slo, max_probes)
    rate, down = start, 0
    while not state.spent and (state.low is None or state.high is None):  # bracket it
        done = state.took(rate, (yield rate))
        if done.decision == "generator-bound":
            return state.bound(done)
        if state.high is None and rate >= limit:
            return state.ended("at-limit", f"the SLO held up to the limit {limit:,g}")
        if state.high is None:
            rate = min(rate * factor, limit)
        elif state.low is None:
            rate, down = rate / factor, down + 1
            if down > DOWN_STEPS:
                return state.ended("below-start", f"the SLO broke even at {state.high:,.4g}/s")
    while state.low is not None and state.high is not None:  # bisect it
        if state.high / state.low <= 1 + tolerance:
            return state.ended("found")
        if state.spent:
            wider = f"stopped at {max_probes} probes, wider than {tolerance:.0%}"
            return state.ended("found", wider)
        mid = math.sqrt(state.low * state.high)
        done = state.took(mid, (yield mid))
        if done.decision == "generator-bound":
            return state.bound(done)
    if state.low is None:
        return state.ended("below-start", f"stopped at {max_probes} probes")
    return state.ended("at-limit", f"stopped at {max_probes} probes, none broke the SLO")


def search(probe: Callable[[float], Probe], **how: Any) -> Capacity:
    """The highest rate ``probe`` says meets the SLO, to within ``tolerance`` (the
    interval's high end over its low end is at most 1 + tolerance), never above
    ``limit``; at most ``max_probes`` probes (then the interval is wider, and said).
    ``how``: ``steps``' keywords."""
    return search_all([probe], **how)[0]


def search_all(probes: Sequence[Callable[[float], Probe]], **how: Any) -> list[Capacity]:
    """One search per ``probes[i]``, taking turns probe by probe (an A/B run: each side's
    probes interleaved with the other's, so that a drift of the machine falls on both);
    a search that has ended waits for the others."""
    searches = [steps(**how) for _ in probes]
    found: list[Capacity | None] = [None] * len(probes)
    due: list[float | None] = [next(s) for s in searches]
    while any(f is None for f in found):
        for i, search_i in enumerate(searches):
            rate = due[i]
            if found[i] is not None or rate is None:
                continue
            try:
                due[i] = search_i.send(probes[i](rate))
            except StopIteration as ended:
                found[i], due[i] = ended.value, None
    return [f for f in found if f is not None]
