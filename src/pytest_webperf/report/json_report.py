"""The JSON report: schema-versioned, one entry per measurement."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_webperf.fileio import write_text_atomic
from pytest_webperf.models import SCHEMA_VERSION, Measurement

REPORT_SCHEMA = 1


def _run_summary(run: dict[str, Any]) -> dict[str, Any]:
    """The flat per-repetition figures the report promises, beside the full record."""
    latency = run["latency"]
    resources = [r for r in run["resources"] if r["t"] >= 0]
    cpu = [r["cpu_percent"] for r in resources]
    generator = [g["cpu_percent"] for g in run["generator"] if g["t"] >= 0]
    return {
        "p50_ms": latency["p50_ms"], "p95_ms": latency["p95_ms"], "p99_ms": latency["p99_ms"],
        "mean_ms": latency["mean_ms"],
        "cpu_percent": {"mean": sum(cpu) / len(cpu), "max": max(cpu)} if cpu else None,
        "rss_mb": {"max": max(r["rss_mb"] for r in run["resources"])} if run["resources"] else None,
        "generator_cpu_percent": sum(generator) / len(generator) if generator else None,
    }


def report(measurements: Sequence[Measurement], meta: Mapping[str, Any]) -> dict[str, Any]:
    tests = []
    for m in measurements:
        entry = m.to_dict()
        entry["repetitions"] = [{**run, **_run_summary(run)} for run in entry.pop("runs")]
        entry["rps"] = m.rps
        tests.append(entry)
    return {
        "schema": REPORT_SCHEMA,
        "models_schema": SCHEMA_VERSION,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        **meta,
        "tests": tests,
    }


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write atomically: a reader never sees half a report."""
    write_text_atomic(path, json.dumps(data, indent=1) + "\n")
