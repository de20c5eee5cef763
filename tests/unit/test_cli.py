import argparse
import json
from pathlib import Path

import pytest

from pytest_webperf import cli
from pytest_webperf.cli import main
from pytest_webperf.models.measurement import Measurement, RunResult
from pytest_webperf.models.samples import Latency, Snapshot
from pytest_webperf.models.workload import Workload
from pytest_webperf.report.json_report import report, write_json
from pytest_webperf.stats.histogram import Histogram


def measurement(rps: float, reps: int = 5) -> Measurement:
    runs = []
    for i in range(reps):
        histogram = Histogram()
        histogram.record_many([1000, 1100, 1200])
        rate = rps * (1 + 0.01 * (i - 2))  # a little spread, as real runs have
        series = tuple(
            Snapshot(t + 1.0, 1.0, 10, int(rate), 0, 0, 0, 1.0, 1.1, 1.2) for t in range(5)
        )
        runs.append(
            RunResult(
                repetition=i + 1,
                concurrency=10,
                duration_s=5.0,
                requests=int(rate * 5),
                errors=0,
                timeouts=0,
                connect_errors=0,
                bytes=0,
                latency=Latency.of(histogram),
                series=series,
                histogram=histogram,
            )
        )
    return Measurement("t.py::test[c10]", "GET /hello", "nginx", 10, Workload(), tuple(runs))


def write(tmp_path: Path, name: str, rps: float) -> str:
    path = tmp_path / name
    write_json(path, report([measurement(rps)], {}))
    return str(path)


def test_compare_passes_unchanged_and_fails_a_drop(tmp_path, capsys):
    base = write(tmp_path, "base.json", 1000)
    assert main(["compare", base, write(tmp_path, "same.json", 1000)]) == 0
    assert main(["compare", base, write(tmp_path, "slow.json", 700)]) == 1
    out = capsys.readouterr().out
    assert "regression" in out and "rps 1000 -> 700" in out


def test_compare_takes_its_own_checks(tmp_path):
    base = write(tmp_path, "base.json", 1000)
    slow = write(tmp_path, "slow.json", 950)
    assert main(["compare", base, slow, "--compare-fail", "rps:2%"]) == 1
    assert main(["compare", base, slow, "--compare-fail", "rps:9%"]) == 0


def test_html_renders_a_report(tmp_path):
    out = tmp_path / "r.html"
    assert main(["html", write(tmp_path, "r.json", 1000), "-o", str(out)]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>") or "<html" in out.read_text()


@pytest.mark.parametrize("content", ["not json", json.dumps({"schema": 99, "tests": []}), "[]"])
def test_bad_report_is_a_clear_error(tmp_path, capsys, content):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert main(["compare", str(bad), str(bad)]) == 2
    assert f"{bad}:" in capsys.readouterr().err


def test_the_commands_docstring_names_every_subcommand() -> None:
    # the docstring is the command's --help description: it drifted once (no worker,
    # bisect or history)
    actions = [a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction)]
    names = sorted(actions[0].choices)
    assert names and all(f"``{name}``" in (cli.__doc__ or "") for name in names), names
