"""Whether a counted A/A of a CPython server centres on zero: its interval holds 0.
Measured through pytest, as a user's CI runs it.

    .venv/bin/python benchmarks/counted_aa.py [--runs 4] [--out FILE.json]

The counted end-to-end tests' stdlib server (``tests/e2e/counted_servers.py``), one test
``webperf.http(target, "/work", count=True, requests=100)`` with ``--webperf-against=HEAD
--webperf-against-always``: both sides the same code. Two layouts of one repository,
``--runs`` runs each, alternated, each run a fresh repository at the same path:

- ``top``: ``app.py`` at the repository's top, pytest's output files beside it (as the
  end-to-end test runs it). The working tree's top lists ``.git`` and those files; the
  base tree, a git archive, does not.
- ``srv``: ``srv/app.py``, a directory that holds committed files only, so both sides'
  script directories list the same names.

Per run: each side's instructions per request, one value per repetition (a fresh
process each); B - A; the check's interval, and whether it holds 0. Fresh CPython
processes of the same code sit on a few levels of their allocator's state after the
start, hundredths of a per cent apart; the gate's interval for CPython is no narrower
than that (``gate/estimates.py``, ``LEVELS``). Every pair's log ratio is in ``--out``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from counted_servers import python_server  # noqa: E402

TEST = """
def test_same(webperf):
    target = webperf.process(
        [sys.executable, "APP"], name="same", health="/health", env={"WORK_FILE": "same.txt"}
    )
    webperf.http(target, path="/work", count=True, requests=100)
"""
OPTIONS = [
    "-p",
    "no:locust",
    "--webperf-concurrency=1",
    "--webperf-duration=1s",
    "--webperf-against=HEAD",
    "--webperf-against-always",
]


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b", *args], check=True
    )


def make(repo: Path, layout: str) -> None:
    """The repository: the server in its layout's directory, committed once."""
    where = repo if layout == "top" else repo / "srv"
    where.mkdir(parents=True)
    (repo / ".gitignore").write_text("stdout\nstderr\n*.json\n__pycache__/\n.pytest_cache/\n")
    server = python_server("WORK_FILE").replace(
        "Path(__file__).parent / 'WORK_FILE'", "Path(__file__).parent / os.environ['WORK_FILE']"
    )
    (where / "app.py").write_text(server)
    (where / "same.txt").write_text("2000\n")
    app = "app.py" if layout == "top" else "srv/app.py"
    (repo / "test_same.py").write_text("import sys\n" + TEST.replace("APP", app))
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")


def run(repo: Path, layout: str) -> dict[str, Any]:
    """One A/A run, its outputs beside the server where the layout puts them."""
    make(repo, layout)
    report = repo / "aa.json"
    with open(repo / "stdout", "w") as out, open(repo / "stderr", "w") as err:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", *OPTIONS, f"--webperf-json={report}"],
            cwd=repo,
            stdout=out,
            stderr=err,
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"{layout}: pytest exited {done.returncode}: see {repo}/stdout")
    entry = json.loads(report.read_text())["tests"][0]
    check = next(c for c in entry["verdict"]["checks"] if c["metric"] == "instructions_per_req")
    a = [r["counts"]["instructions_per_req"] for r in entry["base_repetitions"]]
    b = [r["counts"]["instructions_per_req"] for r in entry["repetitions"]]
    return {
        "layout": layout,
        "a": a,
        "b": b,
        "change": check["change"],
        "low": check["low"],
        "high": check["high"],
        "holds_zero": check["low"] <= 0 <= check["high"],
    }


def show(row: dict[str, Any]) -> None:
    a = " ".join(f"{v:,.0f}" for v in row["a"])
    b = " ".join(f"{v:,.0f}" for v in row["b"])
    diff = sum(row["b"]) / len(row["b"]) - sum(row["a"]) / len(row["a"])
    print(
        f"{row['layout']:4} A {a} | B {b} | B-A {diff:+,.0f} Ir/req ({row['change']:+.3%}), "
        f"interval {row['low']:+.3%}..{row['high']:+.3%}"
        f"{'' if row['holds_zero'] else ', excludes 0'}",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=4, help="A/A runs per layout (4)")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    print(f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, commit {commit}, {load()}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="webperf-aa-") as scratch:
        # one path for every run, longer than the base's scratch directory: the base runs
        # from a path exactly as long (gitref.as_long_as)
        repo = Path(scratch) / "a_repository_whose_path_is_long_enough_to_be_matched"
        for _ in range(args.runs):
            for layout in ("top", "srv"):
                subprocess.run(["rm", "-rf", str(repo)], check=True)
                rows.append(run(repo, layout))
                show(rows[-1])
    for layout in ("top", "srv"):
        mine = [r for r in rows if r["layout"] == layout]
        held = sum(r["holds_zero"] for r in mine)
        changes = [r["change"] for r in mine]
        print(
            f"{layout}: B-A {min(changes):+.3%}..{max(changes):+.3%}, interval holds 0 in "
            f"{held} of {len(mine)}"
        )
    print(load())
    if args.out:
        args.out.write_text(json.dumps({"commit": commit, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
