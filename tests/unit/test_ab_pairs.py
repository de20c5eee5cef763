"""The A/B schedule: balanced order, restarts per block, looks at doubling counts, budget."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from pytest_webperf.measurement import pairs as interleaved
from pytest_webperf.measurement.plan import RunPlan
from pytest_webperf.models.measurement import RunResult
from pytest_webperf.models.samples import Latency
from pytest_webperf.targets.paired import PairedTarget


class FakeTarget:
    def __init__(self, name: str) -> None:
        self.name, self.host, self.port = name, "127.0.0.1", 1
        self.restarts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def parts(self) -> dict[str, int]:
        return {}

    def check_alive(self) -> None:
        pass

    def logs(self) -> str:
        return ""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def restart(self) -> None:
        self.restarts += 1
        self.port += 1


class FakeKind:
    fresh = False

    def check(self, target: Any) -> None:
        pass

    @contextmanager
    def round(self, target: Any, plan: RunPlan, repetition: int) -> Iterator[Any]:
        yield None


def run(repetition: int, side: str) -> RunResult:
    return RunResult(repetition, 1, 1.0, 100, 0, 0, 0, 0, Latency(1, 1, 1, 1, 1, 1, 1), ())


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Which side each repetition ran on, in order."""
    sides: list[str] = []

    def fake(target: FakeTarget, kind: Any, plan: Any, repetition: int, **kw: Any) -> RunResult:
        sides.append(kw["label"].side)
        return run(repetition, kw["label"].side)

    monkeypatch.setattr(interleaved, "run_repetition", fake)
    return sides


PLAN = RunPlan(concurrency=1, duration_s=1, warmup_s=0, repeat=3)


def pair() -> tuple[PairedTarget, FakeTarget, FakeTarget]:
    a, b = FakeTarget("a"), FakeTarget("b")
    return PairedTarget(b, a, changed=True), a, b


def test_pairs_alternate_ab_ba_and_restart_both_sides_every_block(ran: list[str]) -> None:
    target, a, b = pair()
    pairs = interleaved.run_pairs(
        target, FakeKind(), PLAN, interleaved.PairBudget(4, 1e9, 2), lambda p: True
    )
    assert pairs.order == ["AB", "BA", "AB", "BA"]
    assert ran == ["A", "B", "B", "A", "A", "B", "B", "A"]
    assert pairs.instances == [0, 0, 1, 1]
    assert (a.restarts, b.restarts) == (1, 1)
    assert target.port == b.port  # the test's handle follows the restarted change side
    assert pairs.looks == 1 and "decided" in pairs.stopped


def test_undecided_checks_add_pairs_looking_at_doubling_counts(ran: list[str]) -> None:
    target, _, _ = pair()
    looked_at: list[int] = []

    def settled(p: interleaved.Pairs) -> bool:
        looked_at.append(len(p.order))
        return len(p.order) >= 12

    pairs = interleaved.run_pairs(
        target, FakeKind(), PLAN, interleaved.PairBudget(3, 1e9, 1), settled
    )
    assert looked_at == [3, 6, 12]
    assert pairs.looks == 3 and pairs.instances == list(range(12))


def test_the_budget_ends_an_undecided_run_with_a_last_look(ran: list[str]) -> None:
    target, _, _ = pair()
    now = [0.0]

    def clock() -> float:
        now[0] += 5.0  # every pair costs about 5 s
        return now[0]

    pairs = interleaved.run_pairs(
        target, FakeKind(), PLAN, interleaved.PairBudget(3, 12, 1), lambda p: False, clock=clock
    )
    # the budget is beyond the 3 pairs asked: 12 s buys 2 more pairs of 5 s, not a third
    assert len(pairs.order) == 5
    assert pairs.looks == 2  # the look at 3 pairs and the last one at the budget
    assert pairs.stopped == (
        "budget of 12s spent: 2 pairs added beyond the 3 asked (a pair took 5 s), "
        "checks still undecided"
    )
    assert pairs.seconds == 25.0


