"""The A/B gate as users lay out their repositories, through pytest: a server at the
repository's root with its performance tests in ``tests/perf`` (their own
``pytest.ini``), a server run from a build output git ignores, and a C server built on
both sides with ``build=``. A pass is never given for a change that was not measured.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.costly import COSTLY
from tests.e2e.gitrepo import commit_base, git
from tests.e2e.hello_server import hashing_server
from tests.e2e.options import SHORT, assert_not_failed

# three pairs at least; more only while a check is undecided (a loaded machine)
RUN = [*SHORT, "--webperf-repeat=3", "--webperf-against-budget=30s", "--webperf-profile=off"]
# the same server twice: judged on its own tree (measured), and with watch= narrowed to a
# file the change did not touch (skipped, saying what it compared)
PERF_TESTS = """
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_app(webperf):
    target = webperf.process([sys.executable, str(ROOT / "app.py")], name="app")
    webperf.http(target, path="/work")


def test_app_watching_the_readme(webperf):
    target = webperf.process(
        [sys.executable, str(ROOT / "app.py")], name="app", watch=["../../README.md"]
    )
    webperf.http(target, path="/work")
"""


def entries(path: Path) -> dict[str, Any]:
    return {t["nodeid"].split("[")[0]: t for t in json.loads(path.read_text())["tests"]}


def test_a_server_outside_the_tests_directory_is_measured_not_skipped(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = pytester.path
    (repo / "app.py").write_text(hashing_server("100"))
    (repo / "README.md").write_text("the app\n")
    perf = repo / "tests" / "perf"
    perf.mkdir(parents=True)
    (perf / "pytest.ini").write_text("[pytest]\n")
    (perf / "test_app.py").write_text(PERF_TESTS)
    commit_base(repo)
    (repo / "app.py").write_text(hashing_server("300"))  # 3x the work per request
    git(repo, "commit", "-q", "-am", "slower")
    monkeypatch.chdir(perf)
    result = pytester.runpytest_subprocess(
        *RUN, "--webperf-against=HEAD~1", f"--webperf-json={repo / 'ab.json'}", "-rs"
    )
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*[[]GET /work on *[]] * -> * (*%, *% CI *%..*%*",
            "*app is the same as at HEAD~1 (*) in README.md: not measured*",
        ]
    )
    tests = entries(repo / "ab.json")
    measured = tests["test_app.py::test_app"]
    assert measured["verdict"]["status"] == "regression"
    assert measured["against"]["changed"] is True
    assert tests["test_app.py::test_app_watching_the_readme"]["verdict"]["status"] == "unchanged"


BUILT_TEST = """
import sys

def test_built(webperf):
    target = webperf.process([sys.executable, "build/server.py"], name="built")
    webperf.http(target, path="/work")
"""


def test_a_base_without_the_build_output_says_which_side_which_path_and_build(
    pytester: pytest.Pytester,
) -> None:
    repo = pytester.path
    (repo / ".gitignore").write_text("build/\n")
    pytester.makepyfile(test_built=BUILT_TEST)
    commit_base(repo)
    (repo / "build").mkdir()
    (repo / "build" / "server.py").write_text(hashing_server("10"))  # made by a build script
    result = pytester.runpytest_subprocess(*RUN, "--webperf-against=HEAD")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*the base (A, HEAD *) has no build/server.py, which the command names "
            "('build/server.py'): it is in the working tree, and git ignores it, *"
            "webperf.process(..., build=[[]...[]]) runs in each side's tree*"
        ]
    )
    assert "Traceback" not in result.stdout.str()


C_TEST = """
def test_c(webperf):
    target = webperf.process(
        ["build/costly"],
        name="costly",
        build="mkdir -p build && cc -O2 -o build/costly server.c",
    )
    webperf.http(target, path="/work")
"""


def test_a_c_server_built_on_both_sides_is_gated(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc) on this machine: the server cannot be built")
    monkeypatch.setenv("WEBPERF_BUILD_CACHE", str(tmp_path / "builds"))
    repo = pytester.path
    # what pytester and the runs write beside the code, ignored as a user would
    (repo / ".gitignore").write_text("build/\nstdout\nstderr\nrunpytest-*\n*.json\n")
    source = (COSTLY / "server.c").read_text()
    assert "cost ? strtoull(cost, NULL, 10) : 100;" in source
    (repo / "server.c").write_text(source.replace(": 100;", ": 300;"))
    pytester.makepyfile(test_c=C_TEST)
    commit_base(repo)
    # A/A: both sides built (the base in its own tree), measured, and not failed
    same = pytester.runpytest_subprocess(
        *RUN, "--webperf-against=HEAD", "--webperf-against-always", "--webperf-json=aa.json"
    )
    assert_not_failed(same, 1)
    entry = entries(repo / "aa.json")["test_c.py::test_c"]
    assert entry["verdict"]["status"] in ("pass", "undecided"), entry["verdict"]
    assert len(entry["base_repetitions"]) == len(entry["repetitions"]) >= 3
    # a slower change, committed: the base (HEAD~1) comes from the build cache now
    (repo / "server.c").write_text(source.replace(": 100;", ": 600;"))
    git(repo, "commit", "-q", "-am", "twice the work")
    slower = pytester.runpytest_subprocess(
        *RUN, "--webperf-against=HEAD~1", "--webperf-json=ab.json"
    )
    slower.assert_outcomes(failed=1)
    cpu = next(
        c
        for c in entries(repo / "ab.json")["test_c.py::test_c"]["verdict"]["checks"]
        if c["metric"] == "cpu_per_req"
    )
    assert cpu["outcome"] == "fail" and cpu["change"] > 0.5, cpu
    # the first base's build, kept and restored as the second run's base; the working
    # tree (it holds files git ignores) is built in place, not kept
    assert len(list((tmp_path / "builds").glob("*.tar"))) == 1
