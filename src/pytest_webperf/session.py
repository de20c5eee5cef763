"""The run's state: measurements, verdicts, baselines and reports."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

from pytest_webperf import __version__
from pytest_webperf.catalog import Catalog, default_directories
from pytest_webperf.config import RunConfig
from pytest_webperf.models import Measurement, Verdict
from pytest_webperf.report import terminal
from pytest_webperf.report.json_report import report, write_json


class WebperfSession:
    """Collects what every test measured; judges, saves and reports it."""

    def __init__(self, config: RunConfig, rootdir: Path) -> None:
        self.config = config
        self.rootdir = rootdir
        self.measurements: list[Measurement] = []
        self.errors: list[str] = []  # problems that did not fail a test (reported at the end)

    @functools.cached_property
    def catalog(self) -> Catalog:
        local = self.rootdir / "servers"
        extra = [local] if local.is_dir() else []
        dirs = default_directories([*extra, *self.config.servers])
        return Catalog(dict.fromkeys(p.resolve() for p in dirs))

    def judge(self, measurement: Measurement) -> Measurement:
        """The measurement with its verdict (baselines and checks arrive with the gate)."""
        verdict = Verdict("no-baseline", notes=("no baseline (run with --webperf-save)",))
        return _with_verdict(measurement, verdict)

    def record(self, measurements: list[Measurement]) -> None:
        self.measurements.extend(measurements)

    def summary(self) -> list[str]:
        return terminal.table(self.measurements) + terminal.verdict_lines(self.measurements)

    def meta(self) -> dict[str, Any]:
        config = self.config
        return {
            "plugin_version": __version__,
            "python": sys.version.split()[0],
            "config": {
                "concurrency": list(config.concurrency), "duration_s": config.duration,
                "warmup_s": config.warmup, "repeat": config.repeat, "workers": config.workers,
                "user": config.user, "timeout_s": config.timeout,
            },
        }

    def finish(self) -> list[str]:
        """Write the reports; lines to show the user."""
        lines = []
        if self.config.json is not None:
            write_json(self.config.json, report(self.measurements, self.meta()))
            lines.append(f"webperf: JSON report written to {self.config.json}")
        return lines


def _with_verdict(measurement: Measurement, verdict: Verdict) -> Measurement:
    from dataclasses import replace

    return replace(measurement, verdict=verdict)
