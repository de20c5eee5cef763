"""The report images of the documentation (docs/images/), from real runs.

    .venv/bin/python scripts/report_images.py [--keep DIR]

Two small projects are made in a temporary directory (``--keep DIR``: there, kept), each a
git repository whose last commit makes its server slower, and run A/B against the commit
before, as a user's CI runs them:

- ``timed``: the profile tests' Python server (``tests/e2e/profiled_server.py``), its
  ``checksum()`` made three times costlier, beside a server left as it was; 3 s x 3 pairs,
  py-spy names the function;
- ``counted``: the browser test's project (``tests/e2e/test_report_browser.py``): the
  counted tests' C server (``tests/e2e/counted_servers.py``), 10 % more rounds in
  ``hash_work``, counted under callgrind.

Each HTML report is laid out by headless Chromium at 1,280 px wide (as
``tests/e2e/test_report_browser.py`` does) and cut into the images the docs show:
``report-ab-summary.png`` (the timed run's first screen, 1,280 x 800),
``report-ab-pairs.png`` (its failed test's A and B per pair), ``report-counted.png`` (the
counted run's first screen). The runs take about 3 minutes; their timed figures are this
machine's of the day, as any report's are.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e.counted_servers import C_SERVER  # noqa: E402
from tests.e2e.profiled_server import SERVER  # noqa: E402
from tests.e2e.test_report_browser import COUNTED_AB  # noqa: E402

IMAGES = ROOT / "docs" / "images"
WIDTH, SCREEN = 1280, 800

TIMED_TESTS = """
import sys


def test_pages(webperf):
    target = webperf.process([sys.executable, "server.py"], name="pages")
    webperf.http(target, path="/work?page=1", interval="10ms")  # paced: lightly loaded


def test_static(webperf):
    target = webperf.process([sys.executable, "static.py"], name="static")
    webperf.http(target, path="/hello", interval="10ms")
"""
RUN = ["-p", "no:locust", "-p", "no:cacheprovider", "--webperf-against=HEAD~1"]


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True
    )


def project(repo: Path, files: dict[str, str], changed: dict[str, str]) -> Path:
    """A repository whose first commit holds ``files`` and whose second ``changed``."""
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    for name, text in {".gitignore": "build/\n*.json\n*.html\n*.md\n", **files}.items():
        (repo / name).write_text(text)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    for name, text in changed.items():
        (repo / name).write_text(text)
    git(repo, "commit", "-q", "-am", "slower")
    return repo


def run(repo: Path, *args: str) -> Path:
    """pytest in ``repo``, A/B against the commit before; its HTML report."""
    command = [sys.executable, "-m", "pytest", *RUN, *args, "--webperf-html=report.html"]
    command += ["--webperf-json=report.json", "--webperf-markdown=report.md"]
    print("+", " ".join(command), f"(in {repo})", flush=True)
    subprocess.run(command, cwd=repo, check=False)
    return repo / "report.html"


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        sys.exit("no chromium: WEBPERF_WITH_BROWSER=1 ./scripts/setup.sh installs it")
    return found


def shot(page: Path, out: Path, height: int) -> None:
    subprocess.run(
        [
            chromium(),
            *("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"),
            f"--window-size={WIDTH},{height}",
            f"--screenshot={out}",
            page.as_uri(),
        ],
        capture_output=True,
        check=True,
        timeout=120,
    )


def top_of(page: Path, selector: str) -> tuple[int, int]:
    """Where ``selector``'s first element lies on the page laid out at ``WIDTH``: its top
    and bottom in pixels."""
    script = (
        f"var r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
        "var p = document.createElement('pre'); p.id = 'where';"
        "p.textContent = JSON.stringify([r.top + scrollY, r.bottom + scrollY]);"
        "document.body.appendChild(p);"
    )
    probed = page.with_name("probed.html")
    probed.write_text(page.read_text().replace("</body>", f"<script>{script}</script></body>"))
    out = subprocess.run(
        [
            *(chromium(), "--headless", "--no-sandbox", "--disable-gpu"),
            *(f"--window-size={WIDTH},800", "--dump-dom", probed.as_uri()),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    found = re.search(r'<pre id="where">(.*?)</pre>', out, re.S)
    if found is None:
        sys.exit(f"{selector} is not on {page}")
    top, bottom = json.loads(html.unescape(found.group(1)))
    return int(top), int(bottom)


def cut(page: Path, out: Path, selector: str) -> None:
    """The part of ``page`` that ``selector`` covers, at ``WIDTH``."""
    top, bottom = top_of(page, selector)
    whole = out.with_suffix(".whole.png")
    shot(page, whole, bottom + 40)
    Image.open(whole).crop((0, max(top - 12, 0), WIDTH, bottom + 12)).save(out, optimize=True)
    whole.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="make the projects here and keep them")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="webperf-images-"))
    slower = SERVER.format(rounds=3)
    timed = project(
        work / "timed",
        {
            "server.py": SERVER.format(rounds=1),
            "static.py": SERVER.format(rounds=1).replace("work()", "work(600)"),
            "test_perf.py": TIMED_TESTS,
        },
        {"server.py": slower},
    )
    counted = project(  # the browser test's project: one test, counted against its base
        work / "counted",
        {"server.c": C_SERVER, "knobs.h": "\n", "test_counted_ab.py": COUNTED_AB},
        {"knobs.h": "#define WORK 2200\n"},
    )
    page = run(timed, "--webperf-concurrency=2", "--webperf-duration=3s", "--webperf-repeat=3")
    shot(page, IMAGES / "report-ab-summary.png", SCREEN)
    cut(page, IMAGES / "report-ab-pairs.png", "section.measurement .ab")
    page = run(counted, "--webperf-concurrency=20")
    shot(page, IMAGES / "report-counted.png", SCREEN)
    print(f"images written to {IMAGES}; the runs are in {work}")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
