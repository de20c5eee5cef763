"""The HTML report as a person sees it: rendered by headless Chromium.

A real run (a local process target, two repetitions) writes the report; every chart is
cut out of the page into a page of its own, screenshot at a fixed size, and must show
pixels in a data colour of the chart kit's palette. An empty chart (axes and a "no data"
label only, or a line drawn off the plot) is grey and black: the test fails and names it.

A real A/B run that fails (a C server counted against its base, one function doing more
work) writes the report a user opens after a failed build: laid out by Chromium at
1,280 x 800, its first screen must show the failed test, its failed check's change and
interval, and the function that changed; no table's column may be cut off at that width;
and, counted, no figure Valgrind slowed is shown as the server's.
Chromium comes from Debian's packages (``scripts/test.sh`` installs it).
"""

from __future__ import annotations

import colorsys
import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from tests.e2e.counted_servers import C_SERVER
from tests.e2e.gitrepo import commit_base, git
from tests.e2e.hello_server import HELLO_SERVER
from tests.e2e.options import SHORT

from pytest_webperf.profiling import valgrind
from pytest_webperf.report.html.svg import PALETTE

DATA_COLOURS = [c for c in PALETTE if c not in ("#000000", "#999999")]
FIGURE = re.compile(r"<figure>\s*<figcaption>(.*?)</figcaption>\s*(<svg.*?</svg>)", re.S)
TEST = """
import sys

def test_local(webperf):
    target = webperf.process([sys.executable, "server.py"], name="local-py")
    webperf.http(target, path="/hello")
"""


def rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def hue(red: int, green: int, blue: int) -> float:
    return colorsys.rgb_to_hsv(red / 255, green / 255, blue / 255)[0]


def data_pixels(png: Path) -> int:
    """Coloured pixels of a data colour's hue. Anti-aliasing blends a thin line with the
    white around it (a flat 1.5 px line at a fractional height has no pixel of its exact
    colour), which keeps its hue; axes, text and "no data" are black and grey."""
    hues = [hue(*rgb(c)) for c in DATA_COLOURS]
    raw = Image.open(png).convert("RGB").tobytes()
    count = 0
    for i in range(0, len(raw), 3):
        pixel = raw[i], raw[i + 1], raw[i + 2]
        if max(pixel) - min(pixel) < 30:  # grey: not a data colour, however blended
            continue
        h = hue(*pixel)
        if any(min(abs(h - w), 1 - abs(h - w)) < 0.04 for w in hues):
            count += 1
    return count


def screenshot(browser: str, page: Path, out: Path) -> None:
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=700,460",
            f"--screenshot={out}",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )


@pytest.fixture(scope="module")
def browser() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("no chromium: scripts/test.sh installs it (apt-get install chromium)")
    return found


def test_every_chart_of_a_real_report_shows_data(pytester: pytest.Pytester, browser: str) -> None:
    pytester.makepyfile(server=HELLO_SERVER)
    pytester.makepyfile(test_local=TEST)
    result = pytester.runpytest_subprocess(
        "-p",
        "no:locust",
        "--webperf-concurrency=2",
        "--webperf-duration=2s",
        "--webperf-warmup=0.5s",
        "--webperf-repeat=2",
        "--webperf-html=report.html",
    )
    result.assert_outcomes(passed=1)
    page = (pytester.path / "report.html").read_text()
    figures = FIGURE.findall(page)
    assert len(figures) >= 4, "the report has fewer charts than a run draws"
    empty = []
    for index, (caption, svg) in enumerate(figures):
        alone = pytester.path / f"chart-{index}.html"
        alone.write_text(
            f'<!doctype html><html><body style="margin:0;background:#fff">'
            f'<div style="width:680px">{svg}</div></body></html>'
        )
        shot = pytester.path / f"chart-{index}.png"
        screenshot(browser, alone, shot)
        if data_pixels(shot) < 40:
            empty.append(html.unescape(re.sub(r"<[^>]+>", "", caption)))
    assert not empty, f"charts without data: {empty}"


def test_the_check_detects_an_empty_chart(tmp_path: Path, browser: str) -> None:
    """The pixel check itself: an axis frame with no data is found empty."""
    from pytest_webperf.report.html.svg import line_chart

    svg = str(line_chart([], title="nothing", x_label="t", y_label="v"))
    page = tmp_path / "empty.html"
    page.write_text(f'<!doctype html><html><body style="margin:0">{svg}</body></html>')
    shot = tmp_path / "empty.png"
    screenshot(browser, page, shot)
    assert data_pixels(shot) < 40


