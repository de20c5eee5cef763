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
look). Look k may fail a check only at level alpha / 2**k (``compare.evaluate``), so all
looks together keep the false-alarm rate at alpha; looking at doubling counts keeps the
number of looks, and so the price in detectable change, small.

This module is a layer above ``measure.run_repetition``: the loop is the same for both
sides and for HTTP and MQTT.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from pytest_webperf.catalog import Catalog, context_hash
from pytest_webperf.errors import CatalogError
from pytest_webperf.gitref import BaseTree, base_tree
from pytest_webperf.measure import (
    Label,
    LoadKind,
    MonitorFactory,
    RunPlan,
    TargetDied,
    died,
    no_monitor,
    run_repetition,
)
from pytest_webperf.models import RunResult
from pytest_webperf.progress import NoProgress, Progress
from pytest_webperf.targets.paired import PairedTarget


class Unchanged(Exception):
    """The test's targets are the same at the base ref: not measured (reported ``unchanged``)."""


@dataclass
class Against:
    """The base of this run: the ref's tree, its catalogue, and what changed since."""

    tree: BaseTree
    catalog: Catalog  # the working tree's catalogue (B)
    always: bool = False  # measure unchanged targets too (A/A)

    @cached_property
    def base_catalog(self) -> Catalog:
        """The same catalogue directories as they are at the ref (a directory that did
        not exist there is left out; one outside the repository is the same on both)."""
        directories = []
        for directory in self.catalog.directories:
            mapped = self.tree.map(directory) if self.tree.relative(directory) else directory
            if mapped is not None and mapped.is_dir():
                directories.append(mapped)
        return Catalog(directories)

    def has_server(self, name: str) -> bool:
        return name in self.base_catalog.names()

    def server_changed(self, name: str) -> bool:
        """Whether anything that builds or configures ``name`` (its image, the images and
        settings of what it depends on) differs at the base ref. A server the ref does not
        have is changed."""
        try:
            base = {s.name: s for s in self.base_catalog.closure(name)}
        except CatalogError:
            return True
        for spec in self.catalog.closure(name):
            other = base.get(spec.name)
            if other is None or self._fingerprint(self.catalog, spec.name) != self._fingerprint(
                self.base_catalog, other.name
            ):
                return True
        return False

    @staticmethod
    def _fingerprint(catalog: Catalog, name: str) -> tuple[str, str]:
        spec = catalog.get(name)
        settings = repr(
            (spec.env, spec.depends, spec.cpus, spec.memory, spec.health, spec.extra, spec.port_env)
        )
        return context_hash(catalog.image_spec(spec)), settings

    def path_changed(self, path: Path) -> bool:
        return self.tree.changed(path)

    def describe(self) -> dict[str, object]:
        return self.tree.describe()


@contextmanager
def against(rootdir: Path, ref: str, catalog: Catalog, *, always: bool) -> Iterator[Against]:
    with base_tree(rootdir, ref) as tree:
        yield Against(tree, catalog, always=always)


@dataclass(frozen=True)
class Schedule:
    min_pairs: int
    budget_s: float  # the test's measuring time beyond which no pair is added
    restart_every: int = 1  # pairs per instance; 0: never restarted


@dataclass
class Pairs:
    """What an A/B measurement ran, pair by pair."""

    base: list[RunResult] = field(default_factory=list)
    change: list[RunResult] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # "AB" or "BA" per pair
    looks: int = 0
    stopped: str = ""  # why no more pairs were added

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


def run_pairs(
    target: PairedTarget,
    kind: LoadKind,
    plan: RunPlan,
    schedule: Schedule,
    settled: Settled,
    *,
    monitor_factory: MonitorFactory = no_monitor,
    progress: Progress | None = None,
    label: Label | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Pairs:
    """Interleaved pairs until every check is decided or the budget is spent (at least
    ``schedule.min_pairs``). Raises ``measure.TargetDied`` (with the change's runs so far)
    if either side dies."""
    sides = {"A": target.side("A"), "B": target.change}
    for side in sides.values():
        kind.check(side)
        dead = died(side, ())
        if dead is not None:
            raise dead
    label = label or Label()
    pairs = Pairs()
    started = clock()
    instance = 0
    next_look = schedule.min_pairs
    while True:
        index = len(pairs.order)
        if index and schedule.restart_every and index % schedule.restart_every == 0:
            target.restart()
            instance += 1
        order = order_of(index)
        for letter in order:
            runs = pairs.base if letter == "A" else pairs.change
            try:
                run = run_repetition(
                    sides[letter],
                    kind,
                    plan,
                    index + 1,
                    monitor_factory=monitor_factory,
                    progress=progress or NoProgress(),
                    label=Label(label.nodeid, label.name, letter, max(next_look, index + 1)),
                    before=pairs.change,
                )
            except TargetDied as exc:  # both sides have one name: say which one died
                which = "the base (A)" if letter == "A" else "the change (B)"
                message = str(exc.args[0]).split("\n--- last lines")[0]
                raise TargetDied(f"{which}: {message}", exc.logs, exc.runs) from None
            runs.append(replace(run, instance=instance))
        pairs.order.append(order)
        done = len(pairs.order)
        if done == next_look:
            pairs.looks += 1
            if settled(pairs):
                pairs.stopped = f"every check decided after {done} pairs"
                return pairs
            next_look *= 2
        spent = clock() - started
        if done >= schedule.min_pairs and spent + spent / done > schedule.budget_s:
            if done != next_look // 2:  # pairs since the last look: the end is a look too
                pairs.looks += 1
            pairs.stopped = (
                f"budget of {schedule.budget_s:g}s spent after {done} pairs with checks undecided"
            )
            return pairs


def instance_count(instances: Sequence[int]) -> int:
    return len(set(instances))
