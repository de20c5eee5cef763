"""The suites, the README's first command, guarded by the test command: every suite is
collected, and every server of the catalogue is loaded once, briefly, in each protocol it
speaks (``suites/test_protocols.py`` at a small scale, in four parts that run beside each
other). A suite that cannot be collected, or a server that no longer answers in its own
protocol, fails the test command, as it fails the user's first command.

The studies' own comparisons are not run here (their defaults are the seeds' scale, and
the whole of them at the smallest scale takes about 40 minutes): they load the same
servers in the same protocols, which is what this checks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.e2e.options import SHORT

from pytest_webperf.targets.catalog import Catalog, default_directories

ROOT = Path(__file__).resolve().parents[2]
PARTS = 4
CATALOG = Catalog(default_directories())
SMALL = [*SHORT, "--webperf-repeat=1", "-p", "no:cacheprovider"]


def _pytest(*args: str, cwd: Path = ROOT, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """pytest in the repository (the suites' own rootdir and conftest), nothing written
    there: no cache, baselines read from an empty directory of the test's."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        check=False,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTEST_ADDOPTS": ""},
    )


def _protocol_tests() -> list[str]:
    listed = _pytest("suites/test_protocols.py", "--collect-only", "-q", *SMALL, timeout=120)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    return [line for line in listed.stdout.splitlines() if "::test_protocols[" in line]


def test_every_suite_is_collected() -> None:
    listed = _pytest("suites", "--collect-only", "-q", "-p", "no:cacheprovider", timeout=120)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert " collected" in listed.stdout.splitlines()[-1]
    modules = {line.split("::")[0] for line in listed.stdout.splitlines() if "::" in line}
    assert modules == {str(p.relative_to(ROOT)) for p in (ROOT / "suites").glob("test_*.py")}


@pytest.mark.parametrize("part", range(PARTS))
def test_every_catalogue_server_answers_in_each_of_its_protocols(
    tmp_path: Path, engine: None, part: int
) -> None:
    mine = _protocol_tests()[part::PARTS]
    assert mine, "suites/test_protocols.py collected no test"
    report = tmp_path / "protocols.json"
    run = _pytest(
        *mine,
        *SMALL,
        f"--webperf-baseline-dir={tmp_path / 'baselines'}",
        f"--webperf-json={report}",
        "-p",
        "no:hypothesispytest",
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    entries = json.loads(report.read_text())["tests"]
    loaded = {entry["nodeid"].split("[", 1)[1].rsplit("-c", 1)[0] for entry in entries}
    servers = {test.split("[", 1)[1].rsplit("-c", 1)[0] for test in mine}
    spoken = {name: CATALOG.get(name).protocols for name in servers}
    assert loaded == {name for name, protocols in spoken.items() if protocols}
    for name, protocols in spoken.items():  # a measurement per protocol it speaks
        assert sum(e["nodeid"].split("[", 1)[1].startswith(f"{name}-c") for e in entries) == len(
            protocols
        ), name
