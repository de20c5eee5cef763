"""How often a differential profile names a function in an A/A run (a false lead), and
how often it names the function a change made three times costlier, on real runs
through pytest: a lightly loaded Python server (stdlib ``http.server``, paced users, about
a fifth of a core), 3 pairs of 3 s, py-spy at the rates the run plans.

    .venv/bin/python benchmarks/profile_false_leads.py [--trials 20] [--ab 5]
                                                        [--pairs 3] [--duration 3s]

Each trial is a throwaway git repository holding the server and a one-test project,
run as a user's CI job runs it: ``pytest --webperf-against=HEAD --webperf-against-always``
(A/A: the same code on both sides) or, for the ``--ab`` trials, against ``HEAD~1`` with
``checksum()`` walking its page three times in HEAD. A/A and A/B trials alternate, so
drift on the machine hits both alike. Printed per trial: the samples per side, the
dispersion, the functions named; at the end the false-lead rate with its exact
(Clopper-Pearson) 95 % interval, the A/B detections, and the load average before and
after.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gate import clopper_pearson  # benchmarks/gate.py: the exact binomial interval

# the server and test the e2e tests of the profile run (not part of the plugin)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
from profiled_server import SERVER, TEST


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b", *args],
        check=True,
        capture_output=True,
    )


def trial(changed: bool, pairs: int, duration: str) -> dict[str, Any]:
    """One pytest run in a fresh repository; its profile as the JSON report has it."""
    with tempfile.TemporaryDirectory(prefix="webperf-leads-") as tmp:
        repo = Path(tmp)
        (repo / "server.py").write_text(SERVER.format(rounds=1))
        (repo / "test_work.py").write_text(TEST)
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "base")
        against = ["--webperf-against=HEAD", "--webperf-against-always"]
        if changed:
            (repo / "server.py").write_text(SERVER.format(rounds=3))
            git(repo, "commit", "-q", "-am", "checksum x3")
            against = ["--webperf-against=HEAD~1"]
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:locust", "-p", "no:cacheprovider"]
        argv += ["--webperf-concurrency=2", f"--webperf-duration={duration}"]
        argv += ["--webperf-warmup=0.5s", f"--webperf-repeat={pairs}"]
        argv += ["--webperf-against-budget=1s", "--webperf-json=p.json", *against]
        started = time.monotonic()
        subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=900, check=False)
        report = json.loads((repo / "p.json").read_text())
        (entry,) = report["tests"]
        profile = dict(entry.get("profile") or {"why": "no profile"})
        profile["wall_s"] = time.monotonic() - started
        return profile


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20, help="A/A trials")
    parser.add_argument("--ab", type=int, default=5, help="A/B trials (checksum 3x)")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--duration", default="3s")
    args = parser.parse_args()
    print(f"load average before: {load()}", flush=True)
    total = args.trials + args.ab
    spread = {round((j + 0.5) * total / args.ab) for j in range(args.ab)} if args.ab else set()
    kinds = ["A/B" if i in spread else "A/A" for i in range(total)]  # A/B among the A/A
    leads = detected = done_aa = done_ab = 0
    for number, kind in enumerate(kinds, 1):
        profile = trial(kind == "A/B", args.pairs, args.duration)
        if profile.get("why"):
            print(f"{number:3d} {kind}: no profile: {profile['why']}", flush=True)
            continue
        named = [c["function"] for c in profile.get("changes", ())]
        samples = profile.get("samples", {})
        if kind == "A/A":
            done_aa += 1
            leads += bool(named)
        else:
            done_ab += 1
            detected += bool(named) and named[0] == "checksum (server.py)"
        print(
            f"{number:3d} {kind}: samples A {samples.get('A')}, B {samples.get('B')}; "
            f"dispersion {profile.get('dispersion')}; scale {profile.get('scale')}; "
            f"named {named or 'nothing'}; {profile['wall_s']:.0f} s; load {load()}",
            flush=True,
        )
    low, high = clopper_pearson(leads, done_aa) if done_aa else (0.0, 1.0)
    print(
        f"A/A: {leads} of {done_aa} trials named a function "
        f"(95 % CI {100 * low:.1f}..{100 * high:.1f} %)"
    )
    print(f"A/B: checksum named first in {detected} of {done_ab} trials")
    print(f"load average after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
