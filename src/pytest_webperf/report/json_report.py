"""The JSON report: schema-versioned, one entry per measurement."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_webperf.errors import WebperfError
from pytest_webperf.fileio import write_text_atomic
from pytest_webperf.models.endpoints import endpoint_summaries
from pytest_webperf.models.measurement import SCHEMA_VERSION, Measurement, RunResult
from pytest_webperf.report import studies
from pytest_webperf.sampling import resources

REPORT_SCHEMA = 1


def _run_summary(run: RunResult) -> dict[str, Any]:
    """The flat per-repetition figures the report promises, beside the full record.

    The resource figures are ``resources``' (the same as the ``cpu`` and ``rss``
    checks): measured phase only, a composite target's parts summed per tick.
    """
    latency = run.latency
    cpu = resources.cpu_stats(run.resources)
    rss = resources.server_rss_peak(run.resources)
    generator = resources.generator_cpu_stats(run.generator)
    return {
        "p50_ms": latency.p50_ms,
        "p95_ms": latency.p95_ms,
        "p99_ms": latency.p99_ms,
        "mean_ms": latency.mean_ms,
        "cpu_percent": None if cpu is None else {"mean": cpu.mean, "max": cpu.max},
        "rss_mb": None if rss is None else {"max": rss},
        "generator_cpu_percent": None if generator is None else generator.mean,
    }


def _repetitions(runs: Sequence[RunResult]) -> list[dict[str, Any]]:
    return [{**run.to_dict(), **_run_summary(run)} for run in runs]


def _endpoint_rows(runs: Sequence[RunResult]) -> list[dict[str, Any]]:
    """One row per endpoint of a request mix over the repetitions (``models``' figures),
    with the latency flat as a repetition's is."""
    rows = []
    for summary in endpoint_summaries(runs).values():
        row = summary.to_dict()
        latency = summary.latency
        for name in ("p50_ms", "p90_ms", "p95_ms", "p99_ms", "mean_ms", "max_ms"):
            row[name] = None if latency is None else getattr(latency, name)
        rows.append(row)
    return rows


def history_entry(saved: Mapping[str, Any]) -> dict[str, Any]:
    """One save of a baseline's history (``BaselineStore.history``) as the report holds
    it: when, which code (commit, image), and each metric's per-repetition values; the
    machine details every save repeats are left out (the report's ``machine`` says them)."""
    metadata = saved.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    code = saved.get("code")  # the measurement's own (image, or its process's commit)
    code = code if isinstance(code, Mapping) else {}
    git = code.get("git") or metadata.get("git")  # else the commit pytest ran from
    values = saved.get("summary")
    return {
        "saved_at": str(saved.get("saved_at") or metadata.get("saved_at") or ""),
        "git": {"commit": git.get("commit"), "dirty": bool(git.get("dirty"))}
        if isinstance(git, Mapping)
        else None,
        "image": code.get("image") or metadata.get("image"),
        "plugin_version": metadata.get("plugin_version"),
        "summary": {
            str(name): list(per_run)
            for name, per_run in (values.items() if isinstance(values, Mapping) else ())
            if isinstance(per_run, list)
        },
    }


def report(measurements: Sequence[Measurement], meta: Mapping[str, Any]) -> dict[str, Any]:
    tests = []
    for m in measurements:
        entry = m.to_dict()
        del entry["runs"], entry["base_runs"]
        entry["repetitions"] = _repetitions(m.runs)
        if entry.get("against") is not None:  # an A/B run: side A beside side B
            entry["base_repetitions"] = _repetitions(m.base_runs)
        entry["rps"] = m.rps
        endpoints = _endpoint_rows(m.runs)
        if endpoints:  # a request mix: a row per endpoint (side A's too in an A/B run)
            entry["endpoints"] = endpoints
            if entry.get("against") is not None:
                entry["base_endpoints"] = _endpoint_rows(m.base_runs)
        tests.append(entry)
    compared = studies.of_report({**meta, "tests": tests})
    return {
        "schema": REPORT_SCHEMA,
        "models_schema": SCHEMA_VERSION,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        **meta,
        "tests": tests,
        **({"studies": compared} if compared else {}),
    }


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write atomically: a reader never sees half a report."""
    write_text_atomic(path, json.dumps(data, indent=1) + "\n")


def read_report(path: Path) -> dict[str, Any]:
    """A JSON report written by ``write_json``; a clear error for anything else."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise WebperfError(f"{path}: not a readable JSON report ({exc})") from None
    if not isinstance(data, dict) or "tests" not in data:
        raise WebperfError(f"{path}: not a pytest-webperf JSON report (no 'tests')")
    if data.get("schema") != REPORT_SCHEMA:
        raise WebperfError(
            f"{path}: report schema {data.get('schema')!r} is not supported "
            f"(this version reads schema {REPORT_SCHEMA})"
        )
    return data


def measurements(data: Mapping[str, Any]) -> list[Measurement]:
    """The measurements of a report, as models (for comparing two reports)."""
    return [
        Measurement.from_dict(
            {**entry, "runs": entry["repetitions"], "base_runs": entry.get("base_repetitions")}
        )
        for entry in data["tests"]
    ]
