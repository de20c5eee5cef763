"""A request mix's endpoints as rows: their cells and columns."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_webperf.report.table.figures import MISSING, Entry, fmt, number

# ---------------------------------------------------------------- a request mix's endpoints

Row = Mapping[str, Any]  # one item of an entry's "endpoints"


def grpc_names(entry: Entry) -> frozenset[str]:
    """The endpoints of an entry's workload that are unary gRPC calls (their method,
    an HTTP/2 POST on the wire, is not what a reader calls them)."""
    workload = entry.get("workload")
    mix = workload.get("mix") if isinstance(workload, Mapping) else None
    calls = mix if isinstance(mix, list) else ()
    return frozenset(str(r.get("name")) for r in calls if isinstance(r, Mapping) and r.get("grpc"))


def endpoints(entry: Entry, key: str = "endpoints") -> list[Row]:
    """The entry's endpoint rows (``base_endpoints``: side A's), [] for a single shape; a
    gRPC method's row says ``gRPC``, not ``POST``, as its method."""
    rows = entry.get(key)
    found = [r for r in rows if isinstance(r, Mapping)] if isinstance(rows, list) else []
    grpc = grpc_names(entry)
    return [{**r, "method": "gRPC"} if str(r.get("name")) in grpc else r for r in found]


def _percent(value: object) -> str:
    n = number(value)
    return MISSING if n is None else f"{100 * n:.1f}%"


def share(row: Row) -> str:
    """Its share of the requests, the share asked beside it: ``24.8% (asked 25.0%)``."""
    asked = number(row.get("weight"))
    return _percent(row.get("share")) + ("" if asked is None else f" (asked {_percent(asked)})")


def endpoint_label(row: Row) -> str:
    """``POST create``, ``gRPC GetItem``: the method and the endpoint's name."""
    return f"{row.get('method') or MISSING} {row.get('name', MISSING)}"


def _row_latency(field: str) -> Callable[[Row], str]:
    return lambda r: fmt(number(r.get(field)), 2)


# The summary table's cells of an endpoint row, by column (the rest stay empty): the
# row sits indented under its measurement, its share of the mix in the workload cell.
ENDPOINT_CELLS: Mapping[str, Callable[[Row], str]] = {
    "workload": lambda r: f"{endpoint_label(r)} {share(r)}",
    "req/s": lambda r: fmt(number(r.get("rps"))),
    "requests": lambda r: fmt(number(r.get("requests"))),
    "errors": lambda r: fmt(number(r.get("errors"))),
    "p50 ms": _row_latency("p50_ms"),
    "p95 ms": _row_latency("p95_ms"),
    "p99 ms": _row_latency("p99_ms"),
}


def endpoint_cells(row: Row, columns: Sequence[str], indent: str = "  - ") -> list[str]:
    """An endpoint's row under its measurement, for the given summary columns (the
    workload cell indented)."""
    cells = [ENDPOINT_CELLS[name](row) if name in ENDPOINT_CELLS else "" for name in columns]
    return [indent + c if name == "workload" else c for name, c in zip(columns, cells, strict=True)]


# A measurement's own endpoint table (the HTML report's section): every figure.
ENDPOINT_COLUMNS: tuple[tuple[str, Callable[[Row], str]], ...] = (
    ("endpoint", lambda r: str(r.get("name", MISSING))),
    ("method", lambda r: str(r.get("method") or MISSING)),
    ("requests", lambda r: fmt(number(r.get("requests")))),
    ("req/s", lambda r: fmt(number(r.get("rps")))),
    ("share", lambda r: _percent(r.get("share"))),
    ("asked", lambda r: _percent(r.get("weight"))),
    ("errors", lambda r: fmt(number(r.get("errors")))),
    ("error rate", lambda r: _percent(r.get("error_rate"))),
    ("p50 ms", _row_latency("p50_ms")),
    ("p95 ms", _row_latency("p95_ms")),
    ("p99 ms", _row_latency("p99_ms")),
)
