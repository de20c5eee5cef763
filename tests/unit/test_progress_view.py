"""The progress renderers, against a fake screen that keeps what was written."""

from __future__ import annotations

import dataclasses

from pytest_webperf.models.progress import RepetitionDone, Tick
from pytest_webperf.report.live import LiveLine, PlainLines, done_text, tick_text


class FakeScreen:
    def __init__(self, width: int = 200, column: int = 0) -> None:
        self.width, self._column, self.text = width, column, ""

    def column(self) -> int:
        return len(self.text.rsplit("\n", 1)[-1]) if "\n" in self.text else self._column

    def write(self, text: str) -> None:
        self.text += text

    def lines(self) -> list[str]:
        """What the terminal shows: each line as its last rewrite left it."""
        return [part.rsplit("\r", 1)[-1].rstrip() for part in self.text.split("\n")]


def tick(repetition: int = 1, elapsed: float = 3.0, side: str = "", name: str = "GET /hello"):
    return Tick(
        nodeid="test_a.py::test_hello[c5]",
        name=name,
        side=side,
        repetition=repetition,
        repetitions=2,
        phase="measuring",
        elapsed_s=elapsed,
        total_s=10.0,
        rps=4321.4,
        errors=1,
    )


def done(repetition: int, side: str = "") -> RepetitionDone:
    return RepetitionDone(
        nodeid="test_a.py::test_hello[c5]",
        name="GET /hello",
        side=side,
        repetition=repetition,
        repetitions=2,
        requests=43210,
        rps=4321.0,
        errors=0,
        p95_ms=1.234,
    )


def test_texts_say_test_side_repetition_phase_time_rate_and_errors():
    assert tick_text(tick(side="B")) == (
        "webperf test_hello[c5] GET /hello [B change]: repetition 1/2, measuring 3/10s, "
        "4,321 req/s, 1 error"
    )
    assert done_text(done(2)) == (
        "webperf test_hello[c5] GET /hello: repetition 2/2 done, 43,210 requests, "
        "4,321 req/s, 0 errors, p95 1.23 ms"
    )


def test_a_counted_repetition_says_what_it_counted_not_valgrinds_rate():
    counted = dataclasses.replace(done(1, "A"), instructions_per_req=14357.46)
    assert done_text(counted) == (
        "webperf test_hello[c5] GET /hello [A base]: repetition 1/2 done, 43,210 requests "
        "counted, 0 errors, 14,357.5 instructions per request"
    )


def test_live_line_rewrites_one_line_below_the_test_and_ends_it_when_done():
    screen = FakeScreen(column=len("test_a.py::test_hello[c5] "))
    live = LiveLine(screen)
    live.update(tick(1, 1.0))
    live.update(tick(1, 2.0))
    live.done(done(1))
    live.update(tick(2, 1.0))
    live.done(done(2))
    assert screen.text.startswith("\n\r")  # below pytest's own line
    assert screen.lines() == ["", done_text(done(2)), ""]


def test_live_line_starts_a_new_line_per_measurement():
    screen = FakeScreen()
    live = LiveLine(screen)
    live.update(tick(name="GET /a"))
    live.update(tick(name="GET /b"))
    assert screen.lines() == [tick_text(tick(name="GET /a")), tick_text(tick(name="GET /b"))]


def test_live_line_fits_the_terminal():
    screen = FakeScreen(width=40)
    LiveLine(screen).update(tick())
    (line,) = screen.lines()
    assert len(line) == 39 and line.endswith("…")
    assert all(len(part) <= 39 for part in screen.text.split("\r"))


def test_plain_lines_print_one_line_per_finished_repetition():
    screen = FakeScreen(column=10)
    plain = PlainLines(screen)
    plain.update(tick())
    plain.done(done(1, side="A"))
    plain.done(done(2, side="A"))
    assert "\r" not in screen.text
    assert screen.lines() == ["", done_text(done(1, "A")), done_text(done(2, "A")), ""]
    assert "[A base]" in screen.lines()[1]
