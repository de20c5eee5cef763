"""What a test's measurements make of its pytest outcome: failed, one line per failed
check; **undecided**, pytest's own category beside passed and failed (pytest's last line
reads ``3 passed, 2 undecided``), one line per check that was not checked, with what
would decide it; else passed. A green build then means measured and fine: a check that
could not be judged is never counted as passed.

Undecided: a check that was compared and not checked: too noisy for its threshold, a CPU
figure read as zero, not judged because other processes took the CPU (``contended``),
or a throughput check of a run whose generator, not the server, was the limit
(``generator-bound``). A first run, with nothing to compare with, is a pass that says
so. The exit status stays 0 unless ``--webperf-undecided-exit`` says otherwise
(``run/finish.py``).
"""

from __future__ import annotations

from collections.abc import Iterable

from pytest_webperf.gate.advice import failure_reasons
from pytest_webperf.models.measurement import Measurement

CATEGORY = "undecided"  # pytest's stats key: "2 undecided" in its last line
LETTER = "u"  # the progress letter, as "." is a pass
WORD = "UNDECIDED"  # -v's word, as PASSED


def _where(m: Measurement) -> str:
    return f"[{m.name} on {m.server}]"


def failure_lines(measurements: Iterable[Measurement]) -> list[str]:
    """One line per failed check of the measurements that failed."""
    return [
        f"{_where(m)} {reason}"
        for m in measurements
        if m.verdict is not None and m.verdict.failed
        for reason in (failure_reasons(m.verdict.reasons) or m.verdict.reasons)
    ]


def undecided_lines(measurements: Iterable[Measurement]) -> list[str]:
    """One line per check compared and not checked, of the measurements that did not
    fail: the check's own line, with what would decide it."""
    return [
        f"{_where(m)} {check.get('message')}"
        for m in measurements
        if m.verdict is not None and not m.verdict.failed
        for check in m.verdict.checks
        if check.get("checked") is False
    ]
