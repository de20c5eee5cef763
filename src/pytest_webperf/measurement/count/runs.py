"""A counted measurement's repetitions: one side's in turn (``run_counted``), or an A/B
run's pairs with both sides counted at once, each pinned to a core of its own
(``run_counted_pairs``).

Counts do not move with the machine's load (callgrind counts instructions, not time), so
the two sides of a pair need not take turns as timed ones must: they run side by side,
each side's instances on a core of their own (``taskset``), and a pair takes the time of
its slower side instead of both. Pairs are added, as a timed A/B run adds them, while a
check is undecided and the budget allows (``measurement/pairs.py``'s looks at N, 2N, 4N...).
On a machine with one core the sides take turns.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from pytest_webperf.errors import OptionError
from pytest_webperf.measurement.count.kind import CountedRequests
from pytest_webperf.measurement.count.window import Probe, Repetition, Sizing
from pytest_webperf.measurement.loop import Label, TargetDied
from pytest_webperf.measurement.pairs import PairBudget, Pairs, Settled, look
from pytest_webperf.measurement.plan import RunPlan
from pytest_webperf.models.measurement import RunResult
from pytest_webperf.models.progress import NoProgress, Progress, RepetitionDone
from pytest_webperf.targets.base import Target
from pytest_webperf.targets.paired import PairedTarget
from pytest_webperf.targets.wrap import Wrappable

PROBE_WAIT_S = 900.0  # the longest a side waits for the other's probe


def cores() -> list[int]:
    """The cores this process may run on, in order."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


class _Sizer:
    """The sizing both sides of the first pair share: each gives its probe and waits for
    the other's, so that both send the same N (the larger of the two sides' needs)."""

    def __init__(self, kind: CountedRequests, sides: int) -> None:
        self.kind, self.sides = kind, sides
        self.probes: list[Probe] = []
        self.barrier = threading.Barrier(sides)
        self.lock = threading.Lock()

    def __call__(self, probe: Probe | None) -> tuple[int, float]:
        if probe is not None and not self.kind.probed:
            with self.lock:
                self.probes.append(probe)
            if self.sides > 1:
                self.barrier.wait(PROBE_WAIT_S)
        return self.kind.size(self.probes)


def _repetition(
    target: Target, kind: CountedRequests, plan: RunPlan, index: int, cpus: tuple[int, ...]
) -> Repetition:
    if not isinstance(target, Wrappable):
        raise OptionError(f"{target.name} cannot be counted: it cannot be started again")
    return Repetition(target, kind.settings(plan.concurrency), plan, index, cpus)


def _run(repetition: Repetition, kind: CountedRequests, sizer: Sizing) -> RunResult:
    target = repetition.target
    pinning = target.pinning()
    tool = kind.tool
    callers = min(kind.callers, pinning.callers)
    tool = replace(tool, smc_check=pinning.smc_check, callers=callers, skip=pinning.skip)
    try:
        result = repetition.run(sizer, pinning, tool)
    except BaseException:
        if isinstance(sizer, _Sizer):
            sizer.barrier.abort()  # the other side stops waiting for this one's probe
        raise
    if repetition.window is not None:
        kind.keep(target, repetition.window, repetition.packages)
    if repetition.restless:  # both sides of every later pair alike: back to back
        kind.paced = False
    if repetition.native_restless:  # ... in the native window, on its own
        kind.native_paced = False
    notes = kind.notes(target, pinning, tool)
    assert result.counts is not None
    counts = replace(result.counts, notes=tuple(dict.fromkeys((*notes, *result.counts.notes))))
    return replace(result, counts=counts, instance=repetition.index - 1)


def _done(progress: Progress, label: Label, side: str, result: RunResult, total: int) -> None:
    progress.done(
        RepetitionDone(
            nodeid=label.nodeid,
            name=label.name,
            side=side,
            repetition=result.repetition,
            repetitions=total,
            requests=result.requests,
            rps=result.rps,
            errors=result.errors,
            p95_ms=None,
        )
    )


