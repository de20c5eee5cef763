"""Value parsers: an option's or an argument's text as its value, or a ``ValueError``
saying what it accepts (durations, counts, CPU sets, fractions, ...).

A leaf: it imports nothing of the package, so anything may use it (``config`` for the
options, ``workload`` for ``webperf.http``'s arguments, the benchmarks and the CLI).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

PLACEMENTS = ("auto", "none", "split")  # --webperf-placement (models/placement.py)

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
_MEMORY = re.compile(r"^\d+[bkmg]?$", re.IGNORECASE)
_CPUSET = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """``0-1,3`` -> (0, 1, 3)."""
    cpus: list[int] = []
    for part in str(text).split(","):
        low, dash, high = part.strip().partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"{text!r} is not a CPU list (examples: 0, 0-1, 0,2)")
        first, last = int(low), int(high or low)
        if last < first:
            raise ValueError(f"{text!r}: {part} counts backwards")
        cpus += range(first, last + 1)
    return tuple(dict.fromkeys(cpus))


def parse_duration(text: str | float) -> float:
    """``20s``, ``500ms``, ``2m``, ``30d``, ``1.5`` (seconds) -> seconds."""
    match = _DURATION.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a duration (examples: 20s, 500ms, 2m)")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def parse_positive_duration(text: str | float) -> float:
    seconds = parse_duration(text)
    if seconds <= 0:
        raise ValueError(f"{text!r} must be longer than zero")
    return seconds


def _whole(text: str | int, minimum: int) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None
    if value < minimum:
        raise ValueError(f"{text!r} must be at least {minimum}")
    return value


def parse_positive_int(text: str | int) -> int:
    return _whole(text, 1)


def parse_concurrency(text: str | int | list[int] | tuple[int, ...]) -> tuple[int, ...]:
    """``100,500,1000`` (or a list) -> (100, 500, 1000); duplicates dropped, order kept."""
    items = list(text) if isinstance(text, list | tuple) else str(text).split(",")
    if not items or any(str(i).strip() == "" for i in items):
        raise ValueError(f"{text!r} is not a list of user counts (example: 100,500,1000)")
    values = [parse_positive_int(i) for i in items]
    return tuple(dict.fromkeys(values))


def parse_cpus(text: str | float) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number of CPUs (example: 1.5)") from None
    if value <= 0:
        raise ValueError(f"{text!r} must be more than zero CPUs")
    return value


def parse_memory(text: str) -> str:
    if not _MEMORY.match(str(text)):
        raise ValueError(f"{text!r} is not a memory size (examples: 512m, 2g)")
    return str(text).lower()


def parse_cpuset(text: str) -> str:
    if not _CPUSET.match(str(text)):
        raise ValueError(f"{text!r} is not a CPU set (examples: 1, 0-1, 0,2)")
    parse_cpu_list(text)  # ranges the right way round
    return str(text)


def parse_count(text: str | int) -> int:
    """A whole number >= 0."""
    return _whole(text, 0)


def parse_exit_code(text: str | int) -> int:
    """A process exit status, 0 to 125 (126 and above mean "not run" or a signal to a
    shell, and ``git bisect run`` aborts on them)."""
    value = _whole(text, 0)
    if value > 125:
        raise ValueError(f"{text!r} is not an exit status from 0 to 125")
    return value


def parse_fraction(text: str | float) -> float:
    """``1%``, ``0.01`` -> 0.01; between 0 and 1."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ValueError(f"{text!r} is not a fraction (examples: 1%, 0.01)") from None
    if not 0 <= value <= 1:
        raise ValueError(f"{text!r} must be between 0 and 1 (0 and 100 percent)")
    return value


def parse_ref(text: str) -> str:
    ref = str(text).strip()
    if not ref or ref.startswith("-") or any(c.isspace() for c in ref):
        raise ValueError(f"{text!r} is not a git ref (examples: origin/main, HEAD~1, v1.2)")
    return ref


def parse_rate(text: str | float) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number of users per second") from None
    if value < 0:
        raise ValueError(f"{text!r} must not be negative")
    return value


def parse_placement(text: str) -> str:
    if str(text) not in PLACEMENTS:
        raise ValueError(f"{text!r} is not one of {', '.join(PLACEMENTS)}")
    return str(text)


def parse_user_class(text: str) -> str:
    text = str(text)
    if text in ("auto", "native", "fast", "lean") or re.match(r"^[\w.]+:\w+$", text):
        return text
    raise ValueError(f"{text!r} is not 'auto', 'native', 'lean', 'fast' or 'module:UserClass'")


PROFILE_PLACEMENTS = ("auto", "off", "on")


def parse_profile(text: str) -> str:
    if str(text) not in PROFILE_PLACEMENTS:
        raise ValueError(f"{text!r} is not one of {', '.join(PROFILE_PLACEMENTS)}")
    return str(text)


def parse_bool(text: str | bool) -> bool:
    if isinstance(text, bool):
        return text
    lowered = str(text).strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{text!r} is not true or false")


def parse_count_mode(text: str | bool) -> bool | str:
    """``--webperf-count``'s value: True (count every load that can be), False, or
    ``"auto"`` (time, and count where a CPU-cost check timing left undecided)."""
    if isinstance(text, bool):
        return text
    if str(text).strip().lower() == "auto":
        return "auto"
    try:
        return parse_bool(text)
    except ValueError:
        raise ValueError(f"{text!r} is not on, off or auto") from None


def parse_http_url(text: str) -> str:
    """An http:// or https:// URL with a host (where live metrics are sent)."""
    parts = urlsplit(str(text).strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{text!r} is not an http:// or https:// URL (http://127.0.0.1:4318)")
    return str(text).strip()
