"""The summary table's columns: each a name and the cell it reads from a report entry;
a test's code, status and verdict texts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from pytest_webperf.report.table.figures import (
    MISSING,
    Column,
    Entry,
    fmt,
    is_counted,
    mean,
    number,
    present,
    rep_latency,
    rep_nested,
    rep_rps,
    repetitions,
    spread,
)


def _total(entry: Entry, field: str) -> str:
    values = present([number(r.get(field)) for r in repetitions(entry)])
    return fmt(sum(values)) if values else MISSING


def _latency(field: str) -> Callable[[Entry], str]:
    return lambda e: fmt(mean([rep_latency(r, field) for r in repetitions(e)]), 2)


def _cpu(entry: Entry) -> str:
    return fmt(mean([rep_nested(r, "cpu_percent", "mean") for r in repetitions(entry)]))


def _rss(entry: Entry) -> str:
    values = present([rep_nested(r, "rss_mb", "max") for r in repetitions(entry)])
    return fmt(max(values)) if values else MISSING


def _cpu_per_req(entry: Entry) -> str:
    return fmt(mean([number(r.get("cpu_per_req_us")) for r in repetitions(entry)]))


def _capacity(entry: Entry) -> str:
    """Estimated req/s the server's CPUs could serve (utilization law), beside the measured;
    for a ``webperf.capacity`` search, what it measured instead: its bracket (``400-418``,
    ``>=20,000`` at its limit, ``<50`` below its start) or why it has none."""
    search = entry.get("capacity")
    if isinstance(search, Mapping):
        low, high = number(search.get("low")), number(search.get("high"))
        status = search.get("status")
        if status == "found" and low is not None and high is not None:
            return f"{fmt(low)}-{fmt(high)}"
        if status == "at-limit" and low is not None:
            return f">={fmt(low)}"
        if status == "below-start" and high is not None:
            return f"<{fmt(high)}"
        return str(status or MISSING)
    return fmt(mean([number(r.get("capacity_rps")) for r in repetitions(entry)]))


def short_sha(commit: object) -> str:
    return str(commit)[:10] if commit else MISSING


def code(entry: Entry) -> str:
    """What code was measured: a container's image (each part's), a process target's
    commit (``+dirty`` when its tree had changes), ``no git repository`` for a process
    outside one; ``-`` when the report does not say (an external URL, an older report)."""
    target = entry.get("target")
    if not isinstance(target, Mapping):
        return MISSING
    if "git" in target:
        git = target["git"]
        if not isinstance(git, Mapping) or not git.get("commit"):
            return "no git repository"
        return f"commit {short_sha(git['commit'])}" + ("+dirty" if git.get("dirty") else "")
    if target.get("image"):
        return f"image {target['image']}"
    parts = target.get("parts")
    images = [
        f"{name} {part['image']}"
        for name, part in (parts.items() if isinstance(parts, Mapping) else ())
        if isinstance(part, Mapping) and part.get("image")
    ]
    return ("images " + ", ".join(images)) if images else MISSING


def short_test(entry: Entry) -> str:
    """The test's own part of the node id (what a user recognises in a long table)."""
    return str(entry.get("nodeid", MISSING)).split("::")[-1]


# Every verdict status a report can hold, in order of severity for a reader.
STATUSES = (
    "regression",
    "broken",
    "undecided",
    "generator-bound",
    "pass",
    "unchanged",
    "no-baseline",
)


def status(entry: Entry) -> str | None:
    verdict = entry.get("verdict")
    return str(verdict.get("status")) if isinstance(verdict, Mapping) else None


def verdict_texts(entry: Entry, key: str) -> list[str]:
    """The verdict's ``reasons`` or ``notes``."""
    verdict = entry.get("verdict")
    texts = verdict.get(key) if isinstance(verdict, Mapping) else None
    return [str(t) for t in texts] if isinstance(texts, list) else []


_ID_CONCURRENCY = re.compile(r"(?:\[|-)c(\d+)(?=[\]-])")


def id_concurrency(entry: Entry) -> int | None:
    """The concurrency a test's id names (``test_x[c20]``, ``test_x[nginx-c500]``)."""
    found = _ID_CONCURRENCY.findall(str(entry.get("nodeid", "")).rpartition("::")[2])
    return int(found[-1]) if found else None


def users(entry: Entry) -> str:
    """The users (connections) a measurement ran with, and why, where its test id names
    another number: ``1 (counted)``, ``4 (id: c20)``."""
    ran = number(entry.get("concurrency"))
    named = id_concurrency(entry)
    if ran is None or named is None or int(ran) == named:
        return fmt(ran)
    return f"{fmt(ran)} ({'counted' if is_counted(entry) else f'id: c{named}'})"


def timed(read: Callable[[Entry], str]) -> Callable[[Entry], str]:
    """A timed figure's cell, left empty for a counted measurement: its rates, latency,
    CPU and memory were measured under Valgrind, not the server's own."""
    return lambda e: MISSING if is_counted(e) else read(e)


def _per_request(key: str, decimals: int) -> Callable[[Entry], str]:
    """A counted figure per request, the mean of the repetitions (side B's in A/B)."""

    def cell(entry: Entry) -> str:
        found = [r.get("counts") for r in repetitions(entry)]
        return fmt(mean([number(c.get(key)) for c in found if isinstance(c, Mapping)]), decimals)

    return cell


COLUMNS: tuple[Column, ...] = (
    ("test", short_test),
    ("workload", lambda e: str(e.get("name", MISSING))),
    ("server", lambda e: str(e.get("server", MISSING))),
    ("users", users),
    ("req/s", timed(lambda e: spread([rep_rps(r) for r in repetitions(e)]))),
    ("requests", lambda e: _total(e, "requests")),
    ("errors", lambda e: _total(e, "errors")),
    ("timeouts", lambda e: _total(e, "timeouts")),
    ("p50 ms", timed(_latency("p50_ms"))),
    ("p95 ms", timed(_latency("p95_ms"))),
    ("p99 ms", timed(_latency("p99_ms"))),
    ("cpu %", timed(_cpu)),
    ("rss MB", timed(_rss)),
    ("cpu/req us", timed(_cpu_per_req)),
    ("capacity~", timed(_capacity)),  # ~: an estimate (the utilization law's), not measured
    ("instr/req", _per_request("instructions_per_req", 1)),  # counted, not timed
    ("allocs/req", _per_request("allocs_per_req", 3)),
    ("syscalls/req", _per_request("syscalls_per_req", 3)),
)
NUMERIC = frozenset(name for name, _ in COLUMNS[3:])
KEPT = frozenset({"test", "workload", "server", "users"})  # shown even when empty


def shown(entries: Sequence[Entry], columns: Sequence[Column] = COLUMNS) -> list[Column]:
    """The columns with a figure for at least one entry (and the test's own): a counted
    run has no timed columns, a timed one no counted columns."""
    return [
        (name, read)
        for name, read in columns
        if name in KEPT or any(read(e) != MISSING for e in entries)
    ]
