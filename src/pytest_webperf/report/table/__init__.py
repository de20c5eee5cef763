"""The summary table's columns, shared by the terminal, Markdown and HTML reports.

They read the JSON report's dict (not the models), so an older or partial report
still renders, with ``-`` where a figure is missing. Renderers decide nothing:
verdicts come from the report. The figures and cells (``figures``), the columns
(``columns``), a mix's endpoints (``endpoints``), the lines under the table (``lines``).
"""

from __future__ import annotations

from pytest_webperf.report.table.columns import (
    COLUMNS,
    NUMERIC,
    STATUSES,
    code,
    short_sha,
    short_test,
    status,
    verdict_texts,
)
from pytest_webperf.report.table.endpoints import (
    ENDPOINT_CELLS,
    ENDPOINT_COLUMNS,
    Row,
    endpoint_cells,
    endpoint_label,
    endpoints,
    share,
)
from pytest_webperf.report.table.figures import (
    MISSING,
    SHORT,
    Column,
    Entry,
    fmt,
    mean,
    mean_sd,
    number,
    present,
    rep_latency,
    rep_nested,
    rep_rps,
    repetitions,
    spread,
)
from pytest_webperf.report.table.lines import (
    counted_lines,
    delivery,
    durations,
    http2_lines,
    mqtt_lines,
    paced_lines,
    placement_text,
    status_counts,
    stream_lines,
    stream_text,
    tests,
    users_used,
)

__all__ = [
    "COLUMNS",
    "ENDPOINT_CELLS",
    "ENDPOINT_COLUMNS",
    "MISSING",
    "NUMERIC",
    "SHORT",
    "STATUSES",
    "Column",
    "Entry",
    "Row",
    "code",
    "counted_lines",
    "delivery",
    "durations",
    "endpoint_cells",
    "endpoint_label",
    "endpoints",
    "fmt",
    "http2_lines",
    "mean",
    "mean_sd",
    "mqtt_lines",
    "number",
    "paced_lines",
    "placement_text",
    "present",
    "rep_latency",
    "rep_nested",
    "rep_rps",
    "repetitions",
    "share",
    "short_sha",
    "short_test",
    "spread",
    "status",
    "status_counts",
    "stream_lines",
    "stream_text",
    "tests",
    "users_used",
    "verdict_texts",
]
