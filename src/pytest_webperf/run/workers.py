"""This process's part in a pytest-xdist run, and what the terminal says about it.

In a worker: its id, and the lock that keeps its webperf tests from measuring
beside another worker's. In the controller: which workers measured which tests.
plugin.py fills it in; the session reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_webperf.run.lock import MeasurementLock


def _tests(count: int) -> str:
    return f"{count} test{'' if count == 1 else 's'}"


@dataclass
class Distribution:
    worker: str | None = None  # set in a worker only
    lock: MeasurementLock | None = None
    measured_by: dict[str, list[str]] = field(default_factory=dict)  # node id -> workers
    lost: list[str] = field(default_factory=list)  # workers that died before sending
    collected: Sequence[str] = ()  # node ids in collection order, to report in that order
    waited_s: float = 0.0  # time the workers' webperf tests waited for their turn

    def received(self, worker: str, nodeids: Sequence[str], waited_s: float) -> None:
        for nodeid in dict.fromkeys(nodeids):
            self.measured_by.setdefault(nodeid, []).append(worker)
        self.waited_s += waited_s

    def summary(self) -> list[str]:
        """What was done, for the terminal (nothing without xdist)."""
        lost = [
            f"webperf: worker {worker} went down: what it measured is not in this report"
            for worker in self.lost
        ]
        if not self.measured_by:
            return lost
        workers = sorted({w for ws in self.measured_by.values() for w in ws})
        where = f"worker{'s' if len(workers) > 1 else ''} {', '.join(workers)}"
        lines = [
            f"webperf: {_tests(len(self.measured_by))} measured on {where}; webperf tests run "
            f"one at a time (a lock across the xdist workers; {self.waited_s:.1f} s of waiting "
            "for it)",
            "webperf: other tests may run on the other workers during a measurement (their CPU "
            "shows as foreign CPU); -n 0 gives quiet figures",
            *lost,
        ]
        repeated = sum(len(ws) > 1 for ws in self.measured_by.values())
        if repeated:  # --dist each
            lines.append(
                f"webperf: {_tests(repeated)} measured by more than one worker (--dist each): "
                "the report lists every measurement; a saved baseline keeps the last"
            )
        return lines
