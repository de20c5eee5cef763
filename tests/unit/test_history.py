"""The verdict history: its lines, appended and read back, and the change points found in
synthetic series (fixed seeds: a 4 % step is found where it is, pure noise flags
nothing)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from pytest_webperf import cli
from pytest_webperf.fileio import append_lines
from pytest_webperf.report import history
from pytest_webperf.stats import changepoint

SEEDS = range(20)


def noisy(seed: int, n: int = 30, cv: float = 0.01, step_at: int | None = None) -> list[float]:
    rng = random.Random(seed)
    return [
        1000 * (1.04 if step_at is not None and i >= step_at else 1) * rng.gauss(1, cv)
        for i in range(n)
    ]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_four_percent_step_at_twenty_is_found_there(seed: int) -> None:
    (found,) = changepoint.detect(noisy(seed, step_at=20))
    assert abs(found.index - 20) <= 3  # noise can draw the best cut a few values early
    assert 0.025 < found.step < 0.05


@pytest.mark.parametrize("seed", SEEDS)
def test_pure_noise_flags_nothing(seed: int) -> None:
    assert changepoint.detect(noisy(seed)) == []
    assert changepoint.detect(noisy(seed, cv=0.05)) == []  # noisier: still nothing


def test_short_or_nonpositive_series_are_not_searched() -> None:
    assert changepoint.detect([1.0, 2.0, 3.0]) == []
    assert changepoint.detect([0.0] * 30) == []


def entry(i: int, value: float, outcome: str = "pass", machine: str = "m1") -> dict[str, Any]:
    return {
        "schema": 1,
        "time": f"2026-01-{i + 1:02d}T00:00:00+00:00",
        "test": "t.py::test_x[c8]",
        "name": "GET /work",
        "commit": f"{i:02d}" * 20,
        "machine_id": machine,
        "status": "pass",
        "checks": [
            {
                "check": "cpu_per_req:5%",
                "metric": "cpu_per_req",
                "current": value,
                "change": 0.01,
                "outcome": outcome,
            },
            {"check": "errors:50%", "metric": "errors", "outcome": "pass"},  # no change: left out
        ],
    }


def write(path: Path, values: list[float], **kw: Any) -> None:
    append_lines(path, [json.dumps(entry(i, v, **kw)) for i, v in enumerate(values)])


def test_thirty_verdicts_with_a_drift_no_verdict_failed(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    write(path, noisy(3, step_at=20))
    write(path, noisy(4), machine="m2")  # another machine: its own series, never mixed
    with path.open("a") as handle:
        handle.write('{"test": "torn')  # a crash mid-append
    records, broken = history.read(path)
    assert len(records) == 60 and broken == 1
    analyses = {a.series.machine_id: a for a in history.analyse(records)}
    assert analyses["m2"].changes == ()
    lines = history.describe(analyses["m1"])
    assert (
        lines[0]
        == "t.py::test_x[c8] [GET /work] cpu_per_req on m1: 30 verdict(s), 1 change point(s)"
    )
    assert lines[1].startswith("  change point at verdict 21 (commit 2020202020, 2026-01-21")
    assert lines[1].endswith("; no single verdict failed: a drift")


def test_a_step_a_verdict_failed_is_not_called_a_drift(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    values = noisy(3, step_at=20)
    append_lines(
        path,
        [json.dumps(entry(i, v, "fail" if i == 20 else "pass")) for i, v in enumerate(values)],
    )
    (analysis,) = history.analyse(history.read(path)[0])
    assert "drift" not in history.describe(analysis)[1]


def test_appending_never_rewrites(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "h.jsonl"
    append_lines(path, ["one"])
    before = path.stat().st_ino
    append_lines(path, ["two", "three"])
    append_lines(path, [])
    assert path.read_text() == "one\ntwo\nthree\n"
    assert path.stat().st_ino == before


def test_the_command_prints_the_change_points_and_draws_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "h.jsonl"
    write(path, noisy(5, step_at=20))
    out = tmp_path / "h.html"
    assert cli.main(["history", str(path), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"webperf history: 30 verdict(s) in {path}, 1 series" in printed
    assert "change point at verdict 2" in printed
    page = out.read_text()
    assert page.count("<svg") == 1 and "a drift" in page


def test_a_missing_history_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["history", str(tmp_path / "none.jsonl")]) == 2
    assert "webperf history: cannot read" in capsys.readouterr().err