def run_counted(
    target: Target,
    kind: CountedRequests,
    plan: RunPlan,
    *,
    progress: Progress | None = None,
    label: Label | None = None,
    **_: object,  # what the loop's runs take beside (sampling, restarts): none here
) -> list[RunResult]:
    """Every repetition of one side, in turn, each on fresh instances."""
    kind.check(target)
    progress, label = progress or NoProgress(), label or Label()
    results: list[RunResult] = []
    for index in range(1, plan.repeat + 1):
        repetition = _repetition(target, kind, plan, index, ())
        try:
            result = _run(repetition, kind, _Sizer(kind, 1))
        except TargetDied as exc:
            raise TargetDied(str(exc.args[0]), exc.logs, results) from None
        results.append(result)
        _done(progress, label, "", result, plan.repeat)
    return results


def run_counted_pairs(
    target: PairedTarget,
    kind: CountedRequests,
    plan: RunPlan,
    budget: PairBudget,
    settled: Settled,
    *,
    progress: Progress | None = None,
    label: Label | None = None,
    clock: Callable[[], float] = time.monotonic,
    **_: object,  # what the timed pairs take beside (sampling): none here
) -> Pairs:
    """Pairs of both sides counted at once, until every check is decided or the budget is
    spent (at least ``budget.min_pairs``), looking at N, 2N, 4N... pairs."""
    sides = {"A": target.side("A"), "B": target.change}
    for side in sides.values():
        kind.check(side)
    progress, label = progress or NoProgress(), label or Label()
    free = cores()
    together = len(free) >= 2
    pairs = Pairs()
    started = clock()
    minimum_done: float | None = None  # when the minimum of pairs was done
    next_look = budget.min_pairs
    while True:
        index = len(pairs.order)
        sizer = _Sizer(kind, 2 if together else 1)
        # each side on a core of its own, the cores swapped from pair to pair (as timed
        # pairs alternate A B, B A): whatever one core does to a side, both sides get
        first, second = ((free[0],), (free[1],)) if together else ((), ())
        pins = {"A": first, "B": second} if index % 2 == 0 else {"A": second, "B": first}
        reps = {
            letter: _repetition(side, kind, plan, index + 1, pins[letter])
            for letter, side in sides.items()
        }
        results = _pair(reps, kind, sizer, together, pairs)
        for letter in "AB":
            runs = pairs.base if letter == "A" else pairs.change
            runs.append(replace(results[letter], instance=index))
            _done(progress, label, letter, results[letter], max(next_look, index + 1))
        pairs.order.append("AB")  # at once, not in turn
        now = clock()
        pairs.seconds = now - started
        if len(pairs.order) == budget.min_pairs:
            minimum_done = now
        beyond = 0.0 if minimum_done is None else now - minimum_done
        next_look = look(pairs, budget, settled, next_look, spent=now - started, beyond=beyond)
        if pairs.stopped:
            return pairs


def _pair(
    reps: dict[str, Repetition],
    kind: CountedRequests,
    sizer: _Sizer,
    together: bool,
    pairs: Pairs,
) -> dict[str, RunResult]:
    """Both sides' repetitions of one pair: at once (two threads) or in turn."""
    which = {"A": "the base (A)", "B": "the change (B)"}
    results: dict[str, RunResult] = {}
    if together:
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="webperf-count") as pool:
            futures = {letter: pool.submit(_run, rep, kind, sizer) for letter, rep in reps.items()}
            errors = {}
            for letter, future in futures.items():
                try:
                    results[letter] = future.result()
                except BaseException as exc:  # the first side's error is raised below
                    errors[letter] = exc
        if errors:  # the side that failed first, not the one whose wait it broke
            real = {
                k: e for k, e in errors.items() if not isinstance(e, threading.BrokenBarrierError)
            }
            letter, first = next(iter((real or errors).items()))
            _raise(first, which[letter], pairs)
        return results
    for letter, rep in reps.items():
        try:
            results[letter] = _run(rep, kind, sizer)
        except TargetDied as exc:
            _raise(exc, which[letter], pairs)
    return results


def _raise(exc: BaseException, which: str, pairs: Pairs) -> None:
    if isinstance(exc, TargetDied):
        message = str(exc.args[0]).split("\n--- last lines")[0]
        raise TargetDied(f"{which}: {message}", exc.logs, pairs.change) from None
    raise exc
