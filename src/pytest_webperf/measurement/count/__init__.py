"""A counted measurement (``webperf.http(..., count=True)``, ``webperf.grpc(...,
count=True)``): each repetition counts what the target does for exactly N requests,
instead of timing it.

* ``kind.py``: what is counted (``CountedRequests``) and what cannot be (``refusal``);
* ``window.py``: one side's repetition: the target under callgrind, warmed up, probed,
  zeroed, N requests, dumped; then natively for its system calls when a check reads them;
* ``sender.py``: what sends the requests, from this process (the native loop's engine);
* ``sizing.py``: N from the probe's own spread and the check's threshold;
* ``runs.py``: one side's repetitions in turn, or an A/B run's pairs, both sides at once.

Concurrency 1 is the default: at 2, epoll batching and lock hand-offs depend on timing
(nginx 1.2 % apart instead of 0.000 %). The repetition's figures are the counted
window's (its latency is Valgrind's, not the server's); ``RunResult.counts`` holds both
windows' counts and what they cost, phase by phase.
"""

from pytest_webperf.measurement.count.kind import CALLERS, CountedRequests, refusal
from pytest_webperf.measurement.count.runs import run_counted, run_counted_pairs
from pytest_webperf.measurement.count.sizing import MAX_REQUESTS, MIN_REQUESTS, sized

__all__ = [
    "CALLERS",
    "MAX_REQUESTS",
    "MIN_REQUESTS",
    "CountedRequests",
    "refusal",
    "run_counted",
    "run_counted_pairs",
    "sized",
]
