"""What a long run shows while it measures: renderers of ``progress.Progress``.

``LiveLine`` (a terminal) keeps one line per running measurement and rewrites it
about once a second; ``PlainLines`` (CI logs, pipes) prints one line per finished
repetition, since a log cannot be rewritten. Both write to a ``Screen``; the pytest
glue (``run/screen.py``'s ``progress_for``) provides one over the terminal reporter. Like
pytest's live logging, a measurement's lines start below the test's own line, so
the outcome (``PASSED``) follows them on a line of its own.
"""

from __future__ import annotations

from typing import Protocol

from pytest_webperf.models.progress import RepetitionDone, Tick

SIDES = {"A": "A base", "B": "B change"}


class Screen(Protocol):
    """Where the lines go: text as is (``\\r`` and ``\\n`` included)."""

    @property
    def width(self) -> int:
        """Columns of the terminal."""
        ...

    def column(self) -> int:
        """Columns already written on the current line (0: at its start)."""
        ...

    def write(self, text: str) -> None: ...


def _label(nodeid: str, name: str, side: str) -> str:
    test = nodeid.rsplit("::", 1)[-1]  # the file is on pytest's own line
    side_text = f" [{SIDES.get(side, side)}]" if side else ""
    return f"webperf {test} {name}{side_text}"


def tick_text(tick: Tick) -> str:
    return (
        f"{_label(tick.nodeid, tick.name, tick.side)}: "
        f"repetition {tick.repetition}/{tick.repetitions}, {tick.phase} "
        f"{tick.elapsed_s:.0f}/{tick.total_s:.0f}s, {tick.rps:,.0f} req/s, "
        f"{tick.errors:,} error{'' if tick.errors == 1 else 's'}"
    )


def done_text(done: RepetitionDone) -> str:
    """A repetition's line: its requests, rate, errors and p95; a counted one's requests,
    errors and instructions per request (its rate was Valgrind's, not the server's)."""
    errors = f"{done.errors:,} error{'' if done.errors == 1 else 's'}"
    if done.instructions_per_req is not None:
        return (
            f"{_label(done.nodeid, done.name, done.side)}: "
            f"repetition {done.repetition}/{done.repetitions} done, {done.requests:,} requests "
            f"counted, {errors}, {done.instructions_per_req:,.1f} instructions per request"
        )
    p95 = "" if done.p95_ms is None else f", p95 {done.p95_ms:.2f} ms"
    return (
        f"{_label(done.nodeid, done.name, done.side)}: "
        f"repetition {done.repetition}/{done.repetitions} done, {done.requests:,} requests, "
        f"{done.rps:,.0f} req/s, {done.errors:,} error{'' if done.errors == 1 else 's'}{p95}"
    )


def _fit(text: str, width: int) -> str:
    """At most ``width - 1`` columns (the last one would wrap on some terminals)."""
    room = max(width - 1, 1)
    return text if len(text) <= room else text[: room - 1] + "…"


class LiveLine:
    """One line per running measurement, rewritten in place; it ends when the
    measurement's last planned repetition is done (an A/B run that adds pairs
    afterwards starts a new line)."""

    def __init__(self, screen: Screen) -> None:
        self.screen = screen
        self._open: tuple[str, str] | None = None  # (nodeid, name) of the line being rewritten

    def _rewrite(self, text: str) -> None:
        fitted = _fit(text, self.screen.width)
        self.screen.write("\r" + fitted.ljust(max(self.screen.width - 1, 1)))

    def _start(self, key: tuple[str, str]) -> None:
        if self._open is not None:
            self.screen.write("\n")  # another measurement: keep the last state of this one
        elif self.screen.column() != 0:
            self.screen.write("\n")  # below the test's own line
        self._open = key

    def update(self, tick: Tick) -> None:
        key = (tick.nodeid, tick.name)
        if self._open != key:
            self._start(key)
        self._rewrite(tick_text(tick))

    def done(self, repetition: RepetitionDone) -> None:
        key = (repetition.nodeid, repetition.name)
        if self._open != key:
            self._start(key)
        self._rewrite(done_text(repetition))
        if repetition.repetition >= repetition.repetitions:
            self.screen.write("\n")
            self._open = None


class PlainLines:
    """One line per finished repetition; ticks are not shown (a log is not rewritten)."""

    def __init__(self, screen: Screen) -> None:
        self.screen = screen

    def update(self, tick: Tick) -> None:
        pass

    def done(self, repetition: RepetitionDone) -> None:
        if self.screen.column() != 0:
            self.screen.write("\n")
        self.screen.write(done_text(repetition) + "\n")