SCREEN = (1280, 800)  # the first screen a reader sees
# Run in the page once it is laid out: what of the first finding lies within the first
# screen, and every table wider than its box or the window (one hidden in a closed
# <details> has no box: it is not drawn). Written into the page for --dump-dom to carry.
PROBE = """
(function () {
  var width = %d, height = %d;
  function seen(el) {
    var r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && r.top >= 0 && r.bottom <= height && r.right <= width;
  }
  function cells(row) { return Array.from(row.cells).map(function (c) { return c.textContent; }); }
  var out = {window: window.innerWidth, clipped: []};
  var finding = document.querySelector("section.finding");
  if (finding) {
    var name = finding.querySelector("h3 a");
    var tables = finding.querySelectorAll("table.checks");
    var failed = tables[0].querySelector("tr.bad");
    var top = tables.length > 1 ? tables[1].querySelector("tbody tr") : null;
    out.test = [name.textContent, seen(name)];
    out.check = failed ? [cells(failed), Array.from(failed.cells).every(seen)] : null;
    out.function = top ? [cells(top), Array.from(top.cells).slice(0, 4).every(seen)] : null;
  }
  document.querySelectorAll("table").forEach(function (t) {
    if (!t.offsetParent) return;
    var box = t.parentElement, right = t.getBoundingClientRect().right;
    if (right > width + 0.5 || box.scrollWidth > box.clientWidth + 1)
      out.clipped.push([t.className, cells(t.rows[0]).join(" | "), right, box.clientWidth]);
  });
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
"""


def probe(browser: str, page: Path) -> Any:
    """The page laid out at ``SCREEN`` by Chromium, and what ``PROBE`` found in it."""
    probed = page.with_name(f"{page.stem}.probed.html")
    script = PROBE % SCREEN
    probed.write_text(page.read_text().replace("</body>", f"<script>{script}</script></body>"))
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={SCREEN[0]},{SCREEN[1]}",
            "--dump-dom",
            probed.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    assert found, done.stdout[-2000:]
    return json.loads(html.unescape(found.group(1)))


COUNTED_AB = """
import pytest


@pytest.mark.webperf(compare_fail="instructions_per_req:1%,allocs_per_req:1%")
def test_work(webperf):
    target = webperf.process(
        ["build/server"],
        name="work",
        health="/health",
        build="mkdir -p build && cc -O2 -include knobs.h -o build/server server.c",
        watch=["server.c", "knobs.h"],
    )
    webperf.http(target, path="/work", count=True, requests=200)
"""


@pytest.mark.skipif(valgrind.problem() is not None, reason=str(valgrind.problem()))
def test_a_failed_ab_report_opens_on_the_failed_check_and_the_function_that_changed(
    pytester: pytest.Pytester, browser: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc) on this machine: the server cannot be built")
    monkeypatch.setenv("WEBPERF_BUILD_CACHE", str(tmp_path / "builds"))
    repo = pytester.path
    (repo / ".gitignore").write_text("build/\nstdout\nstderr\nrunpytest-*\n*.html\n")
    (repo / "server.c").write_text(C_SERVER)
    (repo / "knobs.h").write_text("/* the defaults */\n")
    pytester.makepyfile(test_counted_ab=COUNTED_AB)
    commit_base(repo)
    (repo / "knobs.h").write_text("#define WORK 2200\n")  # hash_work: 10 % more rounds
    git(repo, "commit", "-q", "-am", "more work per request")
    result = pytester.runpytest_subprocess(
        *SHORT, "--webperf-concurrency=20", "--webperf-against=HEAD~1", "--webperf-html=r.html"
    )
    result.assert_outcomes(failed=1)
    page = repo / "r.html"
    found = probe(browser, page)
    assert found["window"] == SCREEN[0]
    # the first screen: the failed test, its failed check with change and interval, and
    # the function that changed, each whole within 1,280 x 800
    assert found["test"] == ["test_work[c20]", True]
    (check, change, interval), shown = (found["check"][0][i] for i in (0, 3, 4)), found["check"][1]
    assert check == "instructions_per_req:1%" and shown, found["check"]
    assert re.fullmatch(r"\+\d+\.\d+%", change), change
    assert re.fullmatch(r"\+\d+\.\d+\.\.\+\d+\.\d+%", interval), interval
    function, shown = found["function"]
    assert function[0].startswith("hash_work") and shown, found["function"]
    assert found["clipped"] == [], found["clipped"]
    # counted: counts per request, and nothing Valgrind slowed as the server's
    text = page.read_text()
    head, rows = text.split('<table class="summary">')[1].split("</tbody>")[0].split("</thead>")
    assert ">instr/req<" in head and ">req/s<" not in head and ">p99 ms<" not in head
    assert "1 (counted)" in rows  # the users it ran, and why not its id's 20
    assert "Requests per second" not in text and "Latency per second" not in text
    assert "instructions per request (counted)" in text
