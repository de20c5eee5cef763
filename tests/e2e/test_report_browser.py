"""The HTML report as a person sees it: rendered by headless Chromium, every chart checked.

A real run (a local process target, two repetitions) writes the report; every chart is
cut out of the page into a page of its own, screenshot at a fixed size, and must show
pixels in a data colour of the chart kit's palette. An empty chart (axes and a "no data"
label only, or a line drawn off the plot) is grey and black: the test fails and names it.
Chromium comes from Debian's packages (``scripts/test.sh`` installs it).
"""

from __future__ import annotations

import colorsys
import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image
from tests.e2e.hello_server import HELLO_SERVER

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
