"""The A/B gate: the change (B, the working tree) against its base (A, a git ref),
measured interleaved in the same run.

Why: on a CI runner every job is a new machine, and on one machine stored baselines
drift 5-8 % within minutes, so no stored number can judge a change there. Measuring
both sides in the same job, alternating, lets drift and noisy neighbours hit both alike
(randomized multiple interleaved trials, Abedi & Brecht, ICPE 2017; duet benchmarking,
Bulej et al., 2020).

How: both targets are up for the whole test and get the same placement. Pairs run in
balanced blocks, A B, B A, A B, ... so a linear drift cancels. Both sides are started
afresh every ``restart_every`` pairs, so each side averages over several process
instances (two identical copies of a server differ by several per cent for as long as
they live: memory layout, hash seed, ASLR). ``--webperf-repeat`` is the minimum number
of pairs; the run looks at the data at N, 2N, 4N, ... pairs and stops as soon as every
check is decided, or when the next pair would overrun the budget (which is a last
look). The budget is the time spent adding pairs beyond the minimum, as the option
says: the minimum is always run, whatever it takes. Look k may fail a check only at
level alpha / 2**k (``decide.evaluate``), so all looks together keep the false-alarm
rate at alpha; looking at doubling counts keeps the
number of looks, and so the price in detectable change, small.

With ``plan.profile`` (``--webperf-profile``), both sides of every pair are profiled
alike over their measured phase, at the rates ``profiles.Profiler`` plans pair by pair
(the same for both sides of a pair): ``Pairs.profile``, which the judge diffs per
function per request (``gate/attribution.py``).

This module is a layer above ``loop.run_repetition``: the loop is the same for both
sides and for HTTP and MQTT.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from pytest_webperf.measurement.loop import Label, LoadKind, TargetDied, died, run_repetition
from pytest_webperf.measurement.plan import MonitorFactory, RunPlan, no_monitor
from pytest_webperf.measurement.profiles import Profiler
from pytest_webperf.models.measurement import RunResult
from pytest_webperf.models.progress import NoProgress, Progress
from pytest_webperf.profiling.capture import Capture
from pytest_webperf.targets.paired import PairedTarget


@dataclass(frozen=True)
class PairBudget:
    """How many pairs an A/B measurement runs: at least ``min_pairs``, more while a check
    is undecided and ``budget_s`` allows, both sides restarted every ``restart_every``."""

    min_pairs: int
    budget_s: float  # time for the pairs added beyond ``min_pairs`` while a check is open
    restart_every: int = 1  # pairs per instance; 0: never restarted


@dataclass
class Pairs:
    """What an A/B measurement ran, pair by pair."""

    base: list[RunResult] = field(default_factory=list)
    change: list[RunResult] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # "AB" or "BA" per pair
    looks: int = 0
    stopped: str = ""  # why no more pairs were added
    seconds: float = 0.0  # wall time of the pairs so far
    # with profiling: each repetition's capture (or why there is none), per side
    captures: dict[str, list[Capture | str]] = field(default_factory=lambda: {"A": [], "B": []})
    profile: dict[str, Any] | None = None  # both sides' profiles (JSON), or why none

    @property
    def instances(self) -> list[int]:
        """Which process instances each finished pair ran on (both sides restart
        together, so the change's runs say it)."""
        return [run.instance or 0 for run in self.change[: len(self.order)]]


# Whether every check is decided, given the pairs so far and the number of this look.
Settled = Callable[[Pairs], bool]


def order_of(index: int) -> str:
    """A B, B A, A B, ...: balanced blocks of two pairs, so a linear drift cancels."""
    return "AB" if index % 2 == 0 else "BA"


def _instance(
    target: PairedTarget, kind: LoadKind, budget: PairBudget, index: int, instance: int
) -> int:
    """The instance pair ``index`` runs on: its own for a kind whose rounds start their
    own (a counted one), else the current one, both sides restarted every
    ``budget.restart_every`` pairs."""
    if kind.fresh:
        return index
    if index and budget.restart_every and index % budget.restart_every == 0:
        target.restart()
        return instance + 1
    return instance


def run_pairs(
    target: PairedTarget,
    kind: LoadKind,
    plan: RunPlan,
    budget: PairBudget,
    settled: Settled,
    *,
    monitor_factory: MonitorFactory = no_monitor,
    progress: Progress | None = None,
    label: Label | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Pairs:
    """Interleaved pairs until every check is decided or the budget is spent (at least
    ``punctuality.min_pairs``). Raises ``loop.TargetDied`` (with the change's runs so far)
    if either side dies."""
    sides = {"A": target.side("A"), "B": target.change}
    for side in sides.values():
        kind.check(side)
        dead = died(side, ())
        if dead is not None:
            raise dead
    label = label or Label()
    pairs = Pairs()
    profiler = Profiler.of(plan.profile, plan.duration_s, budget.min_pairs)
    if profiler is not None:
        pairs.captures = profiler.captures
        monitor_factory = profiler.monitors(monitor_factory)
    started = clock()
    minimum_done: float | None = None  # when the minimum of pairs was done
    instance = 0
    next_look = budget.min_pairs
    while True:
        index = len(pairs.order)
        instance = _instance(target, kind, budget, index, instance)
        order = order_of(index)
        for letter in order:
            runs = pairs.base if letter == "A" else pairs.change
            try:
                measure = partial(
                    run_repetition,
                    sides[letter],
                    kind,
                    plan,
                    index + 1,
                    monitor_factory=monitor_factory,
                    progress=progress or NoProgress(),
                    label=Label(label.nodeid, label.name, letter, max(next_look, index + 1)),
                    before=pairs.change,
                )
                run = measure() if profiler is None else profiler.repetition(letter, measure)
            except TargetDied as exc:  # both sides have one name: say which one died
                which = "the base (A)" if letter == "A" else "the change (B)"
                message = str(exc.args[0]).split("\n--- last lines")[0]
                raise TargetDied(f"{which}: {message}", exc.logs, exc.runs) from None
            runs.append(replace(run, instance=instance))
        pairs.order.append(order)
        now = clock()
        pairs.seconds = now - started
        if profiler is not None:
            profiler.replan({"A": pairs.base, "B": pairs.change})
        if len(pairs.order) == budget.min_pairs:
            minimum_done = now
        beyond = 0.0 if minimum_done is None else now - minimum_done
        next_look = look(pairs, budget, settled, next_look, spent=now - started, beyond=beyond)
        if pairs.stopped:
            pairs.profile = profile_of(pairs, profiler)
            return pairs


def look(
    pairs: Pairs,
    budget: PairBudget,
    settled: Settled,
    next_look: int,
    *,
    spent: float,
    beyond: float,
) -> int:
    """After a pair (``spent`` seconds of pairs so far, ``beyond`` of them since the
    minimum was done): at a look (N, 2N, 4N... pairs), stop if every check is decided;
    else stop if the next pair would overrun the budget for pairs beyond the minimum (the
    end is a look too). Sets ``pairs.stopped`` when it stops; the next look's pair count."""
    done = len(pairs.order)
    if done == next_look:
        pairs.looks += 1
        if settled(pairs):
            pairs.stopped = f"every check decided after {done} pairs"
            return next_look
        next_look *= 2
    if done >= budget.min_pairs and beyond + spent / done > budget.budget_s:
        if done != next_look // 2:  # pairs since the last look: the end is a look too
            pairs.looks += 1
        pairs.stopped = (
            f"budget of {budget.budget_s:g}s spent: {done - budget.min_pairs} pairs added "
            f"beyond the {budget.min_pairs} asked (a pair took {spent / done:.0f} s), "
            "checks still undecided"
        )
    return next_look


def profile_of(pairs: Pairs, profiler: Profiler | None) -> dict[str, Any] | None:
    """Both sides' profiles over the pairs run (``Profiler.profile``), or None."""
    if profiler is None:
        return None
    done = len(pairs.order)
    return profiler.profile({"A": pairs.base[:done], "B": pairs.change[:done]}, limit=done)