def test_a_budget_of_one_look_reaches_it(ran: list[str]) -> None:
    """The CI how-to's settings: 3 pairs asked and 45 s to add pairs, 15 s a pair (a
    Python gRPC service at 3 s a repetition): the pairs added reach the next look, at 6."""
    target, _, _ = pair()
    now = [0.0]

    def clock() -> float:
        now[0] += 15.0
        return now[0]

    looked_at: list[int] = []

    def settled(p: interleaved.Pairs) -> bool:
        looked_at.append(len(p.order))
        return False

    pairs = interleaved.run_pairs(
        target, FakeKind(), PLAN, interleaved.PairBudget(3, 45, 1), settled, clock=clock
    )
    assert looked_at == [3, 6] and len(pairs.order) == 6


def test_the_minimum_pairs_always_run(ran: list[str]) -> None:
    target, _, _ = pair()
    ticks = iter(range(1000))
    pairs = interleaved.run_pairs(
        target,
        FakeKind(),
        PLAN,
        interleaved.PairBudget(3, 0.001, 0),
        lambda p: False,
        clock=lambda: float(next(ticks)),
    )
    assert len(pairs.order) == 3 and pairs.instances == [0, 0, 0]


# --- the cores a target can use (its capacity estimate) -------------------------------------


def samples(*cpu: float, threads: int = 8) -> list[Any]:
    from pytest_webperf.models.samples import ResourceSample

    return [
        ResourceSample(t=float(i), part="p", cpu_percent=c, rss_mb=1, processes=1, threads=threads)
        for i, c in enumerate(cpu)
    ]


def test_a_single_threaded_target_saturated_at_one_core_can_use_one() -> None:
    from pytest_webperf.measurement.repetition import usable_cores

    assert usable_cores(samples(99, 100, 98, 100), None, machine=2) == 1.0
    assert usable_cores(samples(150, 160, 155), None, machine=2) == 2.0  # not saturated at 1
    assert usable_cores(samples(40, 50), None, machine=4) == 4.0  # not saturated at all
    assert usable_cores(samples(99, 100), 1.5, machine=4) == 1.5  # a limit wins
    assert usable_cores([], None, machine=2) == 2.0


def test_a_target_can_use_no_more_cores_than_it_has_threads() -> None:
    from pytest_webperf.measurement.repetition import usable_cores

    # one thread kept at 70 % of a core by a busy machine: still one core, not two
    assert usable_cores(samples(70, 72, 68, threads=1), None, machine=2) == 1.0
    assert usable_cores(samples(150, 160, threads=3), None, machine=4) == 3.0
    assert usable_cores(samples(150, 160, threads=4), None, machine=4) == 4.0  # as many as cores
    assert usable_cores(samples(70, threads=1), 0.5, machine=2) == 0.5  # a limit still wins


def test_a_side_that_dies_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_webperf.measurement.loop import TargetDied

    def fake(target: FakeTarget, kind: Any, plan: Any, repetition: int, **kw: Any) -> RunResult:
        if kw["label"].side == "A" and repetition == 2:
            raise TargetDied("a died during the measurement: a is not running", "boom", ())
        return run(repetition, kw["label"].side)

    monkeypatch.setattr(interleaved, "run_repetition", fake)
    target, _, _ = pair()
    with pytest.raises(TargetDied, match=r"^the base \(A\): a died during the measurement"):
        interleaved.run_pairs(
            target, FakeKind(), PLAN, interleaved.PairBudget(3, 1e9, 1), lambda p: True
        )


class FreshKind(FakeKind):
    fresh = True  # a counted round starts its own instances


def test_a_kind_that_starts_its_own_instances_is_never_restarted(ran: list[str]) -> None:
    target, a, b = pair()
    pairs = interleaved.run_pairs(
        target, FreshKind(), PLAN, interleaved.PairBudget(3, 1e9, 1), lambda p: True
    )
    assert (a.restarts, b.restarts) == (0, 0)
    assert pairs.instances == [0, 1, 2]  # each pair its own instances


def test_repetitions_of_such_a_kind_are_each_an_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_webperf.measurement import loop

    monkeypatch.setattr(loop, "run_repetition", lambda t, k, p, r, **kw: run(r, ""))
    target = FakeTarget("t")
    runs = loop.run_repetitions(target, FreshKind(), PLAN, restart_every=1)
    assert [r.instance for r in runs] == [0, 1, 2] and target.restarts == 0
