"""Every ``--webperf-*`` option registers and its help formats the way argparse shows it."""

from __future__ import annotations

import argparse
from typing import Any

from pytest_webperf.plugin import argparse_help, pytest_addoption
from pytest_webperf.settings.config import SETTINGS


class _Recorder:
    """Stands in for pytest's parser and its group: records what is registered."""

    def __init__(self) -> None:
        self.options: list[tuple[tuple[str, ...], dict[str, Any]]] = []
        self.ini: list[tuple[str, str]] = []

    def getgroup(self, name: str, description: str = "") -> _Recorder:
        return self

    def addoption(self, *names: str, **kwargs: Any) -> None:
        self.options.append((names, kwargs))

    def addini(self, name: str, help: str, **kwargs: Any) -> None:
        self.ini.append((name, help))


def test_every_option_help_formats_in_argparse():
    recorder = _Recorder()
    pytest_addoption(recorder)  # type: ignore[arg-type]
    parser = argparse.ArgumentParser(prog="pytest")
    for names, kwargs in recorder.options:
        parser.add_argument(*names, **kwargs)
    text = parser.format_help()  # raised ValueError on a bare % before
    assert len(recorder.options) == len(SETTINGS)
    assert "rps:5%,p95:10%" in " ".join(text.split())


def test_ini_help_is_shown_as_written():
    recorder = _Recorder()
    pytest_addoption(recorder)  # type: ignore[arg-type]
    assert dict(recorder.ini)["webperf_compare_fail"].count("%%") == 0


def test_argparse_help_escapes_percent():
    assert argparse_help("rps:5%") % {} == "rps:5%"
