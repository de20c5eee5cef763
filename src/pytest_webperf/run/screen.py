"""How a measurement's progress reaches pytest's terminal: a live line on a terminal, a
line per finished repetition in a log (CI, a pipe), nothing without a terminal reporter
(``-p no:terminal``, an xdist worker) or with ``-qq``; with --webperf-otlp the live
metrics too (pytest for annotations only: plugin.py imports it)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from pytest_webperf.models.progress import NoProgress, Progress
from pytest_webperf.report.live import LiveLine, PlainLines
from pytest_webperf.report.otlp import LiveMetrics, Tee

if TYPE_CHECKING:  # annotations only: pytest is imported by plugin.py alone
    import pytest


class TerminalScreen:
    """``live.Screen`` over pytest's terminal reporter. Measurements run
    inside a test, where output is captured: each write suspends the capture, as
    pytest's live logging does."""

    def __init__(self, config: pytest.Config, reporter: Any) -> None:
        self.config, self.reporter = config, reporter
        self.capture = config.pluginmanager.get_plugin("capturemanager")

    @property
    def width(self) -> int:
        return int(self.config.get_terminal_writer().fullwidth)

    def column(self) -> int:
        return max(int(self.config.get_terminal_writer().width_of_current_line), 0)

    def write(self, text: str) -> None:
        suspended = (
            self.capture.global_and_fixture_disabled()
            if self.capture is not None
            else contextlib.nullcontext()
        )
        with suspended:
            self.reporter.write(text, flush=True)


def with_live(progress: Progress, live: LiveMetrics | None) -> Progress:
    """The display, and with --webperf-otlp the live metrics too."""
    return progress if live is None else Tee(progress, live)


def progress_for(config: pytest.Config) -> Progress:
    """How this run shows a measurement's progress: a live line on a terminal, a line
    per finished repetition in a log (CI, a pipe), nothing without a terminal reporter
    (``-p no:terminal``, an xdist worker) or with ``-qq``."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or config.get_verbosity() < -1:
        return NoProgress()
    screen = TerminalScreen(config, reporter)
    isatty = getattr(reporter, "isatty", False)  # a bool that pytest makes callable
    on_terminal = bool(isatty() if callable(isatty) else isatty)
    if config.get_terminal_writer().hasmarkup and on_terminal:
        return LiveLine(screen)
    return PlainLines(screen)
