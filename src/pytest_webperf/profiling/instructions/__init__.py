"""What counted windows' callgrind dumps say, per request (pure: no I/O).

* ``window.py``: one window: instructions, allocations, per-function exclusive,
  inclusive and own cost, stacks in instructions;
* ``differential.py``: two sides' windows: each function's change, whether it is named
  as changed, ranked the user's code first.
"""

from pytest_webperf.profiling.instructions.differential import (
    OTHER,
    Diff,
    FunctionChange,
    diff,
    exclusive_changes,
    merged_stacks,
    named,
    named_own,
    rank,
)
from pytest_webperf.profiling.instructions.window import (
    EVENT,
    Window,
    calls_into,
    is_allocator,
    label,
    window_of,
)
from pytest_webperf.profiling.naming import DEEPER

__all__ = [
    "DEEPER",
    "EVENT",
    "OTHER",
    "Diff",
    "FunctionChange",
    "Window",
    "calls_into",
    "diff",
    "exclusive_changes",
    "is_allocator",
    "label",
    "merged_stacks",
    "named",
    "named_own",
    "rank",
    "window_of",
]
